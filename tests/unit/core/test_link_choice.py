"""`core.link_choice.choose_link`: the precedence of the link's sources, over candidate sets.

The properties say what an operator relies on: a named link is used as named or not at
all, discovery only ever picks an up link, the Node's IP beats the default route, and the
kernel's listing order changes nothing.
"""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from random import Random

from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.link_choice import (
    ANNOTATION_LINK,
    HostLinks,
    IPAddress,
    LinkFacts,
    Problem,
    Source,
    choose_link,
    is_auto,
)

NAMES = ["eth0", "eth1", "bond0", "ens5", "lo"]
IPS: list[IPAddress] = [
    ipaddress.ip_address(text)
    for text in ("192.0.2.2", "192.0.2.3", "198.51.100.7", "2001:db8::2", "127.0.0.1")
]

names = st.sampled_from(NAMES)
ips = st.sampled_from(IPS)


@st.composite
def hosts(draw: st.DrawFn) -> HostLinks:
    chosen = draw(st.lists(names, unique=True, max_size=len(NAMES)))
    links = tuple(
        LinkFacts(name, draw(st.booleans()), frozenset(draw(st.lists(ips, max_size=3))))
        for name in chosen
    )
    routes = draw(st.lists(st.sampled_from([*NAMES, "gone0"]), unique=True, max_size=3))
    return HostLinks(links, tuple(routes))


flags = st.sampled_from(["auto", "", " auto ", *NAMES, "missing0"])
link_annotations = st.one_of(st.none(), st.sampled_from(["", *NAMES, "missing0"]))
node_ips = st.lists(ips, max_size=3)


def up(host: HostLinks, name: str | None) -> bool:
    facts = host.get(name) if name is not None else None
    return facts is not None and facts.up


@given(flags, link_annotations, node_ips, hosts())
def test_an_explicit_flag_wins_as_named_or_not_at_all(
    flag: str, annotation: str | None, ips_: list[IPAddress], host: HostLinks
) -> None:
    choice = choose_link(flag, annotation, ips_, host)
    if is_auto(flag):
        assert choice.source is not Source.FLAG
        return
    assert choice.source is Source.FLAG and choice.link == flag.strip()
    facts = host.get(flag.strip())
    expected = None if facts and facts.up else Problem.DOWN if facts else Problem.MISSING
    assert choice.problem is expected
    assert flag.strip() in choice.message and "--iface" in choice.message


@given(link_annotations, node_ips, hosts())
def test_the_annotation_wins_over_discovery(
    annotation: str | None, ips_: list[IPAddress], host: HostLinks
) -> None:
    choice = choose_link("auto", annotation, ips_, host)
    if not annotation:
        assert choice.source not in (Source.FLAG, Source.ANNOTATION)
        return
    assert choice.source is Source.ANNOTATION and choice.link == annotation
    assert choice.ok == up(host, annotation)
    assert ANNOTATION_LINK in choice.message


@given(node_ips, hosts())
def test_discovery_picks_an_up_link_holding_the_first_ip_any_up_link_holds(
    ips_: list[IPAddress], host: HostLinks
) -> None:
    choice = choose_link("auto", None, ips_, host)
    held = [ip for ip in ips_ if any(ip in link.addresses for link in host.links if link.up)]
    if held:
        assert choice.ok and choice.source is Source.INTERNAL_IP
        facts = host.get(choice.link or "")
        assert facts is not None and facts.up and held[0] in facts.addresses
        assert str(held[0]) in choice.message
        return
    routes = [name for name in host.default_route_links if up(host, name)]
    if routes:
        assert choice.ok and choice.source is Source.DEFAULT_ROUTE and choice.link == routes[0]
        return
    assert choice.problem is Problem.NOT_FOUND and choice.link is None
    assert all(str(ip) in choice.message for ip in ips_)


@given(flags, link_annotations, node_ips, hosts(), st.randoms(use_true_random=False))
def test_the_kernels_listing_order_changes_nothing(
    flag: str, annotation: str | None, ips_: list[IPAddress], host: HostLinks, rnd: Random
) -> None:
    shuffled = list(host.links)
    rnd.shuffle(shuffled)
    again = choose_link(flag, annotation, ips_, replace(host, links=tuple(shuffled)))
    assert again == choose_link(flag, annotation, ips_, host)


@given(flags, link_annotations, node_ips, hosts())
def test_a_usable_choice_is_an_up_link_and_a_problem_says_why(
    flag: str, annotation: str | None, ips_: list[IPAddress], host: HostLinks
) -> None:
    choice = choose_link(flag, annotation, ips_, host)
    if choice.ok:
        assert up(host, choice.link)
        assert choice.message == f"link {choice.link} ({choice.detail})"
    else:
        assert choice.message.startswith(("link ", "no link found"))
        if choice.link is not None:
            assert choice.link in choice.message


def test_examples() -> None:
    eth0 = LinkFacts("eth0", True, frozenset({ipaddress.ip_address("192.0.2.2")}))
    eth1 = LinkFacts("eth1", True, frozenset({ipaddress.ip_address("198.51.100.7")}))
    host = HostLinks((eth0, eth1), ("eth1",))
    node_ip = [ipaddress.ip_address("192.0.2.2")]
    assert choose_link("auto", None, node_ip, host).link == "eth0"
    assert choose_link("auto", None, [], host).source is Source.DEFAULT_ROUTE
    assert choose_link("eth1", "eth0", node_ip, host).link == "eth1"
    missing = choose_link("auto", "eth9", node_ip, host)
    assert missing.message == f"link eth9 (annotation {ANNOTATION_LINK}) does not exist"
    down = choose_link("auto", None, node_ip, HostLinks((replace(eth0, up=False),)))
    assert down.message == (
        "no link found (no up link holds 192.0.2.2 and no default route on an up link)"
    )
