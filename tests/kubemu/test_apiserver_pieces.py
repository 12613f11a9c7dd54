"""The pure pieces: selectors, patches, JSONPath, schema checks."""

from __future__ import annotations

import pytest

from kubemu import patching, schema, selectors, tables
from kubemu.errors import ApiError


def obj(**labels: str) -> dict[str, object]:
    return {"metadata": {"name": "n", "namespace": "ns", "labels": labels}}


@pytest.mark.parametrize(
    ("sel", "labels", "want"),
    [
        ("a=1", {"a": "1"}, True),
        ("a==1", {"a": "2"}, False),
        ("a!=1", {}, True),
        ("a in (1, 2),b", {"a": "2", "b": ""}, True),
        ("a notin (1,2)", {"a": "1"}, False),
        ("a notin (1,2)", {}, True),
        ("!a", {"a": "1"}, False),
        ("eipctl.io/node=n1", {"eipctl.io/node": "n1"}, True),
    ],
)
def test_label_selector(sel: str, labels: dict[str, str], want: bool) -> None:
    pred = selectors.label_selector(sel)
    assert pred is not None and pred(obj(**labels)) is want


def test_bad_selector_is_bad_request() -> None:
    with pytest.raises(ApiError) as exc:
        selectors.label_selector("a in 1")
    assert exc.value.code == 400


def test_field_selector() -> None:
    pred = selectors.field_selector("metadata.name=n,metadata.namespace!=other")
    assert pred is not None and pred(obj())


def test_strategic_merge_merges_ports_by_key() -> None:
    svc = {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443}], "externalIPs": ["a"]}}
    out = patching.strategic_merge_patch(
        svc, {"spec": {"ports": [{"port": 80, "name": "web"}], "externalIPs": ["b"]}}
    )
    assert out["spec"]["ports"] == [{"port": 80, "name": "web"}, {"port": 443}]
    assert out["spec"]["externalIPs"] == ["b"]
    assert svc["spec"]["ports"][0]["name"] == "http"  # input untouched


def test_json_patch_ops_and_failed_test() -> None:
    doc = {"a": [1, 2], "b": {"c": 1}}
    out = patching.json_patch(
        doc,
        [
            {"op": "add", "path": "/a/-", "value": 3},
            {"op": "remove", "path": "/b/c"},
            {"op": "move", "from": "/a/0", "path": "/b/first"},
        ],
    )
    assert out == {"a": [2, 3], "b": {"first": 1}} and doc["a"] == [1, 2]
    with pytest.raises(ApiError):
        patching.json_patch(doc, [{"op": "test", "path": "/b/c", "value": 2}])


def test_json_path_forms() -> None:
    o = {"a": {"b": [{"c": 1}, {"c": 2}]}, "metadata": {"labels": {"x.io/y": "v"}}}
    assert tables.json_path_values(o, tables.parse_json_path(".a.b[0].c")) == [1]
    assert tables.json_path_values(o, tables.parse_json_path(".a.b[*].c")) == [1, 2]
    assert tables.json_path_values(o, tables.parse_json_path(r".metadata.labels.x\.io/y")) == ["v"]
    assert tables.json_path_values(o, tables.parse_json_path(".metadata.labels['x.io/y']")) == ["v"]


def test_schema_anyof_and_defaults() -> None:
    s = {
        "type": "object",
        "properties": {
            "ip": {
                "type": "string",
                "anyOf": [{"pattern": "^[0-9.]+$"}, {"pattern": "^[0-9a-f:]+$"}],
            },
            "d": {"type": "boolean", "default": False},
        },
    }
    o = {"ip": "2001:db8::1"}
    assert schema.validate(s, o) == ([], []) and o["d"] is False
    causes, _ = schema.validate(s, {"ip": "zz"})
    assert [c["field"] for c in causes] == ["ip"]


def test_schema_list_types() -> None:
    s = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "conds": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "properties": {"type": {"type": "string"}}},
            },
        },
    }
    causes, _ = schema.validate(
        s, {"tags": ["a", "b", "a"], "conds": [{"type": "X"}, {"type": "X"}]}
    )
    assert sorted(c["field"] for c in causes) == ["conds[1]", "tags[2]"]
    assert all(c["reason"] == "FieldValueDuplicate" for c in causes)
