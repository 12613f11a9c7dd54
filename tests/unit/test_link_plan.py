"""core/link_plan.py: the controller's link plan, by example and by property."""

from __future__ import annotations

import copy
import ipaddress
from collections.abc import Mapping

from hypothesis import example, given, settings
from hypothesis import strategies as st

from eipctl.core.link_plan import (
    Address,
    BlockReason,
    LinkPlan,
    LinkView,
    PlacedClaim,
    ip_sort_key,
    links_to_inspect,
    plan,
)


def v4(text: str) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(text)


def claim(name: str, ip: str, prefixlen: int = 32, link: str = "eth0") -> PlacedClaim:
    return PlacedClaim(name, Address(link, ipaddress.ip_address(ip), prefixlen))


def apply_plan(observed: Mapping[str, LinkView], actions: LinkPlan) -> dict[str, LinkView]:
    """The links after `actions` succeed, with LinkBackend's rules: the model the property
    tests check a plan against."""
    managed = {link: set(view.managed) for link, view in observed.items()}
    # an add, and a keep's renewal (also LinkBackend.add), replaces the IP's other prefix
    # lengths on that link; a remove takes exactly (ip, prefix length) off
    for claim in (*actions.add, *actions.keep):
        addr = claim.address
        managed[addr.link] = {(ip, p) for ip, p in managed[addr.link] if ip != addr.ip}
        managed[addr.link].add((addr.ip, addr.prefixlen))
    for addr in actions.remove:
        managed[addr.link].discard((addr.ip, addr.prefixlen))
    return {
        link: LinkView(frozenset(managed[link]), view.foreign) for link, view in observed.items()
    }


# -- examples --------------------------------------------------------------------------


def test_new_claim_is_added_and_stray_managed_address_removed() -> None:
    observed = {"eth0": LinkView(managed=frozenset({(v4("203.0.113.9"), 32)}))}
    result = plan([claim("a", "203.0.113.7")], observed)
    assert [c.name for c in result.add] == ["a"]
    assert result.remove == (Address("eth0", v4("203.0.113.9"), 32),)
    assert result.keep == ()


def test_startup_keeps_addresses_already_on_the_link() -> None:
    """A restart must not remove-then-add nor re-probe: present addresses are only kept."""
    observed = {
        "eth0": LinkView(managed=frozenset({(v4("203.0.113.7"), 32), (v4("203.0.113.8"), 32)}))
    }
    result = plan([claim("a", "203.0.113.7")], observed)
    assert [c.name for c in result.keep] == ["a"]
    assert result.add == ()
    assert result.remove == (Address("eth0", v4("203.0.113.8"), 32),)


def test_admin_address_is_never_removed_and_blocks_the_claim() -> None:
    observed = {"eth0": LinkView(foreign=frozenset({v4("203.0.113.7"), v4("192.0.2.1")}))}
    result = plan([claim("a", "203.0.113.7")], observed)
    assert result.add == () and result.remove == ()
    assert [(b.claim.name, b.reason) for b in result.blocked] == [("a", BlockReason.ADMIN_ADDRESS)]


def test_an_address_whose_ip_an_administrator_also_holds_is_never_removed() -> None:
    """The same IP twice on one link, eipctl's /32 and an administrator's /24 (the kernel
    keeps both): releasing the claim, or fencing, must not take the administrator's IP off
    the link with ours."""
    shared = v4("203.0.113.7")
    observed = {"eth0": LinkView(managed=frozenset({(shared, 32)}), foreign=frozenset({shared}))}
    assert plan([], observed).remove == ()
    assert plan([], observed, fenced=True).remove == ()
    held = plan([claim("a", "203.0.113.7")], observed)
    assert held.remove == () and held.add == ()
    assert [b.reason for b in held.blocked] == [BlockReason.ADMIN_ADDRESS]


def test_missing_link_blocks_the_claim() -> None:
    result = plan([claim("a", "203.0.113.7", link="eth9")], {"eth0": LinkView()})
    assert [(b.claim.name, b.reason) for b in result.blocked] == [("a", BlockReason.LINK_MISSING)]


def test_duplicate_ip_smallest_name_wins() -> None:
    result = plan([claim("b", "203.0.113.7"), claim("a", "203.0.113.7")], {"eth0": LinkView()})
    assert [c.name for c in result.add] == ["a"]
    assert [(b.claim.name, b.reason) for b in result.blocked] == [("b", BlockReason.DUPLICATE_IP)]


