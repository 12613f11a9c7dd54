"""Offline checks of everything under deploy/: the CRDs, their schemas and the examples.

Built-in kinds are checked with kubernetes-validate (strict). It knows nothing about our
custom resources, so those are checked with jsonschema against the CRDs' openAPIV3Schema, and
their CEL rules (x-kubernetes-validations: the IP and CIDR checks among them) with the
emulator's evaluator (cel-python and the Kubernetes IP/CIDR library, kubemu
cel_rules/cel_net). A small structural check stands in for the API server's structural-schema
rules.
Known gap: Python's ``$`` also matches before a trailing newline, so jsonschema (and thus the
emulator) accepts e.g. a nodeName "node-1\n" where Go would not; ``from_dict`` rejects it.
"""

from __future__ import annotations

import copy
import ipaddress
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft4Validator, FormatChecker

from eipctl.core.bgp_peer import (
    WELL_KNOWN_COMMUNITIES,
    BgpPeer,
    check_password,
    is_community,
    is_large_community,
)
from eipctl.core.fields import ResourceError, check_ip, check_network
from eipctl.core.naming import GROUP
from kubemu import cel_rules

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S_VERSION = "1.30.0"


def load_docs(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def load_crds() -> dict[str, dict[str, Any]]:
    crds = {}
    for path in sorted((DEPLOY / "crds").glob("*.yaml")):
        for doc in load_docs(path):
            crds[doc["spec"]["names"]["kind"]] = doc
    return crds


CRDS = load_crds()
SCHEMAS = {
    kind: crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] for kind, crd in CRDS.items()
}
VALIDATORS = {
    kind: Draft4Validator(schema, format_checker=FormatChecker())
    for kind, schema in SCHEMAS.items()
}


def patch_files() -> set[Path]:
    """Files a kustomization names under ``patches: - path:``: partial objects, not
    manifests (kustomize merges them into the objects they target)."""
    out = set()
    for kustomization in DEPLOY.rglob("kustomization.yaml"):
        for doc in load_docs(kustomization):
            for patch in doc.get("patches") or []:
                if "path" in patch:
                    out.add((kustomization.parent / patch["path"]).resolve())
    return out


def manifests() -> Iterator[tuple[str, dict[str, Any]]]:
    paths = sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])
    patches = patch_files()
    for path in paths:
        if path.resolve() in patches:
            continue
        for i, doc in enumerate(load_docs(path)):
            yield f"{path.relative_to(ROOT)}#{i}", doc


MANIFESTS = list(manifests())


def custom_resource_errors(doc: dict[str, Any]) -> list[str]:
    kind = doc.get("kind", "")
    assert doc.get("apiVersion") == f"{GROUP}/v1alpha1", doc.get("apiVersion")
    assert kind in VALIDATORS, f"no CRD for kind {kind!r}"
    errors = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in VALIDATORS[kind].iter_errors(doc)
    ]
    rules = cel_rules.check(SCHEMAS[kind], doc)
    return errors + [f"{c['field']}: {c['message']}" for c in rules]


def test_all_crds_present() -> None:
    assert set(CRDS) == {"IpClaimPool", "IpClaim", "IpNode", "BGPPeer"}


def defaulted_fields(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, Any, str]]:
    """(path, default, description) of every property of a schema that has a default."""
    for name, prop in (schema.get("properties") or {}).items():
        where = f"{path}.{name}" if path else name
        if "default" in prop:
            yield where, prop["default"], str(prop.get("description", ""))
        yield from defaulted_fields(prop, where)
        if isinstance(prop.get("items"), dict):
            yield from defaulted_fields(prop["items"], f"{where}[]")


def test_the_install_table_counts_and_names_every_crd() -> None:
    """#33: docs/operations.md said "the three CRDs"; there are four."""
    text = (ROOT / "docs" / "operations.md").read_text()
    [row] = [line for line in text.splitlines() if "| `crds/` |" in line]
    words = {3: "three", 4: "four", 5: "five"}
    assert f"the {words[len(CRDS)]} CRDs" in row
    assert all(kind in row for kind in CRDS)


