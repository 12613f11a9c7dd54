"""The pool and claim reconcile (`allocator.pools.PoolReconciler`), one pass at a time.

docs/allocator.md, "Pools" and "Bad input": a pool's status (allocated, free, Ready) is
written only when it changes; a bad pool (a malformed spec, or one overlapping an older
pool) is not Ready, is told once with a Warning Event, and nothing already allocated from it
is lost; the pool-protection finalizer holds a deleted pool until its allocations are
released (with --purge-on-pool-delete, its Services are sent to release them); an allocator
claim whose Services are all gone is released. These tests run one pass on the in-memory
API with the caches filled by hand (tests/unit/allocator/term_fakes.py) and check what was
written, queued and told. tests/integration/test_allocator_pools.py tells the same stories
against the API emulator and a running allocator.
"""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import ip_address
from typing import Any, cast

import pytest
import structlog
from kube.kube_fakes import FakeApi

from allocator.term_fakes import (
    Cluster,
    auto,
    claim,
    deleting,
    manual_claim,
    per_node_copy,
    pool,
    service,
)
from eipctl.allocator import metrics
from eipctl.allocator.keys import PoolKey, ServiceKey
from eipctl.allocator.pools import PoolReconciler
from eipctl.allocator.services import ServiceReconciler
from eipctl.allocator.state import Term
from eipctl.core.naming import POOL_FINALIZER, claim_name_for
from eipctl.kube.client import IPCLAIMPOOLS, IPCLAIMS, SERVICES, Obj, ResourceRef
from eipctl.kube.errors import Conflict
from eipctl.kube.workqueue import DONE, requeue_after
from eipctl.metrics import REGISTRY

P = "p"
CIDR_P = "198.51.100.0/29"  # .1 to .6
WEB, STOPPED = "default/web", "default/stopped"
IP1, IP2 = "198.51.100.1", "198.51.100.2"
CLAIM1 = claim_name_for(ip_address(IP1))


@pytest.fixture(autouse=True)
def no_pool_gauges() -> Iterator[None]:
    """The pool gauges are the process's: each test starts and ends without any."""
    metrics.clear_all_pool_addresses()
    yield
    metrics.clear_all_pool_addresses()


async def reconciler(cluster: Cluster, *, purge: bool = False) -> tuple[PoolReconciler, Term]:
    term = await cluster.leading(purge=purge)
    return PoolReconciler(term, cast(Any, cluster.api), purge_on_delete=purge), term


def holding(cluster: Cluster, pool_obj: Obj) -> None:
    """`pool_obj`, and web holding IP1 from it (its claim, and the IP on the Service)."""
    cluster.add(IPCLAIMPOOLS, pool_obj)
    cluster.add(IPCLAIMS, claim(IP1, P, WEB))
    web = auto("web", **{"eipctl.io/allocated-ips": IP1})
    web["spec"]["externalIPs"] = [IP1]
    cluster.add(SERVICES, web)


def protected(obj: Obj) -> Obj:
    """`obj` carrying the pool-protection finalizer."""
    return {**obj, "metadata": {**obj["metadata"], "finalizers": [POOL_FINALIZER]}}


def stopped_asking(cluster: Cluster) -> None:
    """A Service that no longer asks for an IP and still holds IP2 (not released yet)."""
    cluster.add(IPCLAIMS, claim(IP2, P, STOPPED))
    cluster.add(SERVICES, service("stopped"))


def status_of(cluster: Cluster, name: str) -> dict[str, Any]:
    return dict(cluster.stored(IPCLAIMPOOLS, name).get("status") or {})


def ready_of(cluster: Cluster, name: str) -> tuple[str, str, str]:
    conditions = status_of(cluster, name).get("conditions") or []
    ready = next(c for c in conditions if c["type"] == "Ready")
    return ready["status"], ready["reason"], ready["message"]


def gauge(pool_name: str, state: str) -> float | None:
    return REGISTRY.get_sample_value("eipctl_pool_addresses", {"pool": pool_name, "state": state})


def released_orphans(pool_name: str) -> float:
    labels = {"pool": pool_name, "reason": metrics.RELEASE_ORPHANED}
    return REGISTRY.get_sample_value("eipctl_releases_total", labels) or 0.0