def test_a_claim_and_its_own_per_node_copy_are_one_ip_not_a_conflict() -> None:
    """While a pool's placement switches to or from all, the IP's claim and its copy for
    this node both name it: held once, no DuplicateIP; another claim still conflicts."""
    result = plan(
        [
            claim("203-0-113-7.node-a", "203.0.113.7"),
            claim("203-0-113-7", "203.0.113.7"),
            claim("zz-other", "203.0.113.7"),
        ],
        {"eth0": LinkView()},
    )
    assert [c.name for c in result.add] == ["203-0-113-7"]
    assert [c.name for c in result.merged] == ["203-0-113-7.node-a"]
    assert [(b.claim.name, b.reason) for b in result.blocked] == [
        ("zz-other", BlockReason.DUPLICATE_IP)
    ]


def test_prefix_change_is_a_replace_not_a_remove() -> None:
    observed = {"eth0": LinkView(managed=frozenset({(v4("203.0.113.7"), 32)}))}
    result = plan([claim("a", "203.0.113.7", prefixlen=24)], observed)
    assert [c.address.prefixlen for c in result.add] == [24]
    assert result.remove == ()


def test_claim_moving_between_links_is_added_then_removed() -> None:
    observed = {
        "eth0": LinkView(managed=frozenset({(v4("203.0.113.7"), 32)})),
        "eth1": LinkView(),
    }
    result = plan([claim("a", "203.0.113.7", link="eth1")], observed)
    assert [c.address.link for c in result.add] == ["eth1"]
    assert result.remove == (Address("eth0", v4("203.0.113.7"), 32),)


def test_fenced_removes_everything_managed_and_adds_nothing() -> None:
    observed = {
        "eth0": LinkView(
            managed=frozenset({(v4("203.0.113.7"), 32)}), foreign=frozenset({v4("192.0.2.1")})
        )
    }
    result = plan([claim("a", "203.0.113.7"), claim("b", "203.0.113.8")], observed, fenced=True)
    assert result.add == () and result.keep == () and result.blocked == ()
    assert result.remove == (Address("eth0", v4("203.0.113.7"), 32),)


def test_ipv6_and_ipv4_sort_together() -> None:
    result = plan(
        [claim("v6", "2001:db8::7", 128), claim("v4", "203.0.113.7")], {"eth0": LinkView()}
    )
    assert [c.name for c in result.add] == ["v4", "v6"]


def test_links_to_inspect() -> None:
    links = links_to_inspect("eth0", [claim("a", "203.0.113.7", link="eth1")], ["eth2"])
    assert links == {"eth0", "eth1", "eth2"}


# -- properties ------------------------------------------------------------------------

LINKS = ("eth0", "eth1")
ips = st.one_of(
    st.integers(0, 15).map(lambda n: ipaddress.IPv4Address(int(v4("203.0.113.0")) + n)),
    st.integers(0, 7).map(lambda n: ipaddress.IPv6Address(f"2001:db8::{n:x}")),
)


