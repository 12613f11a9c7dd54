"""CRD validation ratcheting of CEL rules (KEP-4008) in the emulator: on an update, a rule that
does not use oldSelf does not refuse a value the update leaves unchanged; values correlate
through properties and map-list keys, list items by their list; transition rules still run;
and an IpClaim status write evaluates none of the IpClaim's rules."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemu import cel_rules, schema

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
IS_IP = {"rule": "isIP(self)", "message": "not an IP"}


def spec_schema(**spec_props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": spec_props}}}


def rules(*items: dict[str, Any], **node: Any) -> dict[str, Any]:
    return {**node, "x-kubernetes-validations": list(items)}


def fields(s: dict[str, Any], obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    found, _ = schema.validate(s, copy.deepcopy(obj), old)
    return [c["field"] for c in found]


def test_an_unchanged_invalid_value_is_ratcheted_and_a_changed_one_is_not() -> None:
    s = spec_schema(ip=rules(IS_IP, type="string"), note={"type": "string"})
    old = {"spec": {"ip": "nope", "note": "a"}}  # written before the rule existed
    assert fields(s, old) == ["spec.ip"]  # a create is never ratcheted
    assert fields(s, {"spec": {"ip": "nope", "note": "b"}}, old) == []
    assert fields(s, {"spec": {"ip": "still-nope", "note": "a"}}, old) == ["spec.ip"]
    assert fields(s, {"spec": {"ip": "192.0.2.1", "note": "b"}}, old) == []


def test_a_rule_on_an_object_is_ratcheted_only_while_the_whole_object_is_unchanged() -> None:
    s = spec_schema(
        pair=rules(
            {"rule": "self.low <= self.high", "message": "low above high"},
            type="object",
            properties={"low": {"type": "integer"}, "high": {"type": "integer"}},
        ),
        note={"type": "string"},
    )
    old = {"spec": {"pair": {"low": 5, "high": 1}, "note": "a"}}
    assert fields(s, {"spec": {"pair": {"low": 5, "high": 1}, "note": "b"}}, old) == []
    assert fields(s, {"spec": {"pair": {"low": 5, "high": 2}, "note": "a"}}, old) == ["spec.pair"]


def test_items_of_an_atomic_list_are_judged_by_their_list() -> None:
    s = spec_schema(
        ips={"type": "array", "items": rules(IS_IP, type="string")}, note={"type": "string"}
    )
    old = {"spec": {"ips": ["192.0.2.1", "nope"], "note": "a"}}
    assert fields(s, {"spec": {"ips": ["192.0.2.1", "nope"], "note": "b"}}, old) == []
    # the list changed: no item correlates with an old one, the unchanged "nope" included
    changed = {"spec": {"ips": ["192.0.2.2", "nope"], "note": "a"}}
    assert fields(s, changed, old) == ["spec.ips[1]"]


def test_a_set_list_does_not_correlate_its_items_either() -> None:
    s = spec_schema(
        ips={"type": "array", "x-kubernetes-list-type": "set", "items": rules(IS_IP, type="string")}
    )
    old = {"spec": {"ips": ["nope"]}}
    assert fields(s, {"spec": {"ips": ["nope", "192.0.2.1"]}}, old) == ["spec.ips[0]"]


def test_items_of_a_map_list_correlate_by_their_keys() -> None:
    s = spec_schema(
        ports={
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "ip": rules(IS_IP, type="string")},
            },
        }
    )
    old = {"spec": {"ports": [{"name": "a", "ip": "nope"}, {"name": "b", "ip": "192.0.2.1"}]}}
    moved = {"spec": {"ports": [{"name": "b", "ip": "192.0.2.2"}, {"name": "a", "ip": "nope"}]}}
    assert fields(s, moved, old) == []  # "a" is unchanged wherever it stands
    added = {"spec": {"ports": [{"name": "c", "ip": "nope"}, {"name": "a", "ip": "nope"}]}}
    assert fields(s, added, old) == ["spec.ports[0].ip"]


def test_transition_rules_still_run_on_unchanged_values() -> None:
    s = spec_schema(
        version=rules(
            {"rule": "self > oldSelf", "message": "must grow"},
            {"rule": "self == oldSelf", "message": "never fails here"},
            type="integer",
        ),
        note={"type": "string"},
    )
    old = {"spec": {"version": 3, "note": "a"}}
    assert fields(s, {"spec": {"version": 3, "note": "b"}}, old) == ["spec.version"]
    assert fields(s, {"spec": {"version": 4, "note": "b"}}, old) == ["spec.version"]


def test_rules_on_api_version_and_kind_are_never_ratcheted() -> None:
    s = {
        "type": "object",
        "properties": {"kind": rules({"rule": "self == 'Thing'"}, type="string")},
    }
    obj = {"kind": "Other", "metadata": {"name": "x"}}
    assert fields(s, obj, copy.deepcopy(obj)) == ["kind"]


def test_an_ipclaim_status_write_evaluates_none_of_its_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cost this buys: celpy takes ~0.4 ms per evaluation, and status writes are most of
    what an emulator serving 10,000 claims does."""
    crd = yaml.safe_load((CRDS / "ipclaims.yaml").read_text())
    s = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    evaluated: list[str] = []
    real = cel_rules._evaluator()

    class Counting:
        def holds(self, expression: str, self_value: Any, old_value: Any) -> bool:
            evaluated.append(expression)
            return real.holds(expression, self_value, old_value)

        def text(self, expression: str, self_value: Any, old_value: Any) -> str | None:
            return real.text(expression, self_value, old_value)

    monkeypatch.setattr(cel_rules, "_evaluator", Counting)
    cel_rules._RESULTS.clear()
    old = {
        "apiVersion": "eipctl.io/v1alpha1",
        "kind": "IpClaim",
        "metadata": {"name": "192-0-2-7"},
        "spec": {"ip": "192.0.2.7", "prefixLength": 32, "nodeName": "n1"},
        "status": {"phase": "Scheduled"},
    }
    assert fields(s, old) == []
    schema.validate(s, old)  # stored as created: defaulted
    evaluated.clear()
    bound = copy.deepcopy(old)
    bound["status"] = {"phase": "Bound", "boundNode": "n1"}
    assert fields(s, bound, old) == []
    assert evaluated == []
    moved = copy.deepcopy(old)
    moved["spec"]["ip"] = "192.0.2.8"
    assert fields(s, moved, old) == ["spec.ip"]  # ip is immutable
    assert len(evaluated) == 3  # the spec's rule, isIP and the immutability rule