# --- status of a pool that serves -----------------------------------------------------------
async def test_a_pool_gets_its_finalizer_and_a_ready_status_with_its_counts() -> None:
    cluster = Cluster()
    holding(cluster, pool(P, CIDR_P))
    pools, _ = await reconciler(cluster)

    assert await pools.reconcile(P) == DONE

    stored = cluster.stored(IPCLAIMPOOLS, P)
    assert stored["metadata"]["finalizers"] == [POOL_FINALIZER]
    status = status_of(cluster, P)
    assert (status["allocated"], status["free"]) == (1, 5)
    assert ready_of(cluster, P) == ("True", "Ready", "6 address(es), 5 free")
    assert status["conditions"][0]["observedGeneration"] == 1
    assert (gauge(P, "size"), gauge(P, "used"), gauge(P, "free")) == (6.0, 1.0, 5.0)
    assert cluster.posted.events == []


async def test_a_pool_whose_status_is_right_is_not_written_again() -> None:
    cluster = Cluster()
    holding(cluster, pool(P, CIDR_P))
    pools, _ = await reconciler(cluster)
    await pools.reconcile(P)
    written = cluster.api.rv

    assert await pools.reconcile(P) == DONE

    assert cluster.api.rv == written


async def test_a_pool_gone_from_the_cache_is_forgotten_without_a_write() -> None:
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    pools, term = await reconciler(cluster)
    await pools.reconcile(P)
    cluster.remove(IPCLAIMPOOLS, P)
    term.refresh_pools()
    written = cluster.api.rv

    assert await pools.reconcile(P) == DONE

    assert cluster.api.rv == written
    assert gauge(P, "size") is None


# --- bad pools ----------------------------------------------------------------------------
async def test_a_malformed_pool_is_not_ready_and_told_once_while_its_allocations_stay() -> None:
    """A pool edited to a malformed CIDR: InvalidSpec and one InvalidPool Event, however
    often it is reconciled; its holder is looked at again and keeps its IP and claim, marked
    InPool=False (with a Warning Event on the Service)."""
    cluster = Cluster()
    holding(cluster, pool(P, CIDR_P))
    pools, term = await reconciler(cluster)
    cluster.add(IPCLAIMPOOLS, pool(P, "198.51.100.0/33"))

    await pools.refresh()
    assert cluster.queue.take() == {ServiceKey(WEB), PoolKey(P)}
    await pools.reconcile(P)
    await pools.reconcile(P)

    problem = "spec.cidr: '198.51.100.0/33': prefix length must be 0..32"
    assert ready_of(cluster, P) == ("False", "InvalidSpec", problem)
    assert (status_of(cluster, P)["allocated"], status_of(cluster, P)["free"]) == (1, 0)
    assert cluster.posted.events == [("IpClaimPool/p", "Warning", "InvalidPool", problem)]
    assert gauge(P, "size") is None
    await ServiceReconciler(term, cast(Any, cluster.api)).reconcile(WEB)
    assert cluster.stored(SERVICES, WEB)["spec"]["externalIPs"] == [IP1]
    assert cluster.stored(IPCLAIMS, CLAIM1)["spec"]["services"] == [WEB]
    assert [str(c.ip) for c in term.book.held_by(WEB)] == [IP1]
    (in_pool,) = cluster.stored(IPCLAIMS, CLAIM1)["status"]["conditions"]
    assert (in_pool["type"], in_pool["status"], in_pool["reason"]) == (
        "InPool",
        "False",
        "OutsidePool",
    )
    assert cluster.posted.events[1][:3] == ("Service/web", "Warning", "OutsidePool")


async def test_an_overlapping_pool_is_not_ready_and_the_older_one_keeps_serving() -> None:
    """The newer of two overlapping pools gets Overlap and one Event; fixed, it is Ready
    and the problem is forgotten, so a relapse is told again."""
    cluster = Cluster()
    holding(cluster, pool(P, CIDR_P))
    late = pool("late", "198.51.100.4/30", created="2024-02-01T00:00:00Z")
    cluster.add(IPCLAIMPOOLS, late)
    pools, term = await reconciler(cluster)

    await pools.reconcile(P)
    await pools.reconcile("late")
    await pools.reconcile("late")

    problem = "overlaps pool 'p' (e.g. at 198.51.100.5)"
    assert ready_of(cluster, "late") == ("False", "Overlap", problem)
    assert ready_of(cluster, P) == ("True", "Ready", "6 address(es), 5 free")
    told = ("IpClaimPool/late", "Warning", "Overlap", problem)
    assert cluster.posted.events == [told]
    assert [str(c.ip) for c in term.book.held_by(WEB)] == [IP1]

    cluster.add(IPCLAIMPOOLS, pool("late", "192.0.2.0/30", created="2024-02-01T00:00:00Z"))
    await pools.refresh()
    await pools.reconcile("late")
    assert ready_of(cluster, "late") == ("True", "Ready", "2 address(es), 2 free")
    cluster.add(IPCLAIMPOOLS, late)
    await pools.refresh()
    await pools.reconcile("late")
    assert cluster.posted.events == [told, told]


