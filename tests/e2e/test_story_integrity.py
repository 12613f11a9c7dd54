"""Story: one IP per Service unless it can really be shared, told through kubectl.

The bed is `eipctl sandbox` as a user runs it (real allocator and scheduler processes, the
API emulator, kubectl). One pool, ``shop`` (198.51.100.0/28, allowManual false), which the
Services name (the sandbox has a demo pool of its own). In order:

1. A Service sets 198.51.100.1 by hand in ``spec.externalIPs``; the scheduler refuses to
   claim it (allowManual false) and says so on the Service.
2. ``web`` (TCP/80) and ``api`` (TCP/443), sharing key ``shop``, arrive in one
   ``kubectl apply``: they get one IP, and it is not the hand-set one.
3. ``admin`` (TCP/8443, same key) comes later and joins that IP.
4. ``dup`` (TCP/80, same key) would clash with ``web``: it gets an IP of its own, and
   ``kubectl describe`` says why.
5. ``wants-hand`` asks for 198.51.100.1 literally: it waits, and the Event names the
   Service that set it by hand.
6. A LoadBalancer of class ``eipctl.io/external-ip`` is served without the annotation, in
   ``status.loadBalancer.ingress`` only; one of another class is never touched, even
   annotated.
"""

from __future__ import annotations

import json
import time

import pytest
from story_sandbox import Sandbox, events_from, sandbox

pytestmark = pytest.mark.kubectl
__all__ = ["sandbox"]  # the fixture, used by name

HAND_SET = "198.51.100.1"

POOL = """
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: eipctl.io/v1alpha1
kind: IpClaimPool
metadata: {name: shop}
spec: {cidr: 198.51.100.0/28}
---
apiVersion: v1
kind: Service
metadata: {name: hand, namespace: shop}
spec:
  selector: {app: hand}
  ports: [{port: 80}]
  externalIPs: [198.51.100.1]
"""


def shared(name: str, port: int) -> str:
    return f"""
apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: shop
  annotations: {{external-ip: auto, external-ip-pool: shop, external-ip-sharing-key: shop}}
spec:
  selector: {{app: {name}}}
  ports: [{{port: {port}}}]
"""


LITERAL = """
apiVersion: v1
kind: Service
metadata:
  name: wants-hand
  namespace: shop
  annotations: {external-ip: 198.51.100.1}
spec:
  selector: {app: x}
  ports: [{port: 9000}]
"""

LOAD_BALANCERS = """
apiVersion: v1
kind: Service
metadata: {name: classed, namespace: shop}
spec:
  type: LoadBalancer
  loadBalancerClass: eipctl.io/external-ip
  selector: {app: classed}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata:
  name: other-class
  namespace: shop
  annotations: {external-ip: auto}
spec:
  type: LoadBalancer
  loadBalancerClass: example.com/other
  selector: {app: other}
  ports: [{port: 80}]
"""


def service(box: Sandbox, name: str) -> dict:  # type: ignore[type-arg]
    return json.loads(box.kubectl("get", "svc", "-n", "shop", name, "-o", "json"))  # type: ignore[no-any-return]


def ips(box: Sandbox, name: str) -> list[str]:
    svc = service(box, name)
    ingress = (svc.get("status", {}).get("loadBalancer") or {}).get("ingress") or []
    return [*(svc["spec"].get("externalIPs") or []), *(e["ip"] for e in ingress)]


def allocated(box: Sandbox, name: str) -> list[str]:
    """The IPs the allocator gave the Service (its record on the Service)."""
    annotations = service(box, name)["metadata"].get("annotations") or {}
    text = annotations.get("eipctl.io/allocated-ips", "")
    return [ip for ip in text.split(",") if ip]


def allocator_events(box: Sandbox, name: str) -> list[tuple[str, str, str]]:
    return events_from(box.kubectl("describe", "svc", "-n", "shop", name), "eipctl-allocator")


def test_one_ip_per_service_unless_it_can_really_be_shared(sandbox: Sandbox) -> None:
    box = sandbox

    # 1. an IP set by hand, refused by the scheduler (allowManual false)
    box.kubectl("apply", "-f", "-", stdin=POOL)
    refused = box.until(
        lambda: [
            e
            for e in events_from(
                box.kubectl("describe", "svc", "-n", "shop", "hand"), "eipctl-scheduler"
            )
            if e[1] == "ExternalIPRefused"
        ],
        "the scheduler's refusal on the hand-set Service",
    )
    assert HAND_SET in refused[0][2]
    time.sleep(1.0)  # the allocator's watch has seen it too (same stream, same moment)

    # 2. two Services of one key in one apply: one IP, and not the hand-set one
    box.kubectl("apply", "-f", "-", stdin=shared("web", 80) + "---" + shared("api", 443))
    web = box.until(lambda: allocated(box, "web"), "web's IP")
    api = box.until(lambda: allocated(box, "api"), "api's IP")
    assert web == api, f"one key, two IPs: web {web}, api {api}"
    assert web != [HAND_SET]

    # 3. a third of the key, later, joins it
    box.kubectl("apply", "-f", "-", stdin=shared("admin", 8443))
    assert box.until(lambda: allocated(box, "admin"), "admin's IP") == web

    # 4. same key, same port as web: an IP of its own, and the reason
    box.kubectl("apply", "-f", "-", stdin=shared("dup", 80))
    dup = box.until(lambda: allocated(box, "dup"), "dup's IP")
    assert dup != web and dup != [HAND_SET]
    refusal = box.until(
        lambda: [e for e in allocator_events(box, "dup") if e[1] == "SharingRefused"],
        "SharingRefused on dup",
    )
    assert "TCP/80" in refusal[0][2] and "shop/web" in refusal[0][2], refusal

    # 5. asking for the hand-set IP literally waits, naming who set it
    box.kubectl("apply", "-f", "-", stdin=LITERAL)
    waiting = box.until(
        lambda: [e for e in allocator_events(box, "wants-hand") if e[1] == "IPInUse"],
        "IPInUse on wants-hand",
    )
    assert waiting[0][0] == "Warning" and "shop/hand" in waiting[0][2], waiting
    assert allocated(box, "wants-hand") == []
    assert ips(box, "hand") == [HAND_SET]  # nothing taken from the hand-set Service

    # 6. LoadBalancer classes: eipctl's is served (ingress only), another's never touched
    box.kubectl("apply", "-f", "-", stdin=LOAD_BALANCERS)
    classed = box.until(lambda: allocated(box, "classed"), "the classed LoadBalancer's IP")
    svc = service(box, "classed")
    assert [e["ip"] for e in svc["status"]["loadBalancer"]["ingress"]] == classed
    assert not svc["spec"].get("externalIPs"), "a LoadBalancer's IP belongs in ingress only"
    time.sleep(1.0)  # the other class was in the same apply: the allocator has seen it
    other = service(box, "other-class")
    assert ips(box, "other-class") == [] and not allocator_events(box, "other-class")
    assert "eipctl.io/allocated-ips" not in (other["metadata"].get("annotations") or {})

    # every IP the allocator gave is on one Service, or shared by the one key
    holders: dict[str, set[str]] = {}
    for name in ("web", "api", "admin", "dup", "classed"):
        for ip in allocated(box, name):
            holders.setdefault(ip, set()).add(name)
    assert holders == {web[0]: {"web", "api", "admin"}, dup[0]: {"dup"}, classed[0]: {"classed"}}
