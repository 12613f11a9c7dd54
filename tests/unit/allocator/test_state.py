"""One allocator term (`allocator.state.Term`): the book rebuilt from the caches, and the keys
each watch event queues.

docs/allocator.md, "Restarts and leader changes": a term starts from the caches alone
(claims first, then what Services carry by hand or record without a claim), so nothing is
handed out twice, and then queues every object; after that the informers feed it events and
it queues only the keys an event can change. These tests fill the caches by hand
(tests/unit/allocator/term_fakes.py), call the term as the informers do and read the queue
and the book; the last one runs the allocator's real claims informer to check the pool index
the term reads. tests/integration/test_allocator_restart.py tells the stories.
"""

from __future__ import annotations

import asyncio
from ipaddress import ip_address
from typing import Any, cast

import pytest
import structlog
from kube.kube_fakes import FakeApi

from allocator.term_fakes import (
    Cluster,
    auto,
    by_hand,
    claim,
    deleting,
    manual_claim,
    namespace,
    per_node_copy,
    pool,
    service,
)
from eipctl.allocator.keys import ALL_POOLS, ClaimKey, PoolKey, ServiceKey
from eipctl.allocator.process import Allocator
from eipctl.allocator.state import POOL_STATUS_DELAY, interesting
from eipctl.allocator.views import service_info
from eipctl.core.allocation_inputs import ClaimInfo
from eipctl.core.fields import name_of
from eipctl.core.naming import LABEL_POOL, claim_name_for
from eipctl.kube import slices
from eipctl.kube.client import IPCLAIMPOOLS, IPCLAIMS, NAMESPACES, SERVICES, Obj
from eipctl.kube.manager import LeaderTerm
from eipctl.kube.workqueue import WorkQueue
from eipctl.kube.writer import SerializedWriter
from eipctl.runtime.config import AllocatorSettings
from polling import eventually

P, Q = "p", "q"
CIDR_P = "198.51.100.0/29"  # .1 to .6
WEB, API = "default/web", "default/api"
IP1, IP2, IP3, IP4 = (f"198.51.100.{n}" for n in range(1, 5))
CLAIM1, CLAIM2 = claim_name_for(ip_address(IP1)), claim_name_for(ip_address(IP2))


def claimed(cluster: Cluster) -> Obj:
    """Pool p and web's claim of IP1, as the caches have them; returns the claim."""
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    return cluster.add(IPCLAIMS, claim(IP1, P, WEB))


def names(objs: list[Obj]) -> set[str]:
    return {name_of(o) for o in objs}


# --- what a Service must have for the allocator to look at it -------------------------------
def load_balancer(lb_class: str = "") -> Obj:
    obj = service("lb")
    obj["spec"]["type"] = "LoadBalancer"
    if lb_class:
        obj["spec"]["loadBalancerClass"] = lb_class
    return obj


@pytest.mark.parametrize(
    ("obj", "serve_unclassed", "expected"),
    [
        (auto("a"), False, True),
        (service("a", **{"eipctl.io/allocated-ips": IP1}), False, True),
        (service("a"), True, False),
        (load_balancer("eipctl.io/external-ip"), False, True),
        (load_balancer("other.example/lb"), True, False),
        (load_balancer(), False, False),
        (load_balancer(), True, True),
    ],
    ids=["asks", "records", "plain", "our-class", "other-class", "unclassed", "unclassed-served"],
)
def test_a_service_is_looked_at_when_it_asks_for_an_ip_or_records_one(
    obj: Obj, serve_unclassed: bool, expected: bool
) -> None:
    assert interesting(obj, serve_unclassed=serve_unclassed) is expected


