"""`core.bgp_peer`: BGPPeer parsing, its errors (naming the field), round trips, secrecy.

The agreement of these rules with the CRD's schema and CEL rules on generated values is in
tests/unit/test_crds.py; here, each rule gets its own named case.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft4Validator, FormatChecker

from eipctl.core.bgp_peer import (
    WELL_KNOWN_COMMUNITIES,
    BfdProfile,
    BgpPeer,
    BgpPeerSpec,
    check_password,
    is_community,
    is_large_community,
)
from eipctl.core.fields import ResourceError
from eipctl.core.selectors import LabelSelector
from kubemu import cel_rules

CRD = yaml.safe_load(
    (Path(__file__).resolve().parents[3] / "deploy" / "crds" / "bgppeers.yaml").read_text()
)
SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
VALIDATOR = Draft4Validator(SCHEMA, format_checker=FormatChecker())

MINIMAL: dict[str, Any] = {
    "apiVersion": "eipctl.io/v1alpha1",
    "kind": "BGPPeer",
    "metadata": {"name": "tor-a", "resourceVersion": "7"},
    "spec": {"peerAddress": "192.0.2.1", "peerASN": 65001, "myASN": 65000},
}
SECRET = "Sup3r$ecret!"


def doc_with(**spec: Any) -> dict[str, Any]:
    doc = copy.deepcopy(MINIMAL)
    doc["spec"].update(spec)
    return doc


def crd_errors(doc: dict[str, Any]) -> list[str]:
    errors = [e.message for e in VALIDATOR.iter_errors(doc)]
    return errors + [c["message"] for c in cel_rules.check(SCHEMA, doc)]


# --- good values ---------------------------------------------------------------------------


def test_minimal_peer_gets_the_defaults() -> None:
    peer = BgpPeer.from_dict(MINIMAL)
    assert peer.name == "tor-a" and peer.resource_version == "7"
    assert peer.spec == BgpPeerSpec(peer_address="192.0.2.1", peer_asn=65001, my_asn=65000)
    spec = peer.spec
    assert (spec.peer_port, spec.source_address, spec.ebgp_multi_hop) == (179, "", False)
    assert spec.hold_time_seconds is spec.keepalive_time_seconds is None
    assert spec.bfd is None and spec.node_selector is None
    assert (spec.communities, spec.large_communities, spec.pools) == ((), (), ())
    assert spec.family == 4 and not spec.has_password


def test_every_field_is_read() -> None:
    spec = BgpPeer.from_dict(
        doc_with(
            peerAddress="2001:db8::1",
            peerASN=4294967295,
            myASN=1,
            peerPort=1179,
            sourceAddress="2001:db8::10",
            holdTimeSeconds=9,
            keepaliveTimeSeconds=3,
            connectTimeSeconds=5,
            ebgpMultiHop=True,
            passwordSecret="tor-a-md5",
            bfd={"receiveIntervalMs": 50, "detectMultiplier": 4, "echoMode": True, "minimumTtl": 9},
            nodeSelector={"matchLabels": {"rack": "r1"}},
            communities=["65000:1", "no-export"],
            largeCommunities=["1:2:3"],
            pools=["pool-a"],
        )
    ).spec
    assert spec == BgpPeerSpec(
        peer_address="2001:db8::1",
        peer_asn=4294967295,
        my_asn=1,
        peer_port=1179,
        source_address="2001:db8::10",
        hold_time_seconds=9,
        keepalive_time_seconds=3,
        connect_time_seconds=5,
        ebgp_multi_hop=True,
        password_secret="tor-a-md5",
        bfd=BfdProfile(receive_interval_ms=50, detect_multiplier=4, echo_mode=True, minimum_ttl=9),
        node_selector=LabelSelector(match_labels={"rack": "r1"}),
        communities=("65000:1", "no-export"),
        large_communities=("1:2:3",),
        pools=("pool-a",),
    )
    assert spec.family == 6 and spec.has_password


def test_empty_bfd_means_bfd_with_frr_defaults() -> None:
    bfd = BgpPeer.from_dict(doc_with(bfd={})).spec.bfd
    assert bfd == BfdProfile(receive_interval_ms=300, transmit_interval_ms=300, detect_multiplier=3)


@pytest.mark.parametrize(
    "spec",
    [
        {"holdTimeSeconds": 0},
        {"holdTimeSeconds": 3, "keepaliveTimeSeconds": 2},
        {"keepaliveTimeSeconds": 65535},
        {"ebgpMultiHop": False, "peerASN": 65000},
        {"password": "x" * 80},
        {"communities": list(WELL_KNOWN_COMMUNITIES)},
        {"communities": ["0:0", "65535:65535"], "largeCommunities": ["0:0:0", "4294967295:1:2"]},
    ],
)
def test_edge_values_accepted(spec: dict[str, Any]) -> None:
    doc = doc_with(**spec)
    BgpPeer.from_dict(doc)
    assert crd_errors(doc) == []


# --- bad values: each names its field ------------------------------------------------------

BAD = [
    ({"peerAddress": None}, "spec.peerAddress"),
    ({"peerAddress": "192.0.2.1/32"}, "spec.peerAddress"),
    ({"peerAddress": 7}, "spec.peerAddress"),
    ({"peerASN": 0}, "spec.peerASN"),
    ({"peerASN": 2**32}, "spec.peerASN"),
    ({"peerASN": None}, "spec.peerASN"),
    ({"myASN": True}, "spec.myASN"),
    ({"myASN": None}, "spec.myASN"),
    ({"peerPort": 0}, "spec.peerPort"),
    ({"peerPort": 65536}, "spec.peerPort"),
    ({"sourceAddress": "2001:db8::10"}, "spec.sourceAddress"),
    ({"sourceAddress": "nope"}, "spec.sourceAddress"),
    ({"holdTimeSeconds": 1}, "spec.holdTimeSeconds"),
    ({"holdTimeSeconds": -1}, "spec.holdTimeSeconds"),
    ({"keepaliveTimeSeconds": 0}, "spec.keepaliveTimeSeconds"),
    ({"holdTimeSeconds": 9, "keepaliveTimeSeconds": 9}, "spec.keepaliveTimeSeconds"),
    ({"connectTimeSeconds": 0}, "spec.connectTimeSeconds"),
    ({"ebgpMultiHop": True, "peerASN": 65000}, "spec.ebgpMultiHop"),
    ({"ebgpMultiHop": "true"}, "spec.ebgpMultiHop"),
    ({"password": ""}, "spec.password"),
    ({"password": "two words"}, "spec.password"),
    ({"password": "x" * 81}, "spec.password"),
    ({"password": 12345}, "spec.password"),
    ({"passwordSecret": "Not_A_Name"}, "spec.passwordSecret"),
    ({"password": "a", "passwordSecret": "s"}, "spec.passwordSecret"),
    ({"bfd": []}, "spec.bfd"),
    ({"bfd": {"receiveIntervalMs": 9}}, "spec.bfd.receiveIntervalMs"),
    ({"bfd": {"transmitIntervalMs": 60001}}, "spec.bfd.transmitIntervalMs"),
    ({"bfd": {"detectMultiplier": 1}}, "spec.bfd.detectMultiplier"),
    ({"bfd": {"echoMode": 1}}, "spec.bfd.echoMode"),
    ({"bfd": {"passiveMode": "no"}}, "spec.bfd.passiveMode"),
    ({"bfd": {"minimumTtl": 255}}, "spec.bfd.minimumTtl"),
    ({"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Has"}]}},
     "spec.nodeSelector.matchExpressions[0].operator"),
    ({"communities": ["1:1", "65536:1"]}, "spec.communities[1]"),
    ({"communities": "1:1"}, "spec.communities"),
    ({"communities": ["1:1"] * 65}, "spec.communities"),
    ({"largeCommunities": ["1:2"]}, "spec.largeCommunities[0]"),
    ({"pools": ["ok", "Bad"]}, "spec.pools[1]"),
    ({"pools": ["p"] * 257}, "spec.pools"),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "field"), BAD, ids=[f for _, f in BAD])
def test_bad_value_names_its_field(spec: dict[str, Any], field: str) -> None:
    doc = doc_with(**spec)
    for key in [k for k, v in spec.items() if v is None]:
        del doc["spec"][key]
    with pytest.raises(ResourceError) as caught:
        BgpPeer.from_dict(doc)
    assert caught.value.field == field
    assert crd_errors(doc) != []


def test_envelope_checks() -> None:
    with pytest.raises(ResourceError) as caught:
        BgpPeer.from_dict({**MINIMAL, "kind": "IpClaimPool"})
    assert caught.value.field == "kind"
    with pytest.raises(ResourceError) as caught:
        BgpPeer.from_dict({"metadata": {"name": "x"}})
    assert caught.value.field == "spec"


# --- secrecy -------------------------------------------------------------------------------


def test_password_is_not_in_repr() -> None:
    peer = BgpPeer.from_dict(doc_with(password=SECRET))
    assert peer.spec.password == SECRET
    assert SECRET not in repr(peer) and SECRET not in str(peer.spec)


@pytest.mark.parametrize("bad", ["has space", "x" * 81, "caf\u00e9", "tab\there", "new\nline"])
def test_password_errors_never_quote_it(bad: str) -> None:
    with pytest.raises(ResourceError) as caught:
        BgpPeer.from_dict(doc_with(password=bad))
    assert caught.value.field == "spec.password"
    assert bad not in str(caught.value)
    with pytest.raises(ResourceError) as caught:
        check_password(bad, "secret")
    assert bad not in str(caught.value)


def test_an_inline_password_is_a_password() -> None:
    """`has_password` is true for either way of giving one, not only the Secret."""
    assert BgpPeer.from_dict(doc_with(password=SECRET)).spec.has_password


# --- communities ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("0:0", True),
        ("65535:65535", True),
        ("65536:0", False),
        ("01:1", False),
        ("1:", False),
        (":1", False),
        ("1:2:3", False),
        ("no-export", True),
        ("local-AS", True),
        ("local-as", False),
        ("NO-EXPORT", False),
        ("", False),
        ("+1:1", False),
        ("\u0661:1", False),  # an Arabic-Indic digit: int() takes it, FRR does not
    ],
)
def test_is_community(text: str, ok: bool) -> None:
    assert is_community(text) is ok


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("0:0:0", True),
        ("4294967295:4294967295:4294967295", True),
        ("4294967296:0:0", False),
        ("1:2", False),
        ("1:2:3:4", False),
        ("1:02:3", False),
        ("no-export", False),
    ],
)
def test_is_large_community(text: str, ok: bool) -> None:
    assert is_large_community(text) is ok


def test_a_number_of_thousands_of_digits_is_no_community_and_no_error() -> None:
    """The length check comes before int(): Python refuses to convert more than 4300
    digits (ValueError), so without it such a community raised instead of being refused."""
    huge = "1" * 5000
    assert not is_community(f"{huge}:1")
    assert not is_large_community(f"1:{huge}:1")


# --- round trips ---------------------------------------------------------------------------

names = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)


@st.composite
def specs(draw: st.DrawFn) -> BgpPeerSpec:
    v6 = draw(st.booleans())
    peer_asn, my_asn = draw(st.integers(1, 2**32 - 1)), draw(st.integers(1, 2**32 - 1))
    hold = draw(st.none() | st.just(0) | st.integers(3, 65535))
    keepalive = draw(st.none() | st.integers(1, 65535))
    if hold is not None and keepalive is not None and keepalive >= hold:
        keepalive = None
    secret = draw(st.sampled_from(["", "inline", "secret"]))
    return BgpPeerSpec(
        peer_address="2001:db8::1" if v6 else "192.0.2.1",
        peer_asn=peer_asn,
        my_asn=my_asn,
        peer_port=draw(st.integers(1, 65535)),
        source_address=draw(st.sampled_from(["", "2001:db8::2" if v6 else "192.0.2.2"])),
        hold_time_seconds=hold,
        keepalive_time_seconds=keepalive,
        connect_time_seconds=draw(st.none() | st.integers(1, 65535)),
        ebgp_multi_hop=peer_asn != my_asn and draw(st.booleans()),
        password=draw(st.from_regex(r"[!-~]{1,80}", fullmatch=True)) if secret == "inline" else "",
        password_secret=draw(names) if secret == "secret" else "",
        bfd=draw(
            st.none()
            | st.builds(
                BfdProfile,
                receive_interval_ms=st.integers(10, 60000),
                transmit_interval_ms=st.integers(10, 60000),
                detect_multiplier=st.integers(2, 255),
                echo_mode=st.booleans(),
                passive_mode=st.booleans(),
                minimum_ttl=st.none() | st.integers(1, 254),
            )
        ),
        node_selector=draw(
            st.none() | st.builds(LabelSelector, match_labels=st.dictionaries(names, names))
        ),
        communities=tuple(
            draw(
                st.lists(
                    st.sampled_from(WELL_KNOWN_COMMUNITIES)
                    | st.builds("{}:{}".format, st.integers(0, 65535), st.integers(0, 65535)),
                    max_size=4,
                )
            )
        ),
        large_communities=tuple(
            draw(
                st.lists(
                    st.builds("{}:{}:{}".format, *(st.integers(0, 2**32 - 1) for _ in range(3))),
                    max_size=3,
                )
            )
        ),
        pools=tuple(draw(st.lists(names, max_size=3))),
    )


@settings(deadline=None, max_examples=150)
@given(specs())
def test_round_trip_and_the_crd_accepts_to_dict(spec: BgpPeerSpec) -> None:
    peer = BgpPeer.named("tor-a", spec)
    out = peer.to_dict()
    assert BgpPeer.from_dict(out) == peer
    assert crd_errors(out) == []


def test_to_dict_leaves_out_what_is_unset() -> None:
    out = BgpPeer.from_dict(MINIMAL).to_dict()
    assert out["spec"] == {
        "peerAddress": "192.0.2.1",
        "peerASN": 65001,
        "myASN": 65000,
        "peerPort": 179,
        "ebgpMultiHop": False,
    }
    assert out["status"] == {} and out["kind"] == "BGPPeer"