# --- a pool set that changes ----------------------------------------------------------------
async def test_a_changed_pool_requeues_its_holders_itself_and_every_service_that_asks() -> None:
    """Widened: its holders are looked at again, and every Service that asks (one waiting
    for space may fit now); a pass that finds nothing changed queues nothing."""
    cluster = Cluster()
    holding(cluster, pool(P, CIDR_P))
    stopped_asking(cluster)
    cluster.add(SERVICES, auto("waiting"))
    cluster.add(SERVICES, service("plain"))
    pools, _ = await reconciler(cluster)

    assert await pools.refresh() == DONE
    assert cluster.queue.take() == set()

    cluster.add(IPCLAIMPOOLS, pool(P, "198.51.100.0/28"))
    assert await pools.refresh() == DONE
    assert cluster.queue.take() == {
        ServiceKey(WEB),
        ServiceKey(STOPPED),
        ServiceKey("default/waiting"),
        PoolKey(P),
    }


async def test_a_removed_pools_services_are_requeued() -> None:
    """Its holders, asking or not, decide what to do with IPs from a pool that is gone."""
    cluster = Cluster()
    holding(cluster, pool(P, CIDR_P))
    stopped_asking(cluster)
    pools, _ = await reconciler(cluster)
    cluster.remove(IPCLAIMPOOLS, P)

    await pools.refresh()

    assert cluster.queue.take() == {ServiceKey(WEB), ServiceKey(STOPPED), PoolKey(P)}


# --- a deleted pool --------------------------------------------------------------------------
async def test_a_deleted_pool_without_allocations_is_let_go() -> None:
    """Claims the allocator did not make (the scheduler's, for IPs set by hand) and
    per-node copies hold nothing: the finalizer is removed."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, protected(deleting(pool(P, CIDR_P))))
    cluster.add(IPCLAIMS, manual_claim(IP2, P, "default/hand"))
    cluster.add(IPCLAIMS, per_node_copy(IP1, P, "n1"))
    pools, _ = await reconciler(cluster)

    with structlog.testing.capture_logs() as logs:
        assert await pools.reconcile(P) == DONE

    assert cluster.stored(IPCLAIMPOOLS, P)["metadata"]["finalizers"] == []
    assert {"event": "pool.released", "log_level": "info", "pool": P} in logs
    assert cluster.posted.events == []


@pytest.mark.parametrize("purge", [False, True], ids=["default", "purge"])
async def test_a_deleted_pool_with_allocations_waits_for_them(purge: bool) -> None:
    """Deleting, with a PoolInUse Event, looked at again in 2 s; with purge its Services
    are sent to release their IPs, without it they keep them."""
    cluster = Cluster()
    holding(cluster, protected(deleting(pool(P, CIDR_P))))
    pools, _ = await reconciler(cluster, purge=purge)

    assert await pools.reconcile(P) == requeue_after(2.0)

    stored = cluster.stored(IPCLAIMPOOLS, P)
    assert stored["metadata"]["finalizers"] == [POOL_FINALIZER]
    assert ready_of(cluster, P) == (
        "False",
        "Deleting",
        "waiting for 1 allocation(s) to be released",
    )
    assert (stored["status"]["allocated"], stored["status"]["free"]) == (1, 0)
    if purge:
        message = "purging 1 allocation(s) (--purge-on-pool-delete)"
        assert cluster.queue.take() == {ServiceKey(WEB)}
    else:
        message = "deletion waits until its 1 allocation(s) are released"
        assert cluster.queue.take() == set()
    assert cluster.posted.events == [("IpClaimPool/p", "Warning", "PoolInUse", message)]


# --- claims whose Services are gone ----------------------------------------------------------
class DeletePreconditions(FakeApi):
    """Deletes honour their resourceVersion precondition, as the API server's do."""

    async def delete(
        self, ref: ResourceRef, name: str, namespace: str | None = None, **kw: Any
    ) -> Obj:
        current = self.objects.get((ref.plural, name))
        rv = kw.get("resource_version")
        if current is not None and rv and current["metadata"]["resourceVersion"] != rv:
            raise Conflict(409, "Conflict", "the object has been modified")
        return await super().delete(ref, name, namespace)


