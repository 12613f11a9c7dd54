"""Story: "where is my IP?" `kubectl describe svc` answers, and says why when the IP moves.

The bed is `eipctl sandbox` with two nodes, as a user runs it (no root): the API emulator,
the real `eipctl allocator` and `eipctl scheduler` processes, and the real node controllers
on in-memory links, whose heartbeat stops when a node is killed.

1. The user creates a pool and a Service annotated ``external-ip: auto``.
2. `kubectl describe svc` shows ``IPPlaced  <ip> placed on node-X``.
3. The user kills node-X.
4. `kubectl describe svc` shows ``IPMoved  <ip> now on node-Y: node-X lost (heartbeat
   stopped)``, under the first Event.

Everything the test starts is stopped at the end, pass or fail: the sandbox gets SIGTERM (then
SIGKILL), any process still naming the test's own state directory is SIGKILLed (by pid), and
the sandbox stops by itself after ``--duration`` even if this test process dies (its children
carry PR_SET_PDEATHSIG). A wait that times out shows the sandbox's logs.
"""

from __future__ import annotations

import pytest
from story_sandbox import NODES, Sandbox, events_from, sandbox

pytestmark = pytest.mark.kubectl
__all__ = ["sandbox"]  # the fixture, used by name

STORY = """apiVersion: v1
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
metadata:
  name: web
  namespace: shop
  annotations: {external-ip: auto, external-ip-pool: shop}
spec:
  selector: {app: web}
  ports: [{port: 80}]
"""


def scheduler_events(description: str) -> list[tuple[str, str, str]]:
    return events_from(description, "eipctl-scheduler")


def test_describe_svc_says_where_the_ip_is_and_why_it_moved(sandbox: Sandbox) -> None:
    box = sandbox

    # 1. a pool and a Service that asks for an IP from it
    box.kubectl("apply", "-f", "-", stdin=STORY)
    ip = box.until(
        lambda: box.kubectl(
            "get", "svc", "-n", "shop", "web", "-o", "jsonpath={.spec.externalIPs[0]}"
        ),
        "the Service's external IP",
    )

    def describe() -> str:
        return box.kubectl("describe", "svc", "-n", "shop", "web")

    # 2. `kubectl describe svc` says where it is
    def placed() -> str | None:
        events = scheduler_events(describe())
        found = [m for t, r, m in events if (t, r) == ("Normal", "IPPlaced")]
        return found[0] if found else None

    message = box.until(placed, "IPPlaced in kubectl describe svc")
    first = message.removeprefix(f"{ip} placed on ")
    assert first in NODES, message
    node = box.kubectl(
        "get", "ipclaim", "-o", f"jsonpath={{.items[?(@.spec.ip=='{ip}')].spec.nodeName}}"
    )
    assert node == first

    # 3. the node holding it dies
    assert f"{first} killed" in box.kill_node(first)

    # 4. `kubectl describe svc` says where it went, and why
    second = next(n for n in NODES if n != first)
    moved = ("Normal", "IPMoved", f"{ip} now on {second}: {first} lost (no liveness reply)")

    def told_the_move() -> list[tuple[str, str, str]] | None:
        events = scheduler_events(describe())
        return events if moved in events else None

    events = box.until(told_the_move, "IPMoved in kubectl describe svc")
    assert events == [("Normal", "IPPlaced", f"{ip} placed on {first}"), moved]
    node = box.kubectl(
        "get", "ipclaim", "-o", f"jsonpath={{.items[?(@.spec.ip=='{ip}')].spec.nodeName}}"
    )
    assert node == second
