"""The Kubernetes protobuf codec: byte vectors pinned to the real field numbers, what kubectl
1.37 really sends, round trips for every kind, and garbage that must be a clean error."""

from __future__ import annotations

import base64
import contextlib
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubemu.errors import ApiError
from kubemu.protobuf import (
    UnencodableError,
    decode_object,
    encode_object,
    wants_protobuf,
)
from kubemu.protobuf_types import KINDS, MESSAGES, Field
from kubemu.protobuf_wire import (
    DecodeError,
    decode_varint,
    encode_varint,
    unwrap,
)

MAGIC = "6b387300"  # k8s\0


def envelope(api_version: str, kind: str, raw: str) -> bytes:
    """magic + runtime.Unknown{1: typeMeta{1: apiVersion, 2: kind}, 2: raw, 3: "", 4: ""}."""
    type_meta = f"0a{len(api_version):02x}{api_version.encode().hex()}"
    type_meta += f"12{len(kind):02x}{kind.encode().hex()}"
    unknown = f"0a{len(type_meta) // 2:02x}{type_meta}12{len(raw) // 2:02x}{raw}1a002200"
    return bytes.fromhex(MAGIC + unknown)


# Namespace{1: metadata ObjectMeta{1: name "ns1", 11: labels {app: web}}}, by hand:
# 0a 11 (field 1, 17 bytes) | 0a 03 "ns1" (name) | 5a 0a (field 11, an entry of 10 bytes)
# | 0a 03 "app" (key) | 12 03 "web" (value)
NAMESPACE_RAW = "0a11" + "0a036e7331" + "5a0a" + "0a03617070" + "1203776562"
NAMESPACE = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "ns1", "labels": {"app": "web"}},
}


def test_namespace_bytes_by_hand() -> None:
    body = envelope("v1", "Namespace", NAMESPACE_RAW)
    assert body.hex().startswith("6b3873000a0f0a02763112094e616d657370616365")
    assert encode_object(NAMESPACE) == body
    assert decode_object(body) == NAMESPACE


def test_service_bytes_by_hand() -> None:
    # ServiceSpec: 1 ports [ServicePort{3: port 80, 4: targetPort IntOrString{1: type 1
    # (string), 2: intVal 0, 3: strVal "http"}}], 4 type, 5 externalIPs;
    # ServiceStatus{1: loadBalancer{1: ingress [{1: ip, 3: ipMode}]}}
    port = "1850" + "220a" + "0801" + "1000" + "1a0468747470"
    spec = f"0a{len(port) // 2:02x}{port}" + "220c4c6f616442616c616e636572" + "2a07312e322e332e34"
    ingress = "0a07312e322e332e34" + "1a03564950"
    status = f"0a{len(ingress) // 2 + 2:02x}0a{len(ingress) // 2:02x}{ingress}"
    raw = "0a050a03776562" + f"12{len(spec) // 2:02x}{spec}" + f"1a{len(status) // 2:02x}{status}"
    obj = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {
            "ports": [{"port": 80, "targetPort": "http"}],
            "type": "LoadBalancer",
            "externalIPs": ["1.2.3.4"],
        },
        "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4", "ipMode": "VIP"}]}},
    }
    body = envelope("v1", "Service", raw)
    assert encode_object(obj) == body
    assert decode_object(body) == obj


def test_time_negative_int32_pointer_zero_and_int_or_string_int() -> None:
    # ObjectMeta 8: creationTimestamp Time{1: seconds 1700000000, 2: nanos 0};
    # DeploymentSpec 1: replicas -1 (ten bytes), 7: paused; RollingUpdate 1: maxUnavailable 0
    meta = "0a0164" + "4208" + "0880e2cfaa06" + "1000"
    rolling = "0a06" + "0800" + "1000" + "1a00"
    strategy = f"12{len(rolling) // 2:02x}{rolling}"
    spec = "08ffffffffffffffffff01" + f"22{len(strategy) // 2:02x}{strategy}" + "3801"
    raw = f"0a{len(meta) // 2:02x}{meta}12{len(spec) // 2:02x}{spec}"
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {
            "replicas": -1,
            "strategy": {"rollingUpdate": {"maxUnavailable": 0}},
            "paused": True,
        },
    }
    body = envelope("apps/v1", "Deployment", raw)
    assert encode_object(obj) == body
    assert decode_object(body) == obj


