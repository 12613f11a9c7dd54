"""core/sharing.py: when two Services may share one IP, each clause of the rule on its own
(docs/testing.md, "The guard operators")."""

from __future__ import annotations

from eipctl.core.allocation_inputs import ServiceInfo
from eipctl.core.sharing import clash, first_clash


def service(name: str, port: int, *, local: bool = False, app: str = "web") -> ServiceInfo:
    return ServiceInfo(
        key=f"default/{name}",
        namespace="default",
        ports=frozenset({("TCP", port)}),
        local_traffic=local,
        selector=(("app", app),),
    )


def test_cluster_policy_services_share_whatever_pods_they_select() -> None:
    """Different selectors matter only under externalTrafficPolicy Local: with Cluster,
    any node forwards to any endpoint."""
    assert clash(service("web", 80, app="web"), service("api", 443, app="api")) is None


def test_local_policy_on_either_side_needs_the_same_selector() -> None:
    cluster, local = service("web", 80, app="web"), service("api", 443, local=True, app="api")
    assert clash(cluster, local) is not None
    assert clash(local, cluster) is not None
    assert clash(cluster, service("api", 443, local=True, app="web")) is None


def test_a_service_never_clashes_with_itself_among_the_holders() -> None:
    """Re-planned while it holds the IP (its own entry among the holders, maybe with the
    ports it had before an edit), a Service is judged against the others only."""
    web = service("web", 80)
    assert first_clash(web, [web]) is None
    assert first_clash(service("web", 443), [web, service("api", 80)]) is None
    assert first_clash(service("web", 80), [web, service("api", 80)]) is not None