# --- a term starts from the caches ----------------------------------------------------------
async def test_a_term_says_once_how_many_unclassed_load_balancers_it_leaves_alone() -> None:
    """A plain ``type: LoadBalancer`` (no class, no annotation) stays ``<pending>`` unless the
    allocator serves unclassed ones: the term's start says how many it leaves alone and
    which flag changes that, in one line (none when it serves them)."""
    cluster = Cluster()
    cluster.add(SERVICES, load_balancer())
    plain = load_balancer()
    plain["metadata"]["name"] = "lb2"
    cluster.add(SERVICES, plain)
    cluster.add(
        SERVICES,
        load_balancer("eipctl.io/external-ip")
        | {"metadata": {"name": "ours", "namespace": "default"}},
    )
    annotated = load_balancer()
    annotated["metadata"] = {
        "name": "asks",
        "namespace": "default",
        "annotations": {"external-ip": "auto"},
    }
    cluster.add(SERVICES, annotated)

    with structlog.testing.capture_logs() as logs:
        await cluster.term()
    with structlog.testing.capture_logs() as served_logs:
        await cluster.term(serve_unclassed=True)

    lines = [e for e in logs if e["event"] == "allocator.unclassed_ignored"]
    assert len(lines) == 1
    assert lines[0]["services"] == 2
    assert lines[0]["flag"] == "--serve-unclassed-load-balancers"
    assert not [e for e in served_logs if e["event"] == "allocator.unclassed_ignored"]


async def test_a_term_rebuilds_the_book_from_the_caches_so_nothing_is_handed_out_twice() -> None:
    """Claims, IPs carried by hand and IPs a Service records without a claim are all taken
    before any work; per-node copies and Services being deleted count for nothing."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    cluster.add(IPCLAIMS, claim(IP1, P, WEB))
    cluster.add(IPCLAIMS, per_node_copy(IP1, P, "n1"))
    cluster.add(SERVICES, auto("web", **{"eipctl.io/allocated-ips": IP1}))
    cluster.add(SERVICES, by_hand("hand", IP2))
    cluster.add(SERVICES, auto("rec", **{"eipctl.io/allocated-ips": IP3}))
    cluster.add(SERVICES, deleting(by_hand("going", IP4)))

    term = await cluster.term()

    assert term.book.held_by(WEB) == [ClaimInfo(ip_address(IP1), P, (WEB,), owned=True)]
    assert term.book.hand_set_by(ip_address(IP2)) == {"default/hand"}
    assert term.book.pending_for(ip_address(IP3)) == "default/rec"
    assert term.book.hand_set_by(ip_address(IP4)) == frozenset()
    assert term.book.counts(P) == (1, 3)
    assert set(term.first_seen) == {WEB, "default/rec"}
    new = term.book.plan("default/new", service_info(auto("new")))
    assert [a.ip for a in new.acquire] == [ip_address(IP4)]


async def test_a_rebuild_gives_the_loop_back_and_takes_the_changes_made_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rebuild yields to the loop as it walks (at 10,000 Services a walk in one go
    outlasted the Lease's renew deadline); a claim deleted while it walks, which the
    informer's handler took out of the book, is not put back by the walk reaching it."""
    monkeypatch.setattr(slices, "SLICE", 0.0)  # give the loop back after every object
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    cluster.add(IPCLAIMS, claim(IP1, P, WEB))
    doomed = cluster.add(IPCLAIMS, claim(IP2, P, API))
    term = cluster.new_term()

    rebuild = asyncio.create_task(term.rebuild())
    await asyncio.sleep(0)  # the walk took the first claim and gave the loop back
    assert not rebuild.done()
    term.on_claim(cluster.remove(IPCLAIMS, name_of(doomed)), None)  # as the informer does
    await rebuild

    assert [c.ip for c in term.book.claims()] == [ip_address(IP1)]
    assert term.book.counts(P) == (1, 5)  # IP2 is free again