def prefix_for(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> st.SearchStrategy[int]:
    return st.sampled_from((24, 32) if ip.version == 4 else (64, 128))


@st.composite
def claims(draw: st.DrawFn) -> PlacedClaim:
    ip = draw(ips)
    return PlacedClaim(
        draw(st.sampled_from("abcdefgh")),
        Address(draw(st.sampled_from((*LINKS, "eth9"))), ip, draw(prefix_for(ip))),
    )


addresses = ips.flatmap(lambda ip: prefix_for(ip).map(lambda p: (ip, p)))


@st.composite
def link_views(draw: st.DrawFn) -> LinkView:
    foreign = draw(st.frozensets(ips, max_size=3))
    # drawn apart from foreign, so an IP may be both: eipctl's address and an administrator's
    # with another prefix length on the same link (the case the remove guard exists for);
    # and as (ip, prefix length) pairs, so one IP may be eipctl's twice, /24 and /32 (the
    # kernel keeps both: a replace by an older process, an operator's `ip addr add`)
    managed = draw(st.frozensets(addresses, max_size=6))
    if foreign and draw(st.booleans()):  # not left to chance: ours and an administrator's
        ip = draw(st.sampled_from(sorted(foreign, key=ip_sort_key)))
        managed |= {(ip, draw(prefix_for(ip)))}
    return LinkView(managed=managed, foreign=foreign)


observed_links = st.fixed_dictionaries({link: link_views() for link in LINKS})

SHARED = v4("203.0.113.7")
OURS_AND_AN_ADMINS = {
    "eth0": LinkView(managed=frozenset({(SHARED, 32)}), foreign=frozenset({SHARED})),
    "eth1": LinkView(),
}
"""The remove guard's case: the same IP eipctl's /32 and an administrator's (any prefix)."""
OURS_TWICE = {
    "eth0": LinkView(managed=frozenset({(SHARED, 24), (SHARED, 32)})),
    "eth1": LinkView(),
}
"""One IP eipctl's with two prefix lengths on one link."""


@settings(max_examples=300)
@given(st.lists(claims(), max_size=10), observed_links, st.booleans())
@example([], OURS_AND_AN_ADMINS, False)
@example([], OURS_AND_AN_ADMINS, True)
@example([claim("a", "203.0.113.7", 24)], OURS_AND_AN_ADMINS, False)
@example([], OURS_TWICE, False)
@example([claim("a", "203.0.113.7", 32)], OURS_TWICE, False)
@example([claim("a", "203.0.113.7", 32, link="eth1")], OURS_TWICE, False)
def test_after_applying_the_plan_the_links_hold_exactly_the_desired_set(
    desired: list[PlacedClaim], observed: dict[str, LinkView], fenced: bool
) -> None:
    desired_before = copy.deepcopy(desired)
    observed_before = copy.deepcopy(observed)

    actions = plan(desired, observed, fenced=fenced)
    after = apply_plan(observed, actions)

    # inputs untouched
    assert desired == desired_before
    assert observed == observed_before
    # admin addresses are never in the remove set
    for addr in actions.remove:
        assert addr.ip not in observed[addr.link].foreign
        assert (addr.ip, addr.prefixlen) in observed[addr.link].managed
    # the managed addresses now equal the (unblocked) desired set, plus those whose IP an
    # administrator also holds on that link: never removed, fenced or not
    shared_with_admin = {
        (link, ip, p)
        for link, view in observed.items()
        for ip, p in view.managed
        if ip in view.foreign
    }
    expected = {
        (c.address.link, c.address.ip, c.address.prefixlen) for c in (*actions.add, *actions.keep)
    } | shared_with_admin
    got = {(link, ip, p) for link, view in after.items() for ip, p in view.managed}
    assert got == expected
    assert all(after[link].foreign == observed[link].foreign for link in LINKS)
    # every claim is accounted for exactly once
    if not fenced:
        accounted = (
            len(actions.add) + len(actions.keep) + len(actions.blocked) + len(actions.merged)
        )
        assert accounted == len(desired)
        # one claim per IP on the node
        ips_held = [c.address.ip for c in (*actions.add, *actions.keep)]
        assert len(ips_held) == len(set(ips_held))
    else:
        assert not (actions.add or actions.keep) and got == shared_with_admin
    # idempotent: a second pass over the result only keeps
    again = plan(desired, after, fenced=fenced)
    assert again.add == () and again.remove == ()


@given(st.lists(claims(), max_size=10), observed_links)
@example([claim("a", "203.0.113.7", 32)], OURS_TWICE)
def test_addresses_already_on_the_link_are_never_re_added_or_removed(
    desired: list[PlacedClaim], observed: dict[str, LinkView]
) -> None:
    actions = plan(desired, observed)
    for c in actions.keep:
        assert c.address not in actions.remove
    removed = set(actions.remove)
    losers = {id(b.claim) for b in actions.blocked}
    links_of: dict[object, set[str]] = {}
    for c in desired:
        links_of.setdefault(c.address.ip, set()).add(c.address.link)
    for c in desired:
        if id(c) in losers:
            continue
        a = c.address
        if len(links_of[a.ip]) > 1:
            # one IP wanted on two links (no claim set a node sees can say so: a claim is
            # named after its IP): the plan keeps it on one of them, which is not this
            # property's business
            continue
        if a.link in observed and (a.ip, a.prefixlen) in observed[a.link].managed:
            # placed here and present: kept (unless another claim for the IP won)
            assert a not in removed
            assert all(x.address != a for x in actions.add)
