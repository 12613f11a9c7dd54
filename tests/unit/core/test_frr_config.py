"""`core.frr_config.render`: one node's FRR configuration from the BGPPeers selecting it.

Named cases for each rule (selection, ASN conflict, duplicates, passwords, pools, timers,
BFD, names), then properties over generated peers: every rendered neighbor has both
route-maps and is activated in its family only, everything referenced is defined, no peer of
another ASN gets in, passwords stay out of problems, and the order of the inputs changes
nothing. FRR's own verdict on the text is in test_frr_config_vtysh.py.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import replace
from random import Random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eipctl.core.bgp_peer import BfdProfile, BgpPeer, BgpPeerSpec
from eipctl.core.frr_config import BgpPool, FrrConfig, NodeBgpFacts, peers_for_node, render
from eipctl.core.frr_names import (
    CONNECTED_ROUTE_MAP,
    DENY_ALL_ROUTE_MAP,
    MAX_FRR_NAME,
    bfd_profile_name,
    frr_name,
    out_route_map_name,
    prefix_list_name,
)
from eipctl.core.selectors import LabelSelector

NODE = NodeBgpFacts("node-1", {"rack": "r1"}, router_id="10.0.0.5")
POOLS = [
    BgpPool("pool-a", "203.0.113.0/24"),
    BgpPool("pool-b", "198.51.100.0/25"),
    BgpPool("pool-6", "2001:db8:1::/64"),
]


def peer(name: str, address: str = "192.0.2.1", **spec: Any) -> BgpPeer:
    fields: dict[str, Any] = {"peer_address": address, "peer_asn": 65001, "my_asn": 65000}
    fields.update(spec)
    return BgpPeer.named(name, BgpPeerSpec(**fields))


def run(
    peers: Iterable[BgpPeer],
    pools: Iterable[BgpPool] = POOLS,
    passwords: dict[str, str] | None = None,
    node: NodeBgpFacts = NODE,
) -> FrrConfig:
    return render(node, peers, pools, passwords or {})


def reasons(config: FrrConfig) -> dict[str, str]:
    return {p.peer: p.reason for p in config.problems}


def block(text: str, start: str) -> list[str]:
    """The lines of the top-level block that begins with ``start`` (up to its ``exit``)."""
    lines = text.splitlines()
    i = lines.index(start)
    j = lines.index("exit", i)
    return lines[i : j + 1]


# --- the frame -----------------------------------------------------------------------------


def test_no_peer_gives_a_valid_config_without_bgp() -> None:
    config = run([])
    assert config.peers == () and config.problems == ()
    lines = config.text.splitlines()
    assert lines[0] == "! FRR configuration of node node-1"
    assert lines[1] == "! rendered by eipctl; edits are overwritten"
    assert "frr defaults traditional" in lines
    assert "router bgp" not in config.text and "route-map" not in config.text
    assert config.text.endswith("\n")


def test_frame_of_a_rendered_config() -> None:
    config = run([peer("tor-a")])
    text = config.text
    assert config.peers == ("tor-a",)
    assert text.startswith("! FRR configuration of node node-1\n")
    assert "ebgp-requires-policy" not in text
    router = block(text, "router bgp 65000")
    assert router[1:3] == [" bgp router-id 10.0.0.5", " no bgp default ipv4-unicast"]
    assert block(text, f"route-map {CONNECTED_ROUTE_MAP} permit 10") == [
        f"route-map {CONNECTED_ROUTE_MAP} permit 10",
        " match interface eipctl-bgp",
        "exit",
    ]
    assert block(text, f"route-map {DENY_ALL_ROUTE_MAP} deny 10")[1:] == ["exit"]
    for af in ("ipv4", "ipv6"):
        i = router.index(f" address-family {af} unicast")
        assert router[i + 1] == f"  redistribute connected route-map {CONNECTED_ROUTE_MAP}"


def test_link_and_router_id_come_from_the_node() -> None:
    text = run([peer("tor-a")], node=NodeBgpFacts("n", link="bgp0")).text
    assert " match interface bgp0" in text and "router-id" not in text


@pytest.mark.parametrize(
    "kwargs",
    [
        {"node": ""},
        {"node": "a\nrouter bgp 1"},
        {"node": "node a"},  # a space, printable
        {"node": "node\x00a"},  # unprintable, no space
        {"node": "n", "router_id": "2001:db8::1"},
        {"node": "n", "router_id": "10.0.0.300"},
        {"node": "n", "link": ""},
        {"node": "n", "link": "a-very-long-link-name"},
        {"node": "n", "link": "eth0 x"},
    ],
)
def test_node_facts_are_checked(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        NodeBgpFacts(**kwargs)  # type: ignore[arg-type]


def test_node_labels_are_copied() -> None:
    labels = {"rack": "r1"}
    facts = NodeBgpFacts("n", labels)
    labels["rack"] = "r2"
    assert facts.labels == {"rack": "r1"}


def test_bad_pool_cidr_is_refused() -> None:
    with pytest.raises(ValueError):
        BgpPool("p", "203.0.113.0/33")


def test_duplicate_names_are_a_caller_error() -> None:
    with pytest.raises(ValueError):
        run([peer("a"), peer("a", "192.0.2.2")])
    with pytest.raises(ValueError):
        run([peer("a")], pools=[BgpPool("p", "192.0.2.0/24"), BgpPool("p", "10.0.0.0/8")])


# --- selection -----------------------------------------------------------------------------


def test_peers_for_node_uses_node_selector_and_sorts() -> None:
    rack1 = LabelSelector(match_labels={"rack": "r1"})
    rack2 = LabelSelector(match_labels={"rack": "r2"})
    peers = [
        peer("c", "192.0.2.3", node_selector=rack2),
        peer("b", "192.0.2.2", node_selector=rack1),
        peer("a", "192.0.2.1"),
        peer("d", "192.0.2.4", node_selector=LabelSelector()),
    ]
    assert [p.name for p in peers_for_node(peers, {"rack": "r1"})] == ["a", "b", "d"]
    assert [p.name for p in peers_for_node(peers, {})] == ["a", "d"]
    config = run(peers)
    assert config.peers == ("a", "b", "d") and config.problems == ()


def test_peer_of_another_node_leaves_no_trace() -> None:
    other = peer("z", "192.0.2.99", node_selector=LabelSelector(match_labels={"rack": "r9"}))
    config = run([peer("tor-a"), other])
    assert "192.0.2.99" not in config.text and "eipctl-out-z" not in config.text
    assert config.problems == ()


# --- one BGP instance ----------------------------------------------------------------------


def test_asn_conflict_first_by_name_wins() -> None:
    config = run(
        [
            peer("b-other", "192.0.2.2", my_asn=65100),
            peer("a-first", "192.0.2.1"),
            peer("c-same", "192.0.2.3"),
        ]
    )
    assert config.peers == ("a-first", "c-same")
    assert reasons(config) == {"b-other": "ASNConflict"}
    [problem] = config.problems
    assert "65100" in problem.message and "a-first" in problem.message
    assert "192.0.2.2" not in config.text and "b-other" not in config.text
    assert "router bgp 65000" in config.text and "65100" not in config.text


def test_duplicate_address_first_by_name_wins() -> None:
    config = run([peer("b", "2001:DB8::0:1"), peer("a", "2001:db8::1")])
    assert config.peers == ("a",)
    assert reasons(config) == {"b": "DuplicatePeerAddress"}
    assert config.text.count("neighbor 2001:db8::1 remote-as") == 1


# --- passwords -----------------------------------------------------------------------------

SECRET = "Pa$$w0rd!"


def test_inline_password_is_rendered() -> None:
    text = run([peer("tor-a", password=SECRET)]).text
    assert f" neighbor 192.0.2.1 password {SECRET}\n" in text


def test_password_from_secret_is_rendered() -> None:
    config = run([peer("tor-a", password_secret="md5")], passwords={"md5": SECRET})
    assert f" neighbor 192.0.2.1 password {SECRET}\n" in config.text
    assert SECRET not in repr(config)


def test_missing_secret_leaves_the_peer_out() -> None:
    config = run(
        [peer("tor-a", password_secret="md5"), peer("tor-b", "192.0.2.2")],
        passwords={"other": SECRET},
    )
    assert config.peers == ("tor-b",)
    assert reasons(config) == {"tor-a": "PasswordMissing"}
    assert "192.0.2.1" not in config.text and "password" not in config.text
    assert "md5" in config.problems[0].message


@pytest.mark.parametrize(
    "bad", ["two words", "line\n neighbor 192.0.2.9 remote-as 1", "", "x" * 81, "caf\u00e9"]
)
def test_unusable_secret_leaves_the_peer_out(bad: str) -> None:
    config = run([peer("tor-a", password_secret="md5")], passwords={"md5": bad})
    assert config.peers == ()
    assert reasons(config) == {"tor-a": "PasswordInvalid"}
    assert "router bgp" not in config.text
    if bad:
        assert bad not in config.problems[0].message and bad not in repr(config)


def test_unusable_inline_password_leaves_the_peer_out() -> None:
    """from_dict refuses it; a spec built by hand is checked again before it reaches FRR."""
    config = run([peer("tor-a", password="x\n neighbor 192.0.2.9 remote-as 1")])
    assert config.peers == () and reasons(config) == {"tor-a": "PasswordInvalid"}
    assert "192.0.2.9" not in config.text and "spec.password" in config.problems[0].message


# --- pools ---------------------------------------------------------------------------------


def test_all_pools_of_the_family_by_default() -> None:
    text = run([peer("v4"), peer("v6", "2001:db8::1")]).text
    assert block(text, f"route-map {out_route_map_name('v4')} permit 10") == [
        "route-map eipctl-out-v4 permit 10",
        " match ip address prefix-list eipctl-pools-v4",
        "exit",
    ]
    assert "ip prefix-list eipctl-pools-v4 seq 10 permit 198.51.100.0/25 ge 32" in text
    assert "ip prefix-list eipctl-pools-v4 seq 20 permit 203.0.113.0/24 ge 32" in text
    assert "ipv6 prefix-list eipctl-pools-v6 seq 10 permit 2001:db8:1::/64 ge 128" in text
    assert " match ipv6 address prefix-list eipctl-pools-v6" in text
    assert "eipctl-pools-v4 seq 30" not in text and "eipctl-pools-v6 seq 20" not in text


def test_named_pools_only() -> None:
    config = run([peer("tor-a", pools=("pool-b", "pool-6"))])
    assert config.problems == ()
    lists = [line for line in config.text.splitlines() if re.match("ipv?6? prefix-list ", line)]
    assert lists == ["ip prefix-list eipctl-pools-tor-a seq 10 permit 198.51.100.0/25 ge 32"]


def test_unknown_pool_is_reported_and_the_rest_announced() -> None:
    config = run([peer("tor-a", pools=("pool-a", "gone"))])
    assert config.peers == ("tor-a",)
    assert reasons(config) == {"tor-a": "PoolNotFound"}
    assert "gone" in config.problems[0].message
    assert "203.0.113.0/24 ge 32" in config.text


def test_no_pool_of_its_family_renders_a_deny() -> None:
    config = run([peer("tor-a", pools=("pool-6",))])
    assert config.peers == ("tor-a",)
    assert reasons(config) == {"tor-a": "NoPool"}
    assert block(config.text, "route-map eipctl-out-tor-a deny 10") == [
        "route-map eipctl-out-tor-a deny 10",
        "exit",
    ]
    assert "prefix-list" not in config.text
    assert " neighbor 192.0.2.1 route-map eipctl-out-tor-a out" in config.text


def test_host_pools_and_host_bits() -> None:
    pools = [
        BgpPool("one", "198.51.100.7/32"),
        BgpPool("bits", "203.0.113.9/24"),
        BgpPool("same", "203.0.113.0/24"),
        BgpPool("one6", "2001:db8::7/128"),
    ]
    text = run([peer("a"), peer("b", "2001:db8::1")], pools=pools).text
    assert "ip prefix-list eipctl-pools-a seq 10 permit 198.51.100.7/32\n" in text
    assert "ip prefix-list eipctl-pools-a seq 20 permit 203.0.113.0/24 ge 32\n" in text
    assert "seq 30" not in text  # the two spellings of one network are one entry
    assert "ipv6 prefix-list eipctl-pools-b seq 10 permit 2001:db8::7/128\n" in text


def test_communities() -> None:
    config = run(
        [
            peer(
                "tor-a",
                communities=("65000:1", "no-export", "65000:1"),
                large_communities=("1:2:3", "4:5:6"),
            )
        ]
    )
    assert block(config.text, "route-map eipctl-out-tor-a permit 10")[2:] == [
        " set community 65000:1 no-export additive",
        " set large-community 1:2:3 4:5:6 additive",
        "exit",
    ]


# --- neighbor lines ------------------------------------------------------------------------


def neighbor_lines(text: str, address: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.startswith(f" neighbor {address} ")]


def test_every_option() -> None:
    p = peer(
        "tor-b6",
        "2001:DB8::1",
        peer_asn=65002,
        peer_port=1179,
        source_address="2001:db8:0::10",
        ebgp_multi_hop=True,
        password=SECRET,
        hold_time_seconds=9,
        keepalive_time_seconds=3,
        connect_time_seconds=5,
        bfd=BfdProfile(),
    )
    assert neighbor_lines(run([p]).text, "2001:db8::1") == [
        "neighbor 2001:db8::1 remote-as 65002",
        "neighbor 2001:db8::1 description tor-b6",
        "neighbor 2001:db8::1 port 1179",
        "neighbor 2001:db8::1 update-source 2001:db8::10",
        "neighbor 2001:db8::1 ebgp-multihop",
        f"neighbor 2001:db8::1 password {SECRET}",
        "neighbor 2001:db8::1 timers 3 9",
        "neighbor 2001:db8::1 timers connect 5",
        "neighbor 2001:db8::1 bfd profile eipctl-bfd-tor-b6",
    ]


def test_defaults_write_nothing() -> None:
    assert neighbor_lines(run([peer("tor-a")]).text, "192.0.2.1") == [
        "neighbor 192.0.2.1 remote-as 65001",
        "neighbor 192.0.2.1 description tor-a",
    ]


@pytest.mark.parametrize(
    ("hold", "keepalive", "line"),
    [
        (90, None, "timers 30 90"),
        (3, None, "timers 1 3"),
        (0, None, "timers 0 0"),
        (None, 10, "timers 10 30"),
        (None, 30000, "timers 30000 65535"),
        (180, 60, "timers 60 180"),
    ],
)
def test_timers(hold: int | None, keepalive: int | None, line: str) -> None:
    text = run([peer("a", hold_time_seconds=hold, keepalive_time_seconds=keepalive)]).text
    assert f" neighbor 192.0.2.1 {line}\n" in text


def test_neighbors_activate_in_their_family_only() -> None:
    router = block(run([peer("v4"), peer("v6", "2001:db8::1")]).text, "router bgp 65000")
    v4 = router.index(" address-family ipv4 unicast")
    v6 = router.index(" address-family ipv6 unicast")
    assert router[v4:v6] == [
        " address-family ipv4 unicast",
        f"  redistribute connected route-map {CONNECTED_ROUTE_MAP}",
        "  neighbor 192.0.2.1 activate",
        f"  neighbor 192.0.2.1 route-map {DENY_ALL_ROUTE_MAP} in",
        "  neighbor 192.0.2.1 route-map eipctl-out-v4 out",
        " exit-address-family",
        " !",
    ]
    assert "  neighbor 2001:db8::1 activate" in router[v6:]
    assert "  neighbor 192.0.2.1 activate" not in router[v6:]


def test_bfd_profiles_write_only_what_differs_from_frr() -> None:
    tuned = BfdProfile(
        receive_interval_ms=100,
        transmit_interval_ms=200,
        detect_multiplier=5,
        echo_mode=True,
        passive_mode=True,
        minimum_ttl=250,
    )
    text = run(
        [
            peer("a", bfd=BfdProfile(minimum_ttl=254)),
            peer("b", "192.0.2.2", bfd=tuned),
            peer("c", "192.0.2.3"),
        ]
    ).text
    lines = text.splitlines()
    start = lines.index("bfd")
    assert lines[start : lines.index("exit", start + 12) + 1] == [
        "bfd",
        " profile eipctl-bfd-a",
        " exit",
        " !",
        " profile eipctl-bfd-b",
        "  detect-multiplier 5",
        "  receive-interval 100",
        "  transmit-interval 200",
        "  echo-mode",
        "  passive-mode",
        "  minimum-ttl 250",
        " exit",
        " !",
        "exit",
    ]
    assert "neighbor 192.0.2.3 bfd" not in text and "eipctl-bfd-c" not in text


def test_no_bfd_section_without_bfd() -> None:
    assert "\nbfd\n" not in run([peer("a")]).text


# --- names ---------------------------------------------------------------------------------


def test_plain_names() -> None:
    assert out_route_map_name("tor-a.rack1") == "eipctl-out-tor-a.rack1"
    assert prefix_list_name("tor-a") == "eipctl-pools-tor-a"
    assert bfd_profile_name("tor-a") == "eipctl-bfd-tor-a"


@pytest.mark.parametrize(
    "name", ["a" * 253, "a" * 53, "Upper", "under_score", "sp ace", "new\nline", "é", ""]
)
def test_unsafe_or_long_names_are_hashed(name: str) -> None:
    word = frr_name("eipctl-out", name)
    assert len(word) <= MAX_FRR_NAME
    assert re.fullmatch(r"eipctl-out-[a-z0-9._-]*_[0-9a-f]{8}", word), word


def test_names_stay_distinct() -> None:
    names = ["a" * 60 + "x", "a" * 60 + "y", "a" * 53, "a" * 52, "A", "a", "a_b", "a-b"]
    words = [frr_name("eipctl-out", n) for n in names]
    assert len(set(words)) == len(words)


def test_long_peer_name_renders() -> None:
    name = "peer-" + "x" * 200
    config = run([peer(name, bfd=BfdProfile())])
    assert config.peers == (name,)
    assert all(len(w) <= MAX_FRR_NAME for w in re.findall(r"eipctl-\S+", config.text))


# --- properties ----------------------------------------------------------------------------

ADDRESSES = [f"192.0.2.{i}" for i in range(1, 6)] + [f"2001:db8::{i}" for i in range(1, 4)]
PASSWORDS = {"md5-a": "Secret-A!", "md5-b": "has space"}
POOL_CHOICES = [
    BgpPool("pool-a", "203.0.113.0/24"),
    BgpPool("pool-h", "198.51.100.9/32"),
    BgpPool("pool-6", "2001:db8:1::/64"),
    BgpPool("pool-h6", "2001:db8:2::9/128"),
]
peer_names = st.from_regex(r"[a-z]([-a-z0-9.]{0,8}[a-z0-9])?", fullmatch=True)


@st.composite
def peer_sets(draw: st.DrawFn) -> list[BgpPeer]:
    names = draw(st.lists(peer_names, unique=True, max_size=6))
    peers = []
    for name in names:
        address = draw(st.sampled_from(ADDRESSES))
        my_asn = draw(st.sampled_from([65000, 65000, 65100]))
        peer_asn = draw(st.sampled_from([my_asn, 65001, 4200000000]))
        password_source = draw(st.sampled_from(["", "", "inline", "md5-a", "md5-b", "md5-x"]))
        hold = draw(st.none() | st.sampled_from([0, 3, 90]))
        peers.append(
            peer(
                name,
                address,
                my_asn=my_asn,
                peer_asn=peer_asn,
                peer_port=draw(st.sampled_from([179, 1179])),
                ebgp_multi_hop=peer_asn != my_asn and draw(st.booleans()),
                password="Inline#1" if password_source == "inline" else "",
                password_secret=password_source if password_source.startswith("md5") else "",
                hold_time_seconds=hold,
                keepalive_time_seconds=1 if hold and draw(st.booleans()) else None,
                bfd=draw(st.none() | st.just(BfdProfile(detect_multiplier=4))),
                node_selector=draw(
                    st.none() | st.sampled_from([LabelSelector(match_labels={"rack": "r2"})])
                ),
                communities=tuple(draw(st.lists(st.sampled_from(["1:1", "no-export"])))),
                pools=tuple(draw(st.lists(st.sampled_from(["pool-a", "pool-6", "gone"])))),
            )
        )
    return peers


def parse(text: str) -> dict[str, Any]:
    """What the text defines and references, for the properties."""
    lines = text.splitlines()
    route_maps = {
        m.group(1) for m in map(re.compile(r"route-map (\S+) (permit|deny) ").match, lines) if m
    }
    prefix_lists = {
        m.group(2) for line in lines if (m := re.match(r"(ip|ipv6) prefix-list (\S+) ", line))
    }
    profiles = {line.split()[1] for line in lines if line.startswith(" profile ")}
    asns = [int(line.split()[2]) for line in lines if line.startswith("router bgp ")]
    remote = {
        line.split()[1]: int(line.split()[3])
        for line in lines
        if re.match(r" neighbor \S+ remote-as ", line)
    }
    per_af: dict[str, dict[str, list[str]]] = {"ipv4": {}, "ipv6": {}}
    af = ""
    for line in lines:
        if line.startswith(" address-family "):
            af = line.split()[1]
        elif line == " exit-address-family":
            af = ""
        elif af and line.startswith("  neighbor "):
            _, address, *rest = line.split()
            per_af[af].setdefault(address, []).append(" ".join(rest))
    return {
        "route_maps": route_maps,
        "prefix_lists": prefix_lists,
        "profiles": profiles,
        "asns": asns,
        "remote": remote,
        "per_af": per_af,
        "referenced_maps": set(re.findall(r"route-map (\S+)( in| out)?$", text, re.M)),
        "referenced_lists": set(re.findall(r"match ipv?6? ?address prefix-list (\S+)", text)),
        "referenced_profiles": set(re.findall(r"bfd profile (\S+)", text)),
    }  # fmt: skip


@settings(deadline=None, max_examples=300)
@given(peer_sets(), st.lists(st.sampled_from(POOL_CHOICES), unique=True))
def test_any_set_of_peers_renders_consistently(peers: list[BgpPeer], pools: list[BgpPool]) -> None:
    config = run(peers, pools, PASSWORDS)
    selected = peers_for_node(peers, NODE.labels)
    by_name = {p.name: p for p in selected}
    left_out = {p.peer for p in config.problems if p.reason not in ("NoPool", "PoolNotFound")}
    # every selected peer is either rendered or left out with a reason, never both
    assert set(config.peers) | left_out == set(by_name)
    assert not set(config.peers) & left_out
    assert list(config.peers) == sorted(config.peers)
    facts = parse(config.text)
    if not config.peers:
        assert facts["asns"] == [] and facts["remote"] == {}
        return
    # one instance, with the first selected peer's ASN; nobody of another ASN gets in
    [asn] = facts["asns"]
    assert asn == selected[0].spec.my_asn
    assert all(by_name[n].spec.my_asn == asn for n in config.peers)
    rendered_addresses = {
        str(ipaddress.ip_address(by_name[n].spec.peer_address)) for n in config.peers
    }
    assert set(facts["remote"]) == rendered_addresses
    for other in (p for p in peers if p.spec.my_asn != asn):
        if other.spec.peer_address not in rendered_addresses:
            assert f" {other.spec.peer_address} " not in config.text
    # every neighbor: activated in its family only, with both route-maps
    for name in config.peers:
        p = by_name[name]
        address = p.spec.peer_address
        family, other_family = ("ipv4", "ipv6") if p.spec.family == 4 else ("ipv6", "ipv4")
        assert facts["per_af"][family][address] == [
            "activate",
            f"route-map {DENY_ALL_ROUTE_MAP} in",
            f"route-map {out_route_map_name(name)} out",
        ]
        assert address not in facts["per_af"][other_family]
    # everything referenced is defined
    assert {m for m, _ in facts["referenced_maps"]} <= facts["route_maps"]
    assert facts["referenced_lists"] <= facts["prefix_lists"]
    assert facts["referenced_profiles"] <= facts["profiles"]
    # passwords: only rendered peers', and never in a problem
    for problem in config.problems:
        assert not any(s in problem.message for s in [*PASSWORDS.values(), "Inline#1"])
    assert "has space" not in config.text


@settings(deadline=None, max_examples=100)
@given(peer_sets(), st.lists(st.sampled_from(POOL_CHOICES), unique=True), st.randoms())
def test_order_of_inputs_changes_nothing(
    peers: list[BgpPeer], pools: list[BgpPool], random: Random
) -> None:
    first = run(peers, pools, PASSWORDS)
    random.shuffle(peers)
    random.shuffle(pools)
    assert run(peers, pools, dict(reversed(list(PASSWORDS.items())))) == first


@settings(deadline=None, max_examples=100)
@given(peer_sets())
def test_a_node_nobody_selects_has_no_bgp(peers: list[BgpPeer]) -> None:
    everywhere = [p for p in peers if p.spec.node_selector is None]
    selective = [
        replace(p, spec=replace(p.spec, node_selector=LabelSelector(match_labels={"x": "y"})))
        for p in everywhere
    ]
    config = run(selective, POOL_CHOICES, PASSWORDS)
    assert config == run([], POOL_CHOICES)
    assert "router bgp" not in config.text
