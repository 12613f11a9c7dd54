"""CRD x-kubernetes-validations in the emulator: rule evaluation, the causes a real apiserver
writes, transition rules, and the 422 a client sees for the deploy/ CRDs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from kubemu import ApiServer, cel_eval, cel_rules, schema

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


def spec_schema(**spec_props: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": spec_props}},
    }


def rules(*items: dict[str, Any], **node: Any) -> dict[str, Any]:
    return {**node, "x-kubernetes-validations": list(items)}


def causes(s: dict[str, Any], obj: dict[str, Any], old: dict[str, Any] | None = None) -> Any:
    found, _ = schema.validate(s, copy.deepcopy(obj), old)
    return found


def test_failed_rule_is_worded_as_kubernetes_does() -> None:
    s = spec_schema(
        cidr=rules({"rule": "isCIDR(self)", "message": "cidr must be a CIDR"}, type="string")
    )
    assert causes(s, {"spec": {"cidr": "10.0.0.0/33"}}) == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec.cidr",
            "message": 'Invalid value: "string": cidr must be a CIDR',
        }
    ]
    assert causes(s, {"spec": {"cidr": "10.0.0.0/8"}}) == []


def test_message_defaults_message_expression_reason_and_field_path() -> None:
    s = spec_schema(
        a=rules({"rule": "self > 1"}, type="integer"),
        b=rules(
            {
                "rule": "isIP(self)",
                "message": "plain",
                "messageExpression": "'b ' + self + ' is not an IP'",
            },
            type="string",
        ),
        c=rules({"rule": "self != 'x'", "reason": "FieldValueForbidden"}, type="string"),
        d=rules(
            {"rule": "has(self.e)", "message": "e is needed", "fieldPath": ".e"},
            {"rule": "self.size() < 1", "reason": "FieldValueDuplicate"},
            type="object",
            properties={"e": {"type": "string"}, "f": {"type": "string"}},
        ),
        g=rules({"rule": "isIP(self)", "messageExpression": "1 + 1"}, type="string"),
    )
    obj = {"spec": {"a": 0, "b": "nope", "c": "x", "d": {"f": "y"}, "g": "z"}}
    assert causes(s, obj) == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec.a",
            "message": 'Invalid value: "integer": failed rule: self > 1',
        },
        {
            "reason": "FieldValueInvalid",
            "field": "spec.b",
            "message": 'Invalid value: "string": b nope is not an IP',
        },
        {
            "reason": "FieldValueForbidden",
            "field": "spec.c",
            "message": "Forbidden: failed rule: self != 'x'",
        },
        {
            "reason": "FieldValueInvalid",
            "field": "spec.d.e",
            "message": 'Invalid value: "object": e is needed',
        },
        {
            "reason": "FieldValueDuplicate",
            "field": "spec.d",
            "message": 'Duplicate value: "object"',
        },
        {  # a messageExpression that is not a string falls back to the rule
            "reason": "FieldValueInvalid",
            "field": "spec.g",
            "message": 'Invalid value: "string": failed rule: isIP(self)',
        },
    ]


def test_evaluation_and_compile_errors_are_causes() -> None:
    s = spec_schema(
        a=rules({"rule": "cidr(self).prefixLength() > 8", "message": "big"}, type="string"),
        b=rules({"rule": "self ==== 1"}, type="string"),
    )
    [eval_error, compile_error] = causes(s, {"spec": {"a": "x", "b": "y"}})
    assert eval_error["field"] == "spec.a"
    assert "network address parse error" in eval_error["message"]
    assert eval_error["message"].endswith("evaluating rule: big")
    assert compile_error["field"] == "spec.b"
    assert "rule compile error" in compile_error["message"]


def test_rules_reach_items_map_values_and_the_root() -> None:
    s = {
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('ok')"}],
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "ips": {"type": "array", "items": rules({"rule": "isIP(self)"}, type="string")},
                    "byName": {
                        "type": "object",
                        "additionalProperties": rules({"rule": "isIP(self)"}, type="string"),
                    },
                },
            }
        },
    }
    obj = {
        "metadata": {"name": "bad", "labels": {"a": "b"}},
        "spec": {"ips": ["192.0.2.1", "nope"], "byName": {"k": "x"}},
    }
    assert [c["field"] for c in causes(s, obj)] == ["<nil>", "spec.ips[1]", "spec.byName[k]"]


def test_transition_rules_need_an_old_value() -> None:
    s = spec_schema(
        ip=rules({"rule": "self == oldSelf", "message": "ip is immutable"}, type="string"),
        items={
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": rules(
                {"rule": "self.size == oldSelf.size", "message": "size is immutable"},
                type="object",
                required=["name"],
                properties={"name": {"type": "string"}, "size": {"type": "integer"}},
            ),
        },
    )
    old = {"spec": {"ip": "192.0.2.1", "items": [{"name": "a", "size": 1}]}}
    assert causes(s, old) == []  # a create has no old value
    new = {
        "spec": {"ip": "192.0.2.2", "items": [{"name": "b", "size": 2}, {"name": "a", "size": 3}]}
    }
    assert [(c["field"], c["message"]) for c in causes(s, new, old)] == [
        ("spec.ip", 'Invalid value: "string": ip is immutable'),
        ("spec.items[1]", 'Invalid value: "object": size is immutable'),
    ]


def test_blocking_schema_errors_skip_the_rules() -> None:
    s = spec_schema(
        cidr=rules({"rule": "isCIDR(self)"}, type="string", maxLength=5),
        n={"type": "integer", "minimum": 3},
    )
    assert causes(s, {"spec": {"cidr": "10.0.0.0/33"}})[-1] == cel_rules.NOT_CHECKED
    found = causes(s, {"spec": {"cidr": "x", "n": 1}})  # minimum is not blocking
    assert [c["field"] for c in found] == ["spec.n", "spec.cidr"]


def test_results_for_scalars_are_cached_per_rule() -> None:
    s = spec_schema(a=rules({"rule": "isIP(self)", "message": "m1"}, type="string"))
    t = spec_schema(a=rules({"rule": "isIP(self)", "message": "m2"}, type="string"))
    assert causes(s, {"spec": {"a": "x"}})[0]["message"].endswith("m1")
    assert causes(t, {"spec": {"a": "x"}})[0]["message"].endswith("m2")


def test_cached_results_keep_equal_values_of_other_types_apart() -> None:
    """1, 1.0 and True are one key to a dict; not to the cache (an untyped node takes all)."""
    s = spec_schema(v=rules({"rule": "type(self) == int", "message": "not an int"}))
    assert causes(s, {"spec": {"v": 1}}) == []
    assert [c["field"] for c in causes(s, {"spec": {"v": True}})] == ["spec.v"]
    assert [c["field"] for c in causes(s, {"spec": {"v": 1.0}})] == ["spec.v"]
    assert causes(s, {"spec": {"v": 1}}) == []


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((CRDS / name).read_text())
    return doc


@pytest.fixture
async def crds(apiserver: ApiServer) -> ApiServer:
    await apiserver.load_crds_from_dir(CRDS)
    return apiserver


async def post(srv: ApiServer, plural: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession(srv.url) as http,
        http.post(f"/apis/eipctl.io/v1alpha1/{plural}", json=body) as r,
    ):
        return r.status, await r.json()


async def test_bad_cidr_is_refused_with_the_rule_message(crds: ApiServer) -> None:
    pool = {
        "apiVersion": "eipctl.io/v1alpha1",
        "kind": "IpClaimPool",
        "metadata": {"name": "x"},
        "spec": {"cidr": "10.0.0.0/33"},
    }
    code, status = await post(crds, "ipclaimpools", pool)
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["message"] == (
        'IpClaimPool.eipctl.io "x" is invalid: spec.cidr: Invalid value: "string": '
        "cidr must be an IP prefix such as 192.0.2.0/24 or 2001:db8::/64"
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec.cidr",
            "message": 'Invalid value: "string": cidr must be an IP prefix such as '
            "192.0.2.0/24 or 2001:db8::/64",
        }
    ]
    pool["spec"] = {"cidr": "2001:db8::/64", "exclude": ["2001:db8::1", "::1.2.3.4"]}
    code, status = await post(crds, "ipclaimpools", pool)
    assert code == 422 and [c["field"] for c in status["details"]["causes"]] == ["spec.exclude[1]"]
    pool["spec"]["exclude"] = ["2001:db8::1", "2001:db8::100/120"]
    assert (await post(crds, "ipclaimpools", pool))[0] == 201


async def test_claim_ip_rule_and_immutability(crds: ApiServer) -> None:
    claim = {
        "apiVersion": "eipctl.io/v1alpha1",
        "kind": "IpClaim",
        "metadata": {"name": "a"},
        "spec": {"ip": "::ffff:203.0.113.7"},
    }
    code, status = await post(crds, "ipclaims", claim)
    assert code == 422
    assert 'spec.ip: Invalid value: "string": ip must be an IP address' in status["message"]
    claim["spec"]["ip"] = "203.0.113.7"
    assert (await post(crds, "ipclaims", claim))[0] == 201
    stored = crds.store.get("eipctl.io", "ipclaims", "a")
    stored["spec"]["ip"] = "203.0.113.8"
    with pytest.raises(Exception) as exc:
        crds.store.update("eipctl.io", "ipclaims", stored)
    assert 'spec.ip: Invalid value: "string": ip is immutable' in str(exc.value)


def test_deploy_crd_rules_compile_and_hold_for_the_examples() -> None:
    examples = Path(__file__).resolve().parents[2] / "deploy" / "examples"
    kinds = {
        load(n)["spec"]["names"]["kind"]: load(n) for n in ("ipclaimpools.yaml", "ipclaims.yaml")
    }
    for path in sorted(examples.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        crd = kinds[doc["kind"]]
        s = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert cel_rules.check(s, doc) == [], json.dumps(doc)


def test_without_cel_python_only_immutability_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """cel-python is a test extra: a plain install keeps `self == oldSelf` and skips the rest."""
    monkeypatch.setattr(cel_rules, "_evaluator", cel_eval.ImmutableOnly)
    s = spec_schema(
        ip=rules(
            {"rule": "isIP(self) && self.size() > 0", "message": "not checked"},
            {"rule": "self  ==  oldSelf", "message": "still immutable"},
            type="string",
        )
    )
    assert causes(s, {"spec": {"ip": "nope"}}) == []
    found = causes(s, {"spec": {"ip": "nope"}}, {"spec": {"ip": "192.0.2.1"}})
    assert [c["message"] for c in found] == ['Invalid value: "string": still immutable']
