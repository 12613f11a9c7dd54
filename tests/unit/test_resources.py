"""Typed resources: round trips, agreement with the CRD schemas, errors that name the field."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft4Validator, FormatChecker

from eipctl.core.conditions import Condition
from eipctl.core.naming import LABEL_NODE, LABEL_POOL, claim_name_for
from eipctl.core.resources import (
    MAX_COUNT,
    IpClaim,
    IpClaimPool,
    IpClaimPoolSpec,
    IpClaimPoolStatus,
    IpClaimSpec,
    IpClaimStatus,
    IpNode,
    IpNodeSpec,
    IpNodeStatus,
    ResourceError,
)
from eipctl.core.selectors import LabelSelector, Requirement

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KINDS: dict[str, type[IpClaimPool] | type[IpClaim] | type[IpNode]] = {
    "IpClaimPool": IpClaimPool,
    "IpClaim": IpClaim,
    "IpNode": IpNode,
}


def crd_validators() -> dict[str, Draft4Validator]:
    validators = {}
    for path in (DEPLOY / "crds").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        validators[crd["spec"]["names"]["kind"]] = Draft4Validator(
            schema, format_checker=FormatChecker()
        )
    return validators


VALIDATORS = crd_validators()

# --- strategies ----------------------------------------------------------------------------

dns_label = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,12}[a-z0-9])?", fullmatch=True)
dns_name = st.builds(".".join, st.lists(dns_label, min_size=1, max_size=3))
label_key = st.one_of(dns_label, st.builds("{}/{}".format, dns_name, dns_label))
label_value = st.from_regex(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?", fullmatch=True)
labels = st.dictionaries(label_key, label_value, max_size=3)

metadata = st.fixed_dictionaries(
    {"name": dns_name},
    optional={
        "labels": labels,
        "annotations": st.dictionaries(label_key, st.text(max_size=20), max_size=2),
        "resourceVersion": st.integers(1, 10**9).map(str),
        "generation": st.integers(1, 10**6),
        "uid": st.uuids().map(str),
    },
)

MAPPED = ipaddress.ip_network("::ffff:0:0/96")
addresses = st.one_of(
    st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address),
    st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address).filter(lambda a: a not in MAPPED),
)
ips = addresses.map(str)


@st.composite
def cidrs(draw: st.DrawFn) -> str:
    address = draw(addresses)
    return f"{address}/{draw(st.integers(0, address.max_prefixlen))}"


@st.composite
def prefix_lengths(draw: st.DrawFn, ip: str) -> int | None:
    bits = ipaddress.ip_interface(ip).max_prefixlen
    return draw(st.none() | st.integers(1, bits))


times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda t: t.replace(microsecond=0))
conditions = st.lists(
    st.builds(
        Condition,
        type=st.from_regex(r"[A-Z][A-Za-z]{0,10}", fullmatch=True),
        status=st.sampled_from(["True", "False", "Unknown"]),
        last_transition_time=times,
        reason=st.just("")
        | st.from_regex(r"[A-Za-z]([A-Za-z0-9_,:]{0,8}[A-Za-z0-9_])?", fullmatch=True),
        message=st.text(max_size=30),
        observed_generation=st.none() | st.integers(0, 2**40),
    ),
    max_size=3,
    unique_by=lambda c: c.type,
).map(tuple)

requirements = st.one_of(
    st.builds(
        Requirement,
        key=label_key,
        operator=st.sampled_from(["In", "NotIn"]),
        values=st.lists(label_value, min_size=1, max_size=3).map(tuple),
    ),
    st.builds(Requirement, key=label_key, operator=st.sampled_from(["Exists", "DoesNotExist"])),
)
selectors = st.none() | st.builds(
    LabelSelector,
    match_labels=labels,
    match_expressions=st.lists(requirements, max_size=2).map(tuple),
)
counts = st.none() | st.integers(0, MAX_COUNT)
links = st.from_regex(r"([a-z][a-z0-9.]{0,14})?", fullmatch=True)


@st.composite
def pools(draw: st.DrawFn) -> IpClaimPool:
    cidr = draw(cidrs())
    spec = IpClaimPoolSpec(
        cidr=cidr,
        ranges=tuple(draw(st.lists(st.tuples(ips, ips), max_size=2))),
        exclude=tuple(draw(st.lists(ips | cidrs(), max_size=2))),
        prefix_length=draw(prefix_lengths(cidr)),
        auto_assign=draw(st.booleans()),
        allow_manual=draw(st.booleans()),
        service_selector=draw(selectors),
        namespace_selector=draw(selectors),
        node_selector=draw(selectors),
    )
    status = IpClaimPoolStatus(
        allocated=draw(counts), free=draw(counts), conditions=draw(conditions)
    )
    return IpClaimPool(metadata=draw(metadata), spec=spec, status=status)


service_refs = st.builds(
    "{}/{}".format, dns_label, st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
)


@st.composite
def claims(draw: st.DrawFn) -> IpClaim:
    ip = draw(ips)
    spec = IpClaimSpec(
        ip=ip,
        prefix_length=draw(prefix_lengths(ip)),
        node_name=draw(st.just("") | dns_name),
        link=draw(links),
        services=tuple(draw(st.lists(service_refs, max_size=3, unique=True))),
        node_bound=draw(st.booleans()),
    )
    status = IpClaimStatus(
        phase=draw(st.sampled_from(["Pending", "Scheduled", "Bound", "Failed"])),
        bound_node=draw(st.just("") | dns_name),
        conditions=draw(conditions),
    )
    return IpClaim(metadata=draw(metadata), spec=spec, status=status)


nodes = st.builds(
    IpNode,
    metadata=metadata,
    spec=st.builds(IpNodeSpec, link=links),
    status=st.builds(
        IpNodeStatus,
        heartbeat=st.integers(0, MAX_COUNT),
        addresses=st.lists(ips | cidrs(), max_size=3).map(tuple),
        conditions=conditions,
    ),
)
resources = st.one_of(pools(), claims(), nodes)

# --- properties ----------------------------------------------------------------------------


# deadline=None on property tests: schema validation is slow on a loaded machine.
@settings(deadline=None)
@given(resources)
def test_round_trip(resource: IpClaimPool | IpClaim | IpNode) -> None:
    d = resource.to_dict()
    assert type(resource).from_dict(d) == resource
    assert json.loads(json.dumps(d)) == d  # plain JSON: lists, not tuples


@settings(deadline=None)
@given(resources)
def test_to_dict_validates_against_the_crd(resource: IpClaimPool | IpClaim | IpNode) -> None:
    errors = [e.message for e in VALIDATORS[resource.KIND].iter_errors(resource.to_dict())]
    assert errors == []


@settings(deadline=None)
@given(resources)
def test_objects_do_not_alias_their_dicts(resource: IpClaimPool | IpClaim | IpNode) -> None:
    d = resource.to_dict()
    parsed = type(resource).from_dict(d)
    d["metadata"]["name"] = "changed"
    d["metadata"].setdefault("labels", {})["x"] = "y"
    assert parsed == resource
    assert parsed.to_dict()["metadata"]["name"] == resource.name


@pytest.mark.parametrize("name", ["pool.yaml", "pool-v6.yaml", "claim.yaml"])
def test_examples_parse_and_survive_unchanged(name: str) -> None:
    d = yaml.safe_load((DEPLOY / "examples" / name).read_text())
    resource = KINDS[d["kind"]].from_dict(d)
    out = resource.to_dict()
    spec_defaults = {"autoAssign": True, "allowManual": False} if d["kind"] == "IpClaimPool" else {}
    assert out["spec"] == {**spec_defaults, **d["spec"]}
    assert out["metadata"] == d["metadata"]


def test_accessors() -> None:
    claim = IpClaim(
        metadata={"name": claim_name_for("2001:db8::7"), "labels": {LABEL_POOL: "doc-v6"}},
        spec=IpClaimSpec(ip="2001:db8::7", prefix_length=128, services=("default/web",)),
    )
    assert claim.name == "2001-db8--7"
    assert claim.pool == "doc-v6"
    assert claim.labels == {LABEL_POOL: "doc-v6"}
    assert claim.resource_version is None
    assert claim.status.phase == "Pending"
    placed = dataclasses.replace(
        IpClaim.from_dict(
            {**claim.to_dict(), "metadata": {**claim.metadata, "resourceVersion": "42"}}
        ),
        spec=dataclasses.replace(claim.spec, node_name="node-1"),
    )
    assert placed.resource_version == "42"
    assert placed.to_dict()["spec"]["nodeName"] == "node-1"
    assert LABEL_NODE not in placed.labels


def test_defaults_and_absent_envelope() -> None:
    """List items may lack apiVersion/kind; absent optional fields get documented defaults."""
    pool = IpClaimPool.from_dict({"metadata": {"name": "p"}, "spec": {"cidr": "192.0.2.0/24"}})
    assert (pool.spec.auto_assign, pool.spec.allow_manual, pool.spec.prefix_length) == (
        True,
        False,
        None,
    )
    assert pool.status == IpClaimPoolStatus()
    node = IpNode.from_dict({"metadata": {"name": "n"}})
    assert node.spec == IpNodeSpec() and node.status.heartbeat == 0
    v6 = IpClaim.from_dict({"spec": {"ip": "2001:db8::1", "prefixLength": 64}})
    assert v6.spec.prefix_length == 64
    claim = IpClaim.from_dict({"spec": {"ip": "192.0.2.1"}, "status": {}})
    assert claim.status.phase == "Pending" and claim.spec.node_name == ""


def test_address_pool_honours_ranges_and_exclude() -> None:
    spec = {
        "cidr": "192.0.2.0/24",
        "ranges": [["192.0.2.10", "192.0.2.12"]],
        "exclude": ["192.0.2.11"],
    }
    pool = IpClaimPool.from_dict({"metadata": {"name": "p"}, "spec": spec}).address_pool()
    assert pool.name == "p"
    assert [pool.contains(ipaddress.ip_address(f"192.0.2.{i}")) for i in (9, 10, 11, 12)] == [
        False,
        True,
        False,
        True,
    ]


POOL = {
    "apiVersion": "eipctl.io/v1alpha1",
    "kind": "IpClaimPool",
    "metadata": {"name": "p"},
    "spec": {"cidr": "192.0.2.0/24"},
}
CLAIM = {
    "apiVersion": "eipctl.io/v1alpha1",
    "kind": "IpClaim",
    "metadata": {"name": "c"},
    "spec": {"ip": "192.0.2.1"},
}
NODE = {"apiVersion": "eipctl.io/v1alpha1", "kind": "IpNode", "metadata": {"name": "n"}}


def merged(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**base, **changes}


@pytest.mark.parametrize(
    ("kind", "d", "field"),
    [
        (IpClaimPool, merged(POOL, kind="IpClaim"), "kind"),
        (IpClaimPool, merged(POOL, apiVersion="eipctl.io/v1"), "apiVersion"),
        (IpClaimPool, merged(POOL, spec=None), "spec"),
        (IpClaimPool, merged(POOL, spec=[]), "spec"),
        (IpClaimPool, merged(POOL, metadata={"name": 3}), "metadata.name"),
        (IpClaimPool, merged(POOL, spec={}), "spec.cidr"),
        (IpClaimPool, merged(POOL, spec={"cidr": "192.0.2.0"}), "spec.cidr"),
        (IpClaimPool, merged(POOL, spec={"cidr": "10.0.0.0/33"}), "spec.cidr"),
        (
            IpClaimPool,
            merged(POOL, spec={"cidr": "192.0.2.0/24", "ranges": [["192.0.2.1"]]}),
            "spec.ranges[0]",
        ),
        (
            IpClaimPool,
            merged(POOL, spec={"cidr": "192.0.2.0/24", "ranges": [["192.0.2.1", "x"]]}),
            "spec.ranges[0][1]",
        ),
        (
            IpClaimPool,
            merged(POOL, spec={"cidr": "192.0.2.0/24", "ranges": "192.0.2.1"}),
            "spec.ranges",
        ),
        (
            IpClaimPool,
            merged(POOL, spec={"cidr": "192.0.2.0/24", "exclude": ["192.0.2.1", "bad"]}),
            "spec.exclude[1]",
        ),
        (
            IpClaimPool,
            merged(POOL, spec={"cidr": "192.0.2.0/24", "prefixLength": 200}),
            "spec.prefixLength",
        ),
        (
            IpClaimPool,
            merged(POOL, spec={"cidr": "192.0.2.0/24", "prefixLength": True}),
            "spec.prefixLength",
        ),
        (
            IpClaimPool,
            merged(POOL, spec={"cidr": "192.0.2.0/24", "prefixLength": 33}),
            "spec.prefixLength",
        ),
        (IpClaim, merged(CLAIM, spec={"ip": "192.0.2.1", "prefixLength": 64}), "spec.prefixLength"),
        (
            IpClaimPool,
            merged(POOL, spec={"cidr": "192.0.2.0/24", "autoAssign": "yes"}),
            "spec.autoAssign",
        ),
        (
            IpClaimPool,
            merged(
                POOL,
                spec={
                    "cidr": "192.0.2.0/24",
                    "nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Has"}]},
                },
            ),
            "spec.nodeSelector.matchExpressions[0].operator",
        ),
        (IpClaimPool, merged(POOL, status={"free": -1}), "status.free"),
        (
            IpClaimPool,
            merged(POOL, status={"conditions": [{"type": "Ready"}]}),
            "status.conditions[0].status",
        ),
        (IpClaim, merged(CLAIM, spec={}), "spec.ip"),
        (IpClaim, merged(CLAIM, spec={"ip": "300.1.1.1"}), "spec.ip"),
        (IpClaim, merged(CLAIM, spec={"ip": "192.0.2.1", "nodeName": 5}), "spec.nodeName"),
        (
            IpClaim,
            merged(CLAIM, spec={"ip": "192.0.2.1", "services": ["default/web", "web"]}),
            "spec.services[1]",
        ),
        (
            IpClaim,
            merged(CLAIM, spec={"ip": "192.0.2.1", "services": ["a/b/c"]}),
            "spec.services[0]",
        ),
        (IpClaim, merged(CLAIM, status={"phase": "Running"}), "status.phase"),
        (IpNode, merged(NODE, status={"heartbeat": "7"}), "status.heartbeat"),
        (IpNode, merged(NODE, status={"heartbeat": -1}), "status.heartbeat"),
        (IpNode, merged(NODE, status={"addresses": ["192.0.2.1/33"]}), "status.addresses[0]"),
        (IpNode, "not a dict", "IpNode"),
    ],
)
def test_errors_name_the_field(
    kind: type[IpClaimPool] | type[IpClaim] | type[IpNode], d: Any, field: str
) -> None:
    with pytest.raises(ResourceError) as info:
        kind.from_dict(d)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
