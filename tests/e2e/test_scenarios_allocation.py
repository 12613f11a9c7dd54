"""Stories of allocation: a Service asks for an external IP, gets one that answers, gives it
back when it goes, waits politely when the pool is empty, and IPv6 works the same way.

On a real cluster (`EIPCTL_E2E_KUBECONFIG`) the API-level half of each story runs; the
"answers from the client" half needs the local bed.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from eipctl.sandbox.testbed import POOL_TINY, POOL_V6, TINY_LABEL, V6_LABEL, wait_for
from eipctl.sandbox.testbed.checks import wait_bound, wait_for_ips, wait_moved_off


def test_a_service_annotated_auto_gets_an_ip_that_answers(bed: Any) -> None:
    bed.kube.create_service("web")

    ip = bed.wait_for_ip("web")
    assert ipaddress.ip_address(ip) in ipaddress.ip_network("203.0.113.0/24")
    node = wait_bound(bed, [ip])[ip]
    assert node in bed.live_nodes

    # what `kubectl get ipclaims` shows the user
    table = bed.kube.kubectl("get", "ipclaims")
    row = next(
        line.split() for line in table.splitlines() if line.split()[:1] == [ip.replace(".", "-")]
    )
    assert row[1:4] == [ip, node, "Bound"], table
    assert bed.kube.kubectl("get", "service", "web", "-o", "jsonpath={.spec.externalIPs[0]}") == ip

    if bed.local:
        assert bed.wait_answering(ip, by=node) == node
        assert bed.holders(ip) == [node]


def test_a_deleted_services_ip_stops_answering_and_returns_to_the_pool(bed: Any) -> None:
    bed.kube.create_service("short-lived")
    ip = bed.wait_for_ip("short-lived")
    node = wait_bound(bed, [ip])[ip]
    if bed.local:
        bed.wait_answering(ip, by=node)

    bed.kube.delete_service("short-lived")

    wait_for(lambda: bed.kube.claim_for(ip) is None, 15, what=f"the claim of {ip} released")
    if bed.local:
        wait_for(lambda: not bed.holders(ip), 10, what=f"{ip} removed from {node}")
        wait_for(
            lambda: bed.client.ask(ip, timeout=0.3) is None, 10, what=f"{ip} to stop answering"
        )
    # back in the pool: the lowest free address goes to the next Service
    bed.kube.create_service("next-in-line")
    assert bed.wait_for_ip("next-in-line") == ip


def test_an_exhausted_pool_makes_the_next_service_wait_with_an_event_until_an_ip_frees(
    bed: Any,
) -> None:
    tiny = {"pool": POOL_TINY, "labels": TINY_LABEL}
    for name in ("first", "second"):
        bed.kube.create_service(name, **tiny)
    taken = wait_for_ips(bed, ["first", "second"])

    bed.kube.create_service("third", **tiny)

    event = wait_for(
        lambda: [e for e in bed.kube.events_for("third") if e.get("reason") == "PoolExhausted"],
        15,
        what="a PoolExhausted Event on the waiting Service",
    )[0]
    assert event["type"] == "Warning"
    assert bed.kube.external_ips("third") == []

    bed.kube.delete_service("first")

    assert bed.wait_for_ip("third", timeout=15) == taken["first"]
    node = wait_bound(bed, [taken["first"]])[taken["first"]]
    if bed.local:
        bed.wait_answering(taken["first"], by=node)


def test_an_ipv6_service_answers_over_ipv6_and_moves_with_an_unsolicited_na(
    local_bed: Any,
) -> None:
    bed = local_bed
    # an IPv6 Service (the server defaults ipFamilies to the cluster's IPv4 otherwise, and the
    # allocator follows ipFamilies: kube-proxy serves an external IP only in the Service's
    # families)
    bed.kube.create_service("web6", pool=POOL_V6, labels=V6_LABEL, ip_families=["IPv6"])
    ip = bed.wait_for_ip("web6")
    assert ipaddress.ip_address(ip) in ipaddress.ip_network("2001:db8:f::/64")
    node = wait_bound(bed, [ip])[ip]
    bed.wait_answering(ip, by=node)
    assert bed.network.client_neighbour(ip)[0] == bed.mac_of(node)

    bed.kill_node(node)

    new = wait_moved_off(bed, [ip], node)[ip]
    bed.wait_answering(ip, by=new, timeout=10)
    # the client's entry moved because the new node announced it: with the client's neighbour
    # timers stretched to minutes, ordinary re-resolution cannot have done it
    assert bed.network.client_neighbour(ip)[0] == bed.mac_of(new)