async def test_a_term_queues_every_service_that_asks_every_claim_and_every_pool() -> None:
    """The first pass (and every resync) is level-based: all of it, whatever is right already;
    Services that neither ask nor record are not queued, cloud pools are nodeips's."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    cluster.add(IPCLAIMPOOLS, pool("broken", "banana"))
    cluster.add(IPCLAIMPOOLS, {"metadata": {"name": "cloud"}, "spec": {"provider": "aws"}})
    cluster.add(IPCLAIMS, claim(IP1, P, WEB))
    cluster.add(IPCLAIMS, per_node_copy(IP1, P, "n1"))
    cluster.add(SERVICES, auto("web"))
    cluster.add(SERVICES, by_hand("hand", IP2))

    term = await cluster.term()

    everything = {
        ServiceKey(WEB),
        ClaimKey(CLAIM1),
        ClaimKey(f"{CLAIM1}.n1"),
        PoolKey(P),
        PoolKey("broken"),
    }
    assert cluster.queue.take() == everything
    await term.resync()
    assert cluster.queue.take() == everything


async def test_refreshing_pools_names_those_whose_view_changed() -> None:
    """Added, changed and removed pools are named (their holders must look again); a pool
    whose spec did not change is not."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    cluster.add(IPCLAIMPOOLS, pool(Q, "203.0.113.0/29"))
    cluster.add(IPCLAIMPOOLS, pool("same", "192.0.2.0/29"))
    term = await cluster.term()
    assert term.refresh_pools() == []

    cluster.add(IPCLAIMPOOLS, pool(P, "198.51.100.0/28"))
    cluster.remove(IPCLAIMPOOLS, Q)
    cluster.add(IPCLAIMPOOLS, pool("new", "192.0.2.64/29"))

    assert set(term.refresh_pools()) == {P, Q, "new"}
    assert term.book.pool(Q) is None
    assert term.book.counts(P) == (0, 14)
    assert term.refresh_pools() == []


# --- Service events -------------------------------------------------------------------------
async def test_a_service_that_asks_is_queued_and_its_wait_timed() -> None:
    cluster = Cluster()
    term = await cluster.term()

    term.on_service(None, auto("web"))

    assert cluster.queue.take() == {ServiceKey(WEB)}
    assert WEB in term.first_seen


async def test_a_service_that_neither_asks_nor_holds_is_not_queued_but_is_known() -> None:
    """The book still records it: the IPs it carries by hand are in use."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    term = await cluster.leading()

    term.on_service(None, by_hand("hand", IP2))

    assert cluster.queue.take() == set()
    assert term.book.hand_set_by(ip_address(IP2)) == {"default/hand"}
    assert term.first_seen == {}


@pytest.mark.parametrize("after", [service("web"), None], ids=["stops-asking", "deleted"])
async def test_a_service_holding_an_ip_is_queued_when_it_stops_asking_or_goes(
    after: Obj | None,
) -> None:
    """Its IP must be released: the Service is queued though it no longer asks."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    cluster.add(IPCLAIMS, claim(IP1, P, WEB))
    before = cluster.add(SERVICES, auto("web"))
    term = await cluster.leading()

    term.on_service(before, after)

    assert cluster.queue.take() == {ServiceKey(WEB)}
    assert (term.book.service(WEB) is None) is (after is None)


async def test_an_ip_freed_by_hand_wakes_the_services_waiting_for_space() -> None:
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    hand = cluster.add(SERVICES, by_hand("hand", IP2))
    term = await cluster.leading(waiting=("default/waiting",))

    term.on_service(hand, None)

    assert cluster.queue.take() == {ServiceKey("default/waiting")}
    assert term.book.hand_set_by(ip_address(IP2)) == frozenset()


