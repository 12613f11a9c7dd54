"""Story: a Service with externalTrafficPolicy: Local is answered where its pod runs.

kube-proxy drops a Local Service's traffic on nodes without one of its endpoints, so its IP
must be on a node that has one. The bed has no kube-controller-manager: the story writes the
Service's EndpointSlice with real `kubectl apply`, as the EndpointSlice controller would when
the pod is scheduled, rescheduled and scaled to zero. The client connects every 20 ms; the
bed's nodes answer with their own name, so each answer says where the IP is.
"""

from __future__ import annotations

import time

from eipctl.sandbox.testbed import LocalBed, wait_for
from eipctl.sandbox.testbed.checks import (
    create_services,
    placement,
    wait_answered_by,
    wait_bound,
    wait_for_ips,
)

MAX_GAP = 0.1
"""No gap over 100 ms at 20 ms probing when the pod moves (make before break)."""
ANNOUNCED = 2.5
"""A new IP's own announcement rounds finish before it is moved (see the maintenance story)."""


def pod_on(bed: LocalBed, service: str, *nodes: str) -> None:
    """The pod(s) of `service` now run on `nodes` (its EndpointSlice, applied with kubectl)."""
    bed.kube.put_endpoints(service, list(nodes))


def scheduled(bed: LocalBed, ip: str) -> tuple[str, str]:
    claim = next(c for c in bed.kube.claims() if c["spec"]["ip"] == ip)
    for c in (claim.get("status") or {}).get("conditions") or []:
        if c["type"] == "Scheduled":
            return str(c["status"]), str(c["reason"])
    return "", ""


def test_a_local_services_ip_is_where_its_pod_is_and_follows_it_without_a_gap(
    local_bed: LocalBed,
) -> None:
    bed = local_bed
    create_services(bed, ["local-web"])
    (ip,) = wait_for_ips(bed, ["local-web"]).values()
    first = wait_bound(bed, [ip])[ip]
    pod = next(n for n in bed.node_names if n != first)  # the pod runs elsewhere
    pod_on(bed, "local-web", pod)
    listed = bed.kube.kubectl("get", "endpointslices")  # kubectl's own columns
    assert "local-web-pods" in listed and "IPv4" in listed and "10.244.0.7" in listed
    bed.kube.make_local("local-web")
    wait_for(lambda: placement(bed.kube.claims()).get(ip) == pod, 15, what="moved to the pod")
    wait_answered_by(bed, {ip: pod})
    time.sleep(ANNOUNCED)

    series = bed.client.start_probes([ip], interval=0.02)
    try:
        time.sleep(0.5)
        target = next(n for n in bed.node_names if n != pod)
        pod_on(bed, "local-web", target)  # the pod rescheduled
        wait_for(lambda: placement(bed.kube.claims()).get(ip) == target, 15, what="followed")
        wait_answered_by(bed, {ip: target})
        time.sleep(3.0)  # past the old holder's address lifetime
    finally:
        bed.client.stop_probes(series)
    gap = series.longest_outage_outside_stalls(ip, longer_than=MAX_GAP)
    print(
        f"{ip}: pod {pod} -> {target}: longest gap {gap * 1000:.0f} ms "
        f"({series.longest_outage(ip) * 1000:.0f} ms with the prober's stalls), "
        f"answered by {series.answerers(ip)}"
    )
    assert gap <= MAX_GAP
    assert series.answerers(ip) == [pod, target]
    events = bed.kube.kubectl("get", "events", "--field-selector", "involvedObject.name=local-web")
    assert f"no ready endpoint on {pod} any more" in events

    pod_on(bed, "local-web")  # scaled to zero: the claim waits, the Service keeps its IP
    wait_for(lambda: ip not in placement(bed.kube.claims()), 15, what="taken off")
    wait_for(lambda: scheduled(bed, ip) == ("False", "NoLocalEndpoint"), 10, what="condition")
    assert bed.kube.external_ips("local-web") == [ip]
    wait_for(lambda: not bed.managed_addresses()[target], 10, what="address removed")

    pod_on(bed, "local-web", first)  # scaled up again
    wait_for(lambda: placement(bed.kube.claims()).get(ip) == first, 15, what="placed again")
    wait_answered_by(bed, {ip: first})