def test_self_subject_review_answer_bytes_by_hand() -> None:
    # SelfSubjectReview{2: status{1: userInfo{1: username "u", 3: groups ["g"],
    # 4: extra {"k": ExtraValue{1: items ["a", "b"]}}}}}: ExtraValue is a message on the wire
    # and a bare list in JSON
    extra_value = "0a01610a0162"
    entry = "0a016b" + f"12{len(extra_value) // 2:02x}{extra_value}"
    user = "0a0175" + "1a0167" + f"22{len(entry) // 2:02x}{entry}"
    status = f"0a{len(user) // 2:02x}{user}"
    raw = f"12{len(status) // 2:02x}{status}"
    obj = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
        "status": {"userInfo": {"username": "u", "groups": ["g"], "extra": {"k": ["a", "b"]}}},
    }
    body = envelope("authentication.k8s.io/v1", "SelfSubjectReview", raw)
    assert encode_object(obj) == body
    assert decode_object(body) == obj
    # the access review's answer: status{1: allowed} is written even when false
    answer = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"path": "/x", "verb": "get"}},
        "status": {"allowed": False},
    }
    attributes = "0a022f78" + "1203676574"  # 1: path "/x", 2: verb "get"
    spec = f"12{len(attributes) // 2:02x}{attributes}"
    raw = f"12{len(spec) // 2:02x}{spec}" + "1a020800"
    body = envelope("authorization.k8s.io/v1", "SelfSubjectAccessReview", raw)
    assert encode_object(answer) == body
    assert decode_object(body) == answer
    # an ExtraValue item must be a string, not a varint
    entry = "0a016b" + "12020801"
    raw = "120b" + "0a09" + f"22{len(entry) // 2:02x}{entry}"
    with pytest.raises(DecodeError, match="ExtraValue"):
        decode_object(envelope("authentication.k8s.io/v1", "SelfSubjectReview", raw))


# What kubectl 1.37 sent to the emulator (`create namespace ns1`, `create service clusterip
# svc1 --tcp=80:8080`, `create deployment dep1 --image=nginx --port=80`, `auth can-i create
# ipclaims`, `auth can-i get /healthz`, `auth whoami`): Go writes every non-pointer field,
# empty or not, and the JSON of the decoded object leaves those out.
KUBECTL_BODIES = {
    "can-i": (
        "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a6563"
        "74416363657373526576696577124c0a100a0012001a0022002a00320038004200122e0a2c0a0764656661"
        "756c7412066372656174651a0965697063746c2e696f22002a086970636c61696d7332003a001a08080012"
        "001a0020001a002200",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "namespace": "default",
                    "verb": "create",
                    "group": "eipctl.io",
                    "resource": "ipclaims",
                }
            },
            "status": {"allowed": False},
        },
    ),
    "can-i-non-resource": (
        "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a6563"
        "74416363657373526576696577122f0a100a0012001a0022002a003200380042001211120f0a082f686561"
        "6c74687a12036765741a08080012001a0020001a002200",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}},
            "status": {"allowed": False},
        },
    ),
    "whoami": (
        "6b3873000a2d0a1861757468656e7469636174696f6e2e6b38732e696f2f7631121153656c665375626a65"
        "6374526576696577121a0a100a0012001a0022002a0032003800420012060a040a0012001a002200",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    ),
    "namespace": (
        "6b3873000a0f0a02763112094e616d657370616365121b0a130a036e733112001a0022002a00320038004200"
        "12001a020a001a002200",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}},
    ),
    "service": (
        "6b3873000a0d0a027631120753657276696365126c0a210a047376633112001a0022002a003200380042005a"
        "0b0a0361707012047376633112430a1b0a0738302d38303830120354435018502207080010903f1a00280012"
        "0b0a036170701204737663311a002209436c757374657249503a00420052005a00600068001a020a001a0022"
        "00",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "svc1", "labels": {"app": "svc1"}},
            "spec": {
                "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                "selector": {"app": "svc1"},
                "type": "ClusterIP",
            },
        },
    ),
    "deployment": (
        "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412bc010a210a046465703112001a002200"
        "2a003200380042005a0b0a036170701204646570311288010801120d0a0b0a036170701204646570311a6d0a"
        "1d0a0012001a0022002a003200380042005a0b0a03617070120464657031124c122e0a056e67696e7812056e"
        "67696e782a00320a0a001000185022002a0042006a007200800100880100900100a201001a00320042004a00"
        "52005800600068008201008a01009a0100c2010022020a00280038001a0c0800100018002000280038001a00"
        "2200",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "dep1", "labels": {"app": "dep1"}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "dep1"}},
                "template": {
                    "metadata": {"labels": {"app": "dep1"}},
                    "spec": {
                        "containers": [
                            {"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80}]}
                        ]
                    },
                },
            },
        },
    ),
}