@pytest.mark.parametrize(
    ("change", "others_queued"),
    [("port", True), ("deleted", True), ("label", False)],
)
async def test_what_sharing_looks_at_changing_requeues_the_services_sharing_the_ip(
    change: str, others_queued: bool
) -> None:
    """Ports, selector or traffic policy of one holder decide whether the others may keep
    sharing with it; any other change leaves them alone."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    cluster.add(IPCLAIMS, claim(IP1, P, API, WEB, sharing_key="blue"))
    before = cluster.add(SERVICES, auto("web", external_ip_sharing_key="blue"))
    cluster.add(SERVICES, auto("api", port=443, external_ip_sharing_key="blue"))
    term = await cluster.leading()
    after: Obj | None = auto("web", port=8080, external_ip_sharing_key="blue")
    if change == "deleted":
        after = None
    elif change == "label":
        after = auto("web", external_ip_sharing_key="blue")
        after["metadata"]["labels"] = {"team": "a"}

    term.on_service(before, after)

    assert cluster.queue.take() == {ServiceKey(WEB), *([ServiceKey(API)] * others_queued)}


# --- claim events ---------------------------------------------------------------------------
async def test_a_new_claim_is_recorded_and_queues_its_services_itself_and_its_pool_later() -> None:
    """The pool's status follows after `POOL_STATUS_DELAY`, one write per burst of claims."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    term = await cluster.leading()

    term.on_claim(None, claim(IP1, P, API, WEB))

    assert cluster.queue.take() == {ServiceKey(WEB), ServiceKey(API), ClaimKey(CLAIM1)}
    assert cluster.queue.delayed == {(PoolKey(P), POOL_STATUS_DELAY)}
    assert term.book.counts(P) == (1, 5)


async def test_a_deleted_claim_frees_its_ip_and_wakes_the_services_waiting_for_space() -> None:
    cluster = Cluster()
    gone = claimed(cluster)
    term = await cluster.leading(waiting=("default/waiting",))

    term.on_claim(gone, None)

    assert cluster.queue.take() == {
        ServiceKey(WEB),
        ServiceKey("default/waiting"),
        ClaimKey(CLAIM1),
    }
    assert cluster.queue.delayed == {(PoolKey(P), POOL_STATUS_DELAY)}
    assert term.book.claim(ip_address(IP1)) is None
    assert term.book.counts(P) == (0, 6)


async def test_a_claim_moved_to_another_pool_updates_both_pools() -> None:
    cluster = Cluster()
    before = claimed(cluster)
    term = await cluster.leading()

    term.on_claim(before, claim(IP1, Q, WEB))

    assert cluster.queue.take() == {ServiceKey(WEB), ClaimKey(CLAIM1)}
    assert cluster.queue.delayed == {
        (PoolKey(P), POOL_STATUS_DELAY),
        (PoolKey(Q), POOL_STATUS_DELAY),
    }


@pytest.mark.parametrize("change", ["status", "per-node-copy"])
async def test_a_claim_event_that_changes_nothing_the_allocator_reads_queues_nothing(
    change: str,
) -> None:
    """A status write (the scheduler binding it) or a per-node copy coming or going."""
    cluster = Cluster()
    before = claimed(cluster)
    term = await cluster.leading()

    if change == "status":
        term.on_claim(before, {**before, "status": {"phase": "Bound", "boundNode": "n1"}})
    else:
        term.on_claim(None, per_node_copy(IP1, P, "n1"))

    assert cluster.queue.take() == set()
    assert cluster.queue.delayed == set()
    assert term.book.held_by(WEB) == [ClaimInfo(ip_address(IP1), P, (WEB,), owned=True)]


# --- pool and namespace events ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("old", "new", "queued"),
    [
        (None, pool(P, CIDR_P), {ALL_POOLS, PoolKey(P)}),
        (pool(P, CIDR_P), pool(P, "198.51.100.0/28"), {ALL_POOLS, PoolKey(P)}),
        (pool(P, CIDR_P), None, {ALL_POOLS}),
    ],
    ids=["added", "changed", "deleted"],
)
async def test_a_pool_event_rereads_every_pool_and_the_pool_itself(
    old: Obj | None, new: Obj | None, queued: set[Any]
) -> None:
    """Readiness and overlaps depend on every pool, so all are read again (`AllPools`)."""
    cluster = Cluster()
    term = await cluster.term()

    term.on_pool(old, new)

    assert cluster.queue.take() == queued