@pytest.mark.parametrize(
    ("holders", "listed"),
    [(["default/gone"], "default/gone"), ([], "none"), (["default/going"], "default/going")],
    ids=["service-gone", "no-service", "service-deleting"],
)
async def test_an_allocator_claim_whose_services_are_gone_is_released(
    holders: list[str], listed: str
) -> None:
    """Deleted (with its resourceVersion as precondition), forgotten by the book, the
    Services waiting for space woken, and a Normal Released Event on the claim."""
    cluster = Cluster(DeletePreconditions())
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    cluster.add(IPCLAIMS, claim(IP1, P, *holders))
    cluster.add(SERVICES, deleting(auto("going")))
    pools, term = await reconciler(cluster)
    term.waiting.add("default/waiting")
    before = released_orphans(P)

    assert await pools.reconcile_claim(CLAIM1) == DONE

    assert ("ipclaims", CLAIM1) not in cluster.api.objects
    assert term.book.claim(ip_address(IP1)) is None
    assert cluster.queue.take() == {ServiceKey("default/waiting")}
    message = f"released {IP1} (pool p): its Services are gone ({listed})"
    assert cluster.posted.events == [(f"IpClaim/{CLAIM1}", "Normal", "Released", message)]
    assert released_orphans(P) == before + 1


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "cache-lags"])
async def test_a_claim_with_a_live_service_is_kept_and_its_services_decide(cached: bool) -> None:
    """A Service the cache has not seen yet is asked of the API before anything goes; each
    holder, live or gone, is queued to decide whether it still wants the IP."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    cluster.add(IPCLAIMS, claim(IP1, P, "default/gone", WEB))
    cluster.add(SERVICES, auto("web"), seen=cached)
    pools, term = await reconciler(cluster)

    assert await pools.reconcile_claim(CLAIM1) == DONE

    assert ("ipclaims", CLAIM1) in cluster.api.objects
    assert cluster.queue.take() == {ServiceKey(WEB), ServiceKey("default/gone")}
    assert cluster.posted.events == []
    assert term.book.claim(ip_address(IP1)) is not None


@pytest.mark.parametrize("kind", ["manual", "per-node-copy", "unknown"])
async def test_claims_the_allocator_did_not_make_are_never_released(kind: str) -> None:
    """The scheduler's claim of an IP set by hand, a per-node copy, or a name not cached."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    name = CLAIM1
    if kind == "manual":
        cluster.add(IPCLAIMS, manual_claim(IP1, P, "default/gone"))
    elif kind == "per-node-copy":
        name = f"{CLAIM1}.n1"
        cluster.add(IPCLAIMS, per_node_copy(IP1, P, "n1"))
    pools, _ = await reconciler(cluster)
    written = cluster.api.rv

    assert await pools.reconcile_claim(name) == DONE

    assert cluster.api.rv == written
    assert cluster.queue.take() == set()


async def test_a_claim_changed_since_the_cache_saw_it_is_looked_at_again() -> None:
    """The delete's precondition fails (someone joined it meanwhile): nothing is released."""
    cluster = Cluster(DeletePreconditions())
    cluster.add(IPCLAIMPOOLS, pool(P, CIDR_P))
    cluster.add(IPCLAIMS, claim(IP1, P, "default/gone"))
    cluster.api.put(IPCLAIMS, claim(IP1, P, "default/gone", WEB))
    pools, term = await reconciler(cluster)

    assert await pools.reconcile_claim(CLAIM1) == requeue_after(0.2)

    assert cluster.stored(IPCLAIMS, CLAIM1)["spec"]["services"] == ["default/gone", WEB]
    assert term.book.claim(ip_address(IP1)) is not None
    assert cluster.posted.events == []