def test_a_default_is_said_in_the_description() -> None:
    """#33: autoAssign defaulted to true and `kubectl explain` did not say so: every field
    with a default names it in its description ("Default: true.")."""
    silent = [
        f"{kind} {where}: default {default!r}"
        for kind, schema in SCHEMAS.items()
        for where, default, description in defaulted_fields(schema)
        if f"Default: {yaml.safe_dump(default).splitlines()[0]}" not in description
    ]
    assert silent == []


@pytest.mark.parametrize(("where", "doc"), MANIFESTS, ids=[w for w, _ in MANIFESTS])
def test_manifest_is_valid(where: str, doc: dict[str, Any]) -> None:
    if str(doc.get("apiVersion", "")).startswith(f"{GROUP}/"):
        assert custom_resource_errors(doc) == []
    elif doc.get("kind") in ("Kustomization", "Component"):  # build input, not an API object
        base = (ROOT / where.partition("#")[0]).parent
        paths = [*doc.get("resources", []), *doc.get("components", [])]
        assert [r for r in paths if not (base / r).exists()] == []
    elif doc.get("apiVersion") == "monitoring.coreos.com/v1":
        # the Prometheus operator's kinds (deploy/components/prometheus/): no schema here;
        # tests/unit/test_deploy_metrics.py checks what they select and what they alert on
        assert doc.get("kind") in ("ServiceMonitor", "PrometheusRule"), doc.get("kind")
    else:
        # Raises ValidationError, or SchemaNotFoundError for kinds it does not know (a new
        # third-party CRD instance under deploy/ needs its own branch here).
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


# --- CRD shape -----------------------------------------------------------------------------