@pytest.mark.parametrize("what", sorted(KUBECTL_BODIES))
def test_what_kubectl_sends(what: str) -> None:
    body, obj = KUBECTL_BODIES[what]
    assert decode_object(bytes.fromhex(body)) == obj
    assert decode_object(encode_object(obj)) == obj


def test_unknown_fields_are_skipped() -> None:
    # field 99 varint, 98 bytes, 97 fixed64, 96 fixed32, in the object and in its metadata
    extra = "98062a" + "92060161" + "8906" + "00" * 8 + "8506" + "00" * 4
    meta = "0a036e7331" + extra
    raw = f"0a{len(meta) // 2:02x}{meta}" + extra
    assert decode_object(envelope("v1", "Namespace", raw))["metadata"] == {"name": "ns1"}


def test_kind_from_the_path_when_type_meta_is_empty() -> None:
    body = bytes.fromhex(MAGIC + f"12{len(NAMESPACE_RAW) // 2:02x}{NAMESPACE_RAW}")
    assert decode_object(body, "/api/v1/namespaces") == NAMESPACE
    cm = decode_object(bytes.fromhex(MAGIC + "12050a030a0161"), "/api/v1/namespaces/x/configmaps")
    assert cm == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    opts = decode_object(bytes.fromhex(MAGIC + "12021801"), "/api/v1/namespaces/x", "DELETE")
    assert opts == {"apiVersion": "v1", "kind": "DeleteOptions", "orphanDependents": True}


def test_a_kind_without_a_table_is_415() -> None:
    with pytest.raises(ApiError) as err:
        decode_object(envelope("eipctl.io/v1alpha1", "IpClaim", ""))
    assert err.value.code == 415 and err.value.reason == "UnsupportedMediaType"
    with pytest.raises(ApiError):
        decode_object(bytes.fromhex(MAGIC + "0a0f0a02763112094e616d657370616365" + "1a04677a6970"))


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"", "magic"),
        (b'{"kind": "Namespace"}', "magic"),
        (bytes.fromhex(MAGIC + "0a"), "truncated varint"),
        (bytes.fromhex(MAGIC + "0a80"), "truncated varint"),
        (bytes.fromhex(MAGIC + "0aff" + "ff" * 10), "longer than 10"),
        (bytes.fromhex(MAGIC + "0a7f00"), "past the end"),
        (bytes.fromhex(MAGIC + "0b"), "wire type 3"),
        (bytes.fromhex(MAGIC + "00"), "field number 0"),
        (bytes.fromhex(MAGIC + "0801"), "wrong wire type"),
        (bytes.fromhex(MAGIC + "0a010a"), "truncated varint"),
        (bytes.fromhex(MAGIC + "0a040a02ffff"), "UTF-8"),
        (bytes.fromhex(MAGIC + "8d06"), "truncated fixed"),
        (envelope("v1", "Namespace", "0a020801"), "wire type 0"),  # ObjectMeta.name as varint
        (envelope("v1", "Namespace", "0a025a02"), "past the end"),
        (envelope("v1", "Namespace", "0a035a0108"), "truncated varint"),
        (envelope("v1", "ConfigMap", "12020801"), "map entry"),
        (envelope("v1", "Service", "12040a021880"), "truncated varint"),  # ports[0].port
        (envelope("v1", "Namespace", "0a0c420a08ffffffffffffffff7f"), "out of range"),
        (envelope("v1", "Namespace", "0a04420209ff"), "truncated fixed"),
    ],
)
def test_garbage_is_a_decode_error(body: bytes, error: str) -> None:
    with pytest.raises(DecodeError, match=error):
        decode_object(body)


@settings(max_examples=300, deadline=None)
@given(rest=st.binary(max_size=64), kind=st.sampled_from(sorted(KINDS)))
def test_random_bytes_decode_or_fail_cleanly(rest: bytes, kind: tuple[str, str]) -> None:
    for body in (bytes.fromhex(MAGIC) + rest, envelope(*kind, rest.hex()[:250])):
        with contextlib.suppress(DecodeError, ApiError):  # ApiError: 415, an unknown kind
            decode_object(body)