@pytest.mark.parametrize(
    ("old", "new", "queued"),
    [
        (namespace("team", tier="a"), namespace("team", tier="b"), {ServiceKey("team/web")}),
        (None, namespace("team"), {ServiceKey("team/web")}),
        (namespace("team", tier="a"), namespace("team", tier="a"), set()),
    ],
    ids=["relabelled", "added", "unchanged"],
)
async def test_a_namespace_relabelled_requeues_the_services_in_it_that_ask(
    old: Obj | None, new: Obj | None, queued: set[Any]
) -> None:
    """Pools select Services by their namespace's labels."""
    cluster = Cluster()
    cluster.add(SERVICES, auto("web", "team"))
    cluster.add(SERVICES, service("plain", "team"))
    cluster.add(SERVICES, auto("web", "other"))
    cluster.add(NAMESPACES, namespace("team", tier="a"))
    term = await cluster.leading()

    term.on_namespace(old, new)

    assert cluster.queue.take() == queued


# --- lookups ---------------------------------------------------------------------------------
async def test_the_holders_of_a_pool_are_the_services_of_every_claim_the_book_has_in_it() -> None:
    """Claims made by others count too (the scheduler's, for an IP set by hand)."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    cluster.add(IPCLAIMS, claim(IP1, P, API, WEB))
    cluster.add(IPCLAIMS, manual_claim(IP2, P, "default/hand"))
    cluster.add(IPCLAIMS, claim("203.0.113.1", Q, "default/elsewhere"))
    term = await cluster.term()

    assert term.holders_of_pool(P) == {WEB, API, "default/hand"}
    assert term.holders_of_pool("none") == set()


async def test_the_claims_of_a_pool_are_read_from_the_pool_index() -> None:
    """Every cached claim labelled with the pool, per-node copies included."""
    cluster = Cluster()
    cluster.add(IPCLAIMS, claim(IP1, P, WEB))
    cluster.add(IPCLAIMS, per_node_copy(IP1, P, "n1"))
    cluster.add(IPCLAIMS, claim(IP2, Q, API))
    unlabelled = claim(IP3, P, WEB)
    del unlabelled["metadata"]["labels"][LABEL_POOL]
    cluster.add(IPCLAIMS, unlabelled)
    term = await cluster.term()

    assert names(term.claims_in_pool(P)) == {CLAIM1, f"{CLAIM1}.n1"}
    assert names(term.claims_in_pool(Q)) == {CLAIM2}
    assert term.claims_in_pool("") == []


async def test_the_allocators_claims_informer_keeps_the_pool_index_the_term_reads() -> None:
    """The claims informer of a real `Allocator` on the in-memory API: the index follows a
    claim added, moved to another pool and deleted."""
    api = FakeApi()
    api.put(IPCLAIMS, claim(IP1, P, WEB))
    settings = AllocatorSettings(leader_elect=False, identity="unit")
    allocator = Allocator(cast(Any, api), settings)
    lead = LeaderTerm(1, WorkQueue[Any]("unit"), SerializedWriter(cast(Any, api)))
    allocator.start()
    try:
        await allocator.manager.wait_synced()
        await allocator.start_term(lead)
        term = allocator.term
        assert term is not None
        assert names(term.claims_in_pool(P)) == {CLAIM1}

        api.put(IPCLAIMS, claim(IP1, Q, WEB))
        api.put(IPCLAIMS, claim(IP2, P, API))
        await eventually(lambda: names(term.claims_in_pool(P)) == {CLAIM2})
        assert names(term.claims_in_pool(Q)) == {CLAIM1}

        api.remove(IPCLAIMS, CLAIM2)
        await eventually(lambda: term.claims_in_pool(P) == [])
        assert names(term.claims_in_pool(Q)) == {CLAIM1}
    finally:
        lead.queue.shutdown()
        await allocator.end_term(lead)
        await allocator.stop()