PRINTER_COLUMNS = {
    "IpClaim": ["IP", "NODE", "PHASE", "POOL", "SERVICES", "AGE"],
    "IpClaimPool": ["CIDR", "AUTO", "ANNOUNCE", "ALLOCATED", "FREE", "READY", "AGE"],
    "IpNode": ["LINK", "LIVE", "ELIGIBILITY", "LAST HEARTBEAT", "REPORTED ADDRESSES", "AGE"],
    "BGPPeer": ["PEER", "PEER ASN", "MY ASN", "BFD", "AGE"],
}
SHORT_NAMES = {"IpClaim": "ipc", "IpClaimPool": "ipp", "IpNode": "ipn", "BGPPeer": "bgpp"}


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_crd_identity(kind: str) -> None:
    spec = CRDS[kind]["spec"]
    names = spec["names"]
    assert CRDS[kind]["metadata"]["name"] == f"{names['plural']}.{GROUP}"
    assert spec["group"] == GROUP
    assert spec["scope"] == "Cluster"
    assert names["shortNames"] == [SHORT_NAMES[kind]]
    assert names["categories"] == ["eipctl"]
    assert names["plural"] == kind.lower() + "s"
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    Draft4Validator.check_schema(SCHEMAS[kind])


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_printer_columns_point_into_the_schema(kind: str) -> None:
    columns = CRDS[kind]["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == PRINTER_COLUMNS[kind]
    for column in columns:
        path = column["jsonPath"]
        if path == ".metadata.creationTimestamp":
            assert column["type"] == "date"
            continue
        if path.startswith(".metadata.labels."):
            assert path == r".metadata.labels.eipctl\.io/pool"
            continue
        node = SCHEMAS[kind]
        for part in re.split(r"\.", path.split("[", 1)[0].lstrip(".")):
            node = node["properties"][part]
        if "[" not in path and column["type"] in ("integer", "boolean", "string"):
            assert node["type"] in (column["type"], "array"), path


ALLOWED_TYPES = {"object", "array", "string", "integer", "number", "boolean"}
FORBIDDEN_KEYWORDS = {
    "$ref",
    "definitions",
    "dependencies",
    "additionalItems",
    "patternProperties",
    "id",
    "$schema",
}
JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
NOT_IN_JUNCTORS = {"type", "default", "description", "additionalProperties", "nullable", "title"}


def structural_problems(
    schema: dict[str, Any], path: str = "", in_junctor: bool = False
) -> list[str]:
    """The Kubernetes "structural schema" rules that apply to what we write (a subset)."""
    problems = [f"{path}: {k} is not allowed" for k in FORBIDDEN_KEYWORDS & set(schema)]
    if in_junctor:
        problems += [
            f"{path}: {k} is not allowed inside {JUNCTORS}" for k in NOT_IN_JUNCTORS & set(schema)
        ]
        problems += [
            f"{path}: {k} is not allowed inside {JUNCTORS}"
            for k in schema
            if k.startswith("x-kubernetes-")
        ]
    elif schema.get("type") not in ALLOWED_TYPES:
        problems.append(f"{path}: type {schema.get('type')!r} missing or unknown")
    if "properties" in schema and "additionalProperties" in schema:
        problems.append(f"{path}: properties and additionalProperties together")
    if schema.get("additionalProperties") is False:
        problems.append(f"{path}: additionalProperties: false (pruning does that)")
    if "properties" in schema and schema.get("type", "object") != "object":
        problems.append(f"{path}: properties on a non-object")
    for name in schema.get("required", []):
        if name not in schema.get("properties", {}):
            problems.append(f"{path}: required {name!r} is not a property")
    for name, child in schema.get("properties", {}).items():
        problems += structural_problems(child, f"{path}.{name}", in_junctor)
    if isinstance(schema.get("additionalProperties"), dict):
        problems += structural_problems(schema["additionalProperties"], f"{path}.*", in_junctor)
    if schema.get("type") == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            problems.append(f"{path}: array without a single items schema")
        else:
            problems += structural_problems(items, f"{path}[]", in_junctor)
            if schema.get("x-kubernetes-list-type") == "map":
                for key in schema.get("x-kubernetes-list-map-keys", []):
                    if key not in items.get("required", []):
                        problems.append(f"{path}: list-map key {key!r} must be required")
    for junctor in JUNCTORS:
        subs = schema.get(junctor)
        for i, sub in enumerate([subs] if isinstance(subs, dict) else subs or []):
            problems += structural_problems(sub, f"{path}.{junctor}[{i}]", in_junctor=True)
    for key in ("pattern",):
        if key in schema and re.search(r"\(\?[=!<]|\\[1-9]", schema[key]):
            problems.append(f"{path}: pattern uses lookaround/backreference (Go regexp has none)")
    return problems


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_crd_is_structural(kind: str) -> None:
    schema = SCHEMAS[kind]
    assert structural_problems(schema) == []
    assert schema["properties"]["metadata"] == {"type": "object"}


def test_structural_check_catches_problems() -> None:
    bad = {
        "type": "object",
        "required": ["b"],
        "properties": {
            "a": {"description": "no type"},
            "l": {"type": "array"},
            "p": {"type": "string", "anyOf": [{"type": "string", "pattern": "^(?=x)"}]},
        },
    }
    problems = structural_problems(bad)
    assert any(".a: type" in p for p in problems)
    assert any(".l: array without" in p for p in problems)
    assert any("anyOf[0]: type is not allowed" in p for p in problems)
    assert any("lookaround" in p for p in problems)
    assert any("required 'b'" in p for p in problems)


# --- examples accepted, malformed objects rejected ----------------------------------------


def example(name: str) -> dict[str, Any]:
    [doc] = load_docs(DEPLOY / "examples" / name)
    return doc


TIME = "2026-11-30T05:00:00Z"
NODE = {
    "apiVersion": "eipctl.io/v1alpha1",
    "kind": "IpNode",
    "metadata": {"name": "node-1"},
    "spec": {"link": "eth0"},
}


def with_change(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``doc`` with the dotted ``path`` set (or removed when value is DELETE)."""
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return doc


DELETE = object()
CONDITION = {"type": "Ready", "status": "True", "lastTransitionTime": TIME}


@pytest.mark.parametrize(
    "doc",
    [
        example("pool.yaml"),
        example("pool-v6.yaml"),
        example("claim.yaml"),
        NODE,
        with_change(
            example("claim.yaml"),
            "status",
            {"phase": "Bound", "boundNode": "node-1", "conditions": [CONDITION]},
        ),
        with_change(example("claim.yaml"), "spec.ip", "2001:db8::7"),
        with_change(example("pool.yaml"), "spec.cidr", "203.0.113.0/32"),
        with_change(
            example("pool.yaml"),
            "status",
            {"allocated": 3, "free": 2**63 - 1, "conditions": [CONDITION]},
        ),
        with_change(
            NODE, "status", {"heartbeat": 7, "addresses": ["203.0.113.7/32", "2001:db8::7/128"]}
        ),
    ],
)
def test_schema_accepts(doc: dict[str, Any]) -> None:
    assert custom_resource_errors(doc) == []


POOL, CLAIM = example("pool.yaml"), example("claim.yaml")
REJECTED = [
    (POOL, "spec.cidr", "10.0.0.0/33"),
    (POOL, "spec.cidr", "300.1.1.1/24"),
    (POOL, "spec.cidr", "203.0.113.0"),
    (POOL, "spec.cidr", "2001:db8:::/64"),
    (POOL, "spec.cidr", "2001:db8::/129"),
    (POOL, "spec.cidr", "garbage"),
    (POOL, "spec.cidr", DELETE),
    (POOL, "spec", DELETE),
    (POOL, "spec.ranges", [["203.0.113.10"]]),
    (POOL, "spec.ranges", [["203.0.113.10", "203.0.113.256"]]),
    (POOL, "spec.exclude", ["203.0.113.0/40"]),
    (POOL, "spec.prefixLength", 200),
    (POOL, "spec.prefixLength", 0),
    (POOL, "spec.autoAssign", "yes"),
    (POOL, "spec.nodeSelector", {"matchExpressions": [{"key": "zone", "operator": "Has"}]}),
    (POOL, "spec.nodeSelector", {"matchLabels": {"zone": 1}}),
    (POOL, "status", {"free": -1}),
    (
        POOL,
        "status",
        {"conditions": [{"type": "Ready", "status": "Yes", "lastTransitionTime": TIME}]},
    ),
    (POOL, "status", {"conditions": [{"type": "Ready", "status": "True"}]}),
    (CLAIM, "spec.ip", "300.1.1.1"),
    (CLAIM, "spec.ip", "01.2.3.4"),
    (CLAIM, "spec.ip", "::ffff:1.2.3.4"),
    (CLAIM, "spec.ip", "fe80::1%eth0"),
    (CLAIM, "spec.ip", "203.0.113.7/32"),
    (CLAIM, "spec.ip", DELETE),
    (CLAIM, "spec.prefixLength", 200),
    (CLAIM, "spec.nodeName", "Node_1"),
    (CLAIM, "spec.link", "eth0/1"),
    (CLAIM, "spec.link", "a-very-long-link-name"),
    (CLAIM, "spec.services", ["web"]),
    (CLAIM, "spec.services", ["default/Web"]),
    (CLAIM, "status", {"phase": "Running"}),
    (NODE, "status", {"heartbeat": -1}),
    (NODE, "status", {"addresses": ["not-an-ip"]}),
]


@pytest.mark.parametrize(
    ("doc", "path", "value"), REJECTED, ids=[f"{d['kind']}:{p}={v!r}" for d, p, v in REJECTED]
)
def test_schema_rejects(doc: dict[str, Any], path: str, value: Any) -> None:
    assert custom_resource_errors(with_change(doc, path, value)) != []


# --- the IP patterns agree with Python's ipaddress -----------------------------------------


def field_validator(kind: str, *path: str) -> Callable[[str], bool]:
    """Whether the API server accepts a value for one field: its schema, then its CEL rules."""
    node = SCHEMAS[kind]
    for part in path:
        node = node["items"] if part == "[]" else node["properties"][part]
    validator = Draft4Validator(node, format_checker=FormatChecker())

    def ok(value: str) -> bool:
        return validator.is_valid(value) and cel_rules.check_value(node, value) == []

    return ok


ip_ok = field_validator("IpClaim", "spec", "ip")
range_ip_ok = field_validator("IpClaimPool", "spec", "ranges", "[]", "[]")
cidr_ok = field_validator("IpClaimPool", "spec", "cidr")
ip_or_cidr_ok = field_validator("IpClaimPool", "spec", "exclude", "[]")
address_ok = field_validator("IpNode", "status", "addresses", "[]")


def reference_ip(text: str) -> bool:
    """What the schema means to accept: any IP, but no zone, no dotted quad in IPv6, and no
    IPv4-mapped IPv6 (Kubernetes' isIP refuses ::ffff:102:304 as well as ::ffff:1.2.3.4)."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    if address.version == 4:
        return True
    return not ({".", "%"} & set(text)) and not v4_mapped(text)


def v4_mapped(text: str) -> bool:
    """An IPv4-mapped IPv6 address (or prefix), in any spelling."""
    try:
        address = ipaddress.ip_address(text.partition("/")[0])
    except ValueError:
        return False
    return isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None


def reference_cidr(text: str) -> bool:
    ip, slash, bits = text.partition("/")
    if not slash or not reference_ip(ip) or not re.fullmatch(r"0|[1-9][0-9]*", bits):
        return False
    return int(bits) <= ipaddress.ip_address(ip).max_prefixlen


@st.composite
def ip_texts(draw: st.DrawFn) -> str:
    """Valid IP texts in many spellings: v4, v6 full, any zero run as '::', upper case."""
    if draw(st.booleans()):
        return str(ipaddress.IPv4Address(draw(st.integers(0, 2**32 - 1))))
    groups = draw(
        st.lists(
            st.sampled_from([0, 0, 1, 0xABCD]) | st.integers(0, 0xFFFF), min_size=8, max_size=8
        )
    )
    hexes = [format(g, draw(st.sampled_from(["x", "04x", "X"]))) for g in groups]
    runs = [(i, j) for i in range(8) for j in range(i + 1, 9) if all(g == 0 for g in groups[i:j])]
    if runs and draw(st.booleans()):
        i, j = draw(st.sampled_from(runs))
        return ":".join(hexes[:i]) + "::" + ":".join(hexes[j:])
    return ":".join(hexes)


garbage = st.text(alphabet="0123456789abcdefABCDEFx:./% ", max_size=48)


# deadline=None on property tests: schema validation is slow on a loaded machine.
@settings(deadline=None)
@given(ip_texts())
def test_valid_ips_accepted(text: str) -> None:
    assert reference_ip(text)
    assert ip_ok(text) and range_ip_ok(text) and ip_or_cidr_ok(text) and address_ok(text)
    assert not cidr_ok(text)


@settings(deadline=None)
@given(ip_texts(), st.integers(0, 128))
def test_valid_cidrs_accepted(text: str, bits: int) -> None:
    cidr = f"{text}/{bits}"
    assert cidr_ok(cidr) is ip_or_cidr_ok(cidr) is reference_cidr(cidr)
    assert not ip_ok(cidr)


@settings(deadline=None)
@given(garbage | ip_texts().map(lambda t: t + ":") | ip_texts().map(lambda t: "1:" + t))
def test_patterns_agree_with_ipaddress(text: str) -> None:
    assert ip_ok(text) is reference_ip(text)
    assert cidr_ok(text) is reference_cidr(text)
    assert ip_or_cidr_ok(text) is (reference_ip(text) or reference_cidr(text))


def parses(check: Callable[[str], object], text: str) -> bool:
    try:
        check(text)
    except ResourceError:
        return False
    return True


@settings(deadline=None)
@given(garbage | ip_texts() | st.builds("{}/{}".format, ip_texts(), st.integers(0, 200)))
def test_resource_parsers_agree_with_patterns(text: str) -> None:
    """from_dict accepts exactly what the API server would have let in, IPv4-mapped IPv6 in
    any spelling included (refused by both)."""
    assert parses(lambda t: check_ip(t, "f"), text) is ip_ok(text)
    assert parses(lambda t: check_network(t, "f"), text) is cidr_ok(text)
    assert parses(lambda t: check_network(t, "f", bare_ip=True), text) is ip_or_cidr_ok(text)


def test_v4_mapped_hex_is_refused() -> None:
    """The one narrowing from the regex patterns: Kubernetes' isIP/isCIDR refuse IPv4-mapped
    IPv6 however it is spelled, so the CRDs do too, and so does from_dict."""
    for text in ("::ffff:102:304", "::FFFF:cb00:7107", "::ffff:0:0"):
        assert not ip_ok(text) and not range_ip_ok(text) and not address_ok(text)
        assert not cidr_ok(f"{text}/128") and not ip_or_cidr_ok(f"{text}/96")
        assert not parses(lambda t: check_ip(t, "f"), text)
        assert not parses(lambda t: check_network(t, "f"), f"{text}/128")
    assert ip_ok("::fffe:102:304") and ip_ok("64:ff9b::102:304")


# --- the rules read as a person would want them -------------------------------------------

MESSAGES = [
    (POOL, "spec.cidr", "10.0.0.0/33", "cidr must be an IP prefix such as 192.0.2.0/24"),
    (POOL, "spec.cidr", "203.0.113.0", "cidr must be an IP prefix"),
    (POOL, "spec.ranges", [["203.0.113.10", "x"]], "each end of a range must be an IP address"),
    (POOL, "spec.exclude", ["203.0.113.0/40"], "each exclude entry must be an IP address or"),
    (CLAIM, "spec.ip", "fe80::1%eth0", "ip must be an IP address such as 192.0.2.7"),
    (NODE, "status", {"addresses": ["::1.2.3.4/128"]}, "each address must be an IP address or"),
]


@pytest.mark.parametrize(
    ("doc", "path", "value", "message"), MESSAGES, ids=[f"{p}={v!r}" for _, p, v, _ in MESSAGES]
)
def test_refusals_are_readable(doc: dict[str, Any], path: str, value: Any, message: str) -> None:
    [error] = custom_resource_errors(with_change(doc, path, value))
    assert message in error and len(error) < 160 and "pattern" not in error


def test_ip_fields_have_no_patterns_and_bounded_rules() -> None:
    """CEL, not regexes, checks IPs; every string a rule reads has maxLength and every list
    above one has maxItems (a real apiserver refuses rules whose estimated cost is unbounded)."""

    def walk(node: dict[str, Any], path: str, lists: list[str]) -> list[str]:
        bad = []
        if node.get("x-kubernetes-validations") and "anyOf" in node:
            bad.append(f"{path}: anyOf next to CEL rules")
        rules = " ".join(r["rule"] for r in node.get("x-kubernetes-validations", []))
        if ("isIP" in rules or "isCIDR" in rules) and node.get("type") == "string":
            if "maxLength" not in node:
                bad.append(f"{path}: no maxLength")
            bad += [f"{lst}: no maxItems" for lst in lists]
        for name, child in node.get("properties", {}).items():
            bad += walk(child, f"{path}.{name}", lists)
        if "items" in node:
            unbounded = [] if "maxItems" in node else [path]
            bad += walk(node["items"], f"{path}[]", lists + unbounded)
        return bad

    for kind, schema in SCHEMAS.items():
        assert walk(schema, kind, []) == []
        text = yaml.safe_dump(schema)
        assert "([0-9a-fA-F]{1,4}:)" not in text


# --- BGPPeer: the CRD's rules and eipctl.core.bgp_peer agree ---------------------------------

PEER: dict[str, Any] = {
    "apiVersion": "eipctl.io/v1alpha1",
    "kind": "BGPPeer",
    "metadata": {"name": "tor-a"},
    "spec": {"peerAddress": "192.0.2.1", "peerASN": 65001, "myASN": 65000},
}
FULL_PEER = with_change(
    PEER,
    "spec",
    {
        "peerAddress": "2001:db8::1",
        "peerASN": 4294967295,
        "myASN": 1,
        "peerPort": 1179,
        "sourceAddress": "2001:db8::10",
        "holdTimeSeconds": 9,
        "keepaliveTimeSeconds": 3,
        "connectTimeSeconds": 5,
        "ebgpMultiHop": True,
        "passwordSecret": "tor-a-md5",
        "bfd": {
            "receiveIntervalMs": 10,
            "transmitIntervalMs": 60000,
            "detectMultiplier": 255,
            "echoMode": True,
            "passiveMode": True,
            "minimumTtl": 1,
        },
        "nodeSelector": {"matchLabels": {"rack": "r1"}},
        "communities": ["0:0", "65535:65535", "no-export", "local-AS", "graceful-shutdown"],
        "largeCommunities": ["4294967295:0:1"],
        "pools": ["pool-a", "pool.b"],
    },
)


def bgp_peer_parses(doc: dict[str, Any]) -> bool:
    try:
        BgpPeer.from_dict(doc)
    except ResourceError:
        return False
    return True


@pytest.mark.parametrize(
    "doc",
    [
        PEER,
        FULL_PEER,
        with_change(PEER, "spec.holdTimeSeconds", 0),
        with_change(PEER, "spec.holdTimeSeconds", 3),
        with_change(PEER, "spec.keepaliveTimeSeconds", 65535),
        with_change(PEER, "spec.password", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" + "x" * 48),
        with_change(PEER, "spec.bfd", {}),
        with_change(PEER, "spec.ebgpMultiHop", False),
        with_change(PEER, "status", {"conditions": [CONDITION]}),
    ],
)
def test_bgp_peer_accepted(doc: dict[str, Any]) -> None:
    assert custom_resource_errors(doc) == []
    assert bgp_peer_parses(doc)


BGP_REJECTED = [
    ("spec.peerAddress", DELETE),
    ("spec.peerAddress", "192.0.2.1/32"),
    ("spec.peerAddress", "fe80::1%eth0"),
    ("spec.peerAddress", "::ffff:1.2.3.4"),
    ("spec.peerASN", 0),
    ("spec.peerASN", 4294967296),
    ("spec.peerASN", DELETE),
    ("spec.myASN", "65000"),
    ("spec.myASN", DELETE),
    ("spec.peerPort", 0),
    ("spec.peerPort", 65536),
    ("spec.sourceAddress", "2001:db8::10"),
    ("spec.sourceAddress", "192.0.2.300"),
    ("spec.holdTimeSeconds", 2),
    ("spec.holdTimeSeconds", 65536),
    ("spec.keepaliveTimeSeconds", 0),
    ("spec.connectTimeSeconds", 0),
    ("spec.ebgpMultiHop", "yes"),
    ("spec.password", ""),
    ("spec.password", "has space"),
    ("spec.password", "x" * 81),
    ("spec.password", "caf\u00e9"),
    ("spec.passwordSecret", "Bad_Name"),
    ("spec.passwordSecret", ""),
    ("spec.bfd", {"receiveIntervalMs": 9}),
    ("spec.bfd", {"transmitIntervalMs": 60001}),
    ("spec.bfd", {"detectMultiplier": 1}),
    ("spec.bfd", {"minimumTtl": 255}),
    ("spec.bfd", {"echoMode": "on"}),
    ("spec.nodeSelector", {"matchExpressions": [{"key": "zone", "operator": "Has"}]}),
    ("spec.communities", ["65536:1"]),
    ("spec.communities", ["01:1"]),
    ("spec.communities", ["1:2:3"]),
    ("spec.communities", ["local-as"]),
    ("spec.communities", ["no-export "]),
    ("spec.communities", ["1:1"] * 65),
    ("spec.largeCommunities", ["1:2"]),
    ("spec.largeCommunities", ["4294967296:0:0"]),
    ("spec.largeCommunities", ["-1:0:0"]),
    ("spec.pools", ["Pool_A"]),
    ("spec.pools", ["p"] * 257),
]


@pytest.mark.parametrize(
    ("path", "value"), BGP_REJECTED, ids=[f"{p}={v!r:.40}" for p, v in BGP_REJECTED]
)
def test_bgp_peer_rejected(path: str, value: Any) -> None:
    doc = with_change(PEER, path, value)
    assert custom_resource_errors(doc) != []
    assert not bgp_peer_parses(doc)


BGP_CROSS_FIELD = [
    ({"sourceAddress": "2001:db8::10"}, "sourceAddress must be of the same family as peerAddress"),
    ({"holdTimeSeconds": 9, "keepaliveTimeSeconds": 9}, "keepaliveTimeSeconds must be less"),
    ({"holdTimeSeconds": 0, "keepaliveTimeSeconds": 1}, "keepaliveTimeSeconds must be less"),
    ({"password": "a", "passwordSecret": "s"}, "set password or passwordSecret, not both"),
    ({"ebgpMultiHop": True, "peerASN": 65000}, "ebgpMultiHop is for eBGP peers"),
    ({"holdTimeSeconds": 1}, "holdTimeSeconds must be 0 or 3..65535"),
    ({"communities": ["65536:1"]}, "each community must be AA:NN"),
    ({"largeCommunities": ["1:2"]}, "each large community must be A:B:C"),
    ({"password": "has space"}, "password must be printable ASCII without spaces"),
]


@pytest.mark.parametrize(
    ("change", "message"), BGP_CROSS_FIELD, ids=[m[:40] for _, m in BGP_CROSS_FIELD]
)
def test_bgp_peer_refusals_are_readable(change: dict[str, Any], message: str) -> None:
    doc = with_change(PEER, "spec", {**PEER["spec"], **change})
    [error] = custom_resource_errors(doc)
    assert message in error and len(error) < 200
    assert not bgp_peer_parses(doc)


def test_bgp_peer_password_never_in_refusals() -> None:
    """The charset is a CEL rule, not a pattern: a pattern's refusal quotes the value. (Too
    long is a maxLength refusal: jsonschema quotes the value, the apiserver's TooLong does
    not.)"""
    for secret in ("has space", "caf\u00e9-secret", "tab\there"):
        errors = custom_resource_errors(with_change(PEER, "spec.password", secret))
        assert errors and not any(secret in e for e in errors)


community_ok = field_validator("BGPPeer", "spec", "communities", "[]")
large_community_ok = field_validator("BGPPeer", "spec", "largeCommunities", "[]")
password_ok = field_validator("BGPPeer", "spec", "password")
peer_address_ok = field_validator("BGPPeer", "spec", "peerAddress")

numbers = st.one_of(
    st.integers(0, 2**33).map(str),
    st.sampled_from(["65535", "65536", "4294967295", "4294967296", "00", "01", "-1", "", "x"]),
)


@settings(deadline=None, max_examples=300)
@given(st.lists(numbers, min_size=1, max_size=4).map(":".join) | st.text(max_size=20))
def test_community_rules_agree_with_parser(text: str) -> None:
    assume_no_newline(text)
    assert community_ok(text) is is_community(text)
    assert large_community_ok(text) is is_large_community(text)


@settings(deadline=None)
@given(st.sampled_from(WELL_KNOWN_COMMUNITIES))
def test_well_known_communities_accepted(name: str) -> None:
    assert community_ok(name)
    assert not community_ok(name.upper()) or name.upper() == name


@settings(deadline=None, max_examples=300)
@given(st.text(max_size=90))
def test_password_rule_agrees_with_parser(text: str) -> None:
    assume_no_newline(text)
    assert password_ok(text) is parses(lambda t: check_password(t, "f"), text)


@settings(deadline=None)
@given(garbage | ip_texts())
def test_peer_address_rule_agrees_with_parser(text: str) -> None:
    assert peer_address_ok(text) is parses(lambda t: check_ip(t, "f"), text)


def assume_no_newline(text: str) -> None:
    """Python's ``$`` matches before a final newline (module docstring): the known gap."""
    assume("\n" not in text)


timer = st.none() | st.integers(-1, 70000) | st.sampled_from([0, 1, 2, 3, 65535, 65536])
asn = st.sampled_from([0, 1, 65000, 65001, 4294967295, 4294967296])


@st.composite
def peer_specs(draw: st.DrawFn) -> dict[str, Any]:
    """Specs mixing good and bad values, one or several fields at a time."""
    spec: dict[str, Any] = {
        "peerAddress": draw(st.sampled_from(["192.0.2.1", "2001:db8::1", "192.0.2.256"])),
        "peerASN": draw(asn),
        "myASN": draw(asn),
    }
    optional: dict[str, Any] = {
        "peerPort": st.integers(-1, 70000),
        "sourceAddress": st.sampled_from(["192.0.2.10", "2001:db8::10", "bad"]),
        "holdTimeSeconds": timer,
        "keepaliveTimeSeconds": timer,
        "connectTimeSeconds": timer,
        "ebgpMultiHop": st.booleans(),
        "password": st.sampled_from(["", "ok", "not ok", "x" * 80, "x" * 81]),
        "passwordSecret": st.sampled_from(["md5", "Md5", "", "a.b-c"]),
        "bfd": st.fixed_dictionaries(
            {},
            optional={
                "receiveIntervalMs": st.sampled_from([9, 10, 300, 60000, 60001]),
                "detectMultiplier": st.sampled_from([1, 2, 255, 256]),
                "minimumTtl": st.sampled_from([0, 1, 254, 255]),
            },
        ),
        "communities": st.lists(st.sampled_from(["1:1", "no-export", "1:65536", "nope"])),
        "largeCommunities": st.lists(st.sampled_from(["1:2:3", "1:2", "0:0:4294967296"])),
        "pools": st.lists(st.sampled_from(["pool-a", "Pool"])),
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=4)):
        value = draw(optional[key])
        if value is not None:
            spec[key] = value
    return spec


@settings(deadline=None, max_examples=400)
@given(peer_specs())
def test_bgp_peer_schema_agrees_with_parser(spec: dict[str, Any]) -> None:
    doc = with_change(PEER, "spec", spec)
    assert (custom_resource_errors(doc) == []) is bgp_peer_parses(doc), spec