def test_varints() -> None:
    for n in (0, 1, 127, 128, 300, 2**31 - 1, 2**63 - 1, 2**64 - 1):
        assert decode_varint(encode_varint(n), 0) == (n, len(encode_varint(n)))
    assert encode_varint(300).hex() == "ac02"
    assert unwrap(envelope("v1", "Namespace", "")).kind == "Namespace"


@pytest.mark.parametrize(
    "obj",
    [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "managedFields": []}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": 3}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"labels": {"a": 1}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"finalizers": "x"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"creationTimestamp": "now"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"creationTimestamp": "2024-01-01"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"generation": 2**63}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"generation": True}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "\ud800"}},
        {"apiVersion": "v1", "kind": "Secret", "data": {"a": "not base64!"}},
        {"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"targetPort": 2**40}]}},
        {"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"targetPort": 1.5}]}},
        {"apiVersion": "v1", "kind": "Pod", "spec": {"volumes": [{"name": "v"}]}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {}},
        {"apiVersion": "v1", "kind": "Namespace", "spec": []},
        {"kind": "Namespace"},
        [],
    ],
)
def test_what_the_tables_cannot_say_is_unencodable(obj: Any) -> None:
    with pytest.raises(UnencodableError):
        encode_object(obj)


def test_accept() -> None:
    assert wants_protobuf("application/vnd.kubernetes.protobuf,application/json")
    assert not wants_protobuf("application/json, */*")
    assert not wants_protobuf("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io")
    assert not wants_protobuf("")


# --- round trips: objects drawn from the tables themselves --------------------------------

_INT = {"int32": st.integers(-(2**31), 2**31 - 1), "int64": st.integers(-(2**63), 2**63 - 1)}
_TIMES = st.datetimes(datetime(1900, 1, 1), datetime(9999, 12, 31)).map(
    lambda d: d.replace(tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
)
_QUANTITIES = st.sampled_from(["0", "1", "100m", "1Gi", "2.5", "64Mi"])


def _scalar(kind: str, zero: bool) -> st.SearchStrategy[Any]:
    """A value of a kind; `zero`: may be the zero value (a field that keeps it)."""
    if kind in MESSAGES:
        inner = message(kind)
        return inner if zero else inner.filter(bool)
    strategies: dict[str, st.SearchStrategy[Any]] = {
        "string": st.text(max_size=8),
        "bool": st.booleans(),
        "bytes": st.binary(max_size=8).map(lambda b: base64.b64encode(b).decode()),
        "Time": _TIMES,
        "Quantity": _QUANTITIES,
        "IntOrString": st.one_of(_INT["int32"], st.text(max_size=8)),
        "ExtraValue": st.lists(st.text(max_size=4), max_size=2),
        **_INT,
    }
    value = strategies[kind]
    return value if zero else value.filter(lambda v: v not in ("", 0, False))


def _field(f: Field) -> st.SearchStrategy[Any]:
    if f.map:
        return st.dictionaries(st.text(max_size=6), _scalar(f.kind, True), min_size=1, max_size=2)
    if f.repeated:
        return st.lists(_scalar(f.kind, True), min_size=1, max_size=2)
    return _scalar(f.kind, f.pointer or f.keep)


def message(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object of a message: any subset of its fields, with values that survive a
    round trip (Go's omitempty drops zero values of plain fields)."""
    msg = MESSAGES[name]
    plain = st.fixed_dictionaries({}, optional={f.name: _field(f) for f in msg.fields if f.name})
    inline = [message(f.kind) for f in msg.fields if f.inline]
    if not inline:
        return plain
    return st.tuples(plain, *inline).map(lambda parts: {k: v for p in parts for k, v in p.items()})


@pytest.mark.parametrize(("api_version", "kind"), sorted(KINDS))
def test_round_trip_every_kind(api_version: str, kind: str) -> None:
    @settings(
        max_examples=15 if kind.endswith("List") else 40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(body=message(KINDS[api_version, kind].name))
    def round_trip(body: dict[str, Any]) -> None:
        obj = {"apiVersion": api_version, "kind": kind, **body}
        assert decode_object(encode_object(obj)) == obj

    round_trip()
