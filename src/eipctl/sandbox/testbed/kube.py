"""The cluster as a user sees it: Services, IpClaims, IpNodes, Leases, Events, and kubectl.

Synchronous methods over kubernetes_asyncio running on the bed's loop, so the same calls
work against the emulator and against a real cluster (`EIPCTL_E2E_KUBECONFIG`).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from eipctl.sandbox.boot import endpoint_slice
from eipctl.sandbox.testbed.loop import BackgroundLoop

GROUP, VERSION = "eipctl.io", "v1alpha1"
RETRIES = 5
NAMESPACE = "default"
CONFLICT_RETRIES = 10
LABELS = {"eipctl-e2e": "yes"}
"""What marks the objects the bed made (Services, pools): reset lists and deletes by it."""
Obj = dict[str, Any]


async def retrying(request: Any) -> Any:
    """Run `request()`; on a dropped connection (an API restart) try again, like clients do."""
    for attempt in range(RETRIES):
        try:
            return await request()
        except (TimeoutError, aiohttp.ClientConnectionError):
            if attempt == RETRIES - 1:
                raise
            await asyncio.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def kubectl_binary() -> str:
    return os.environ.get("KUBECTL") or shutil.which("kubectl") or "kubectl"


class Kube:
    def __init__(self, loop: BackgroundLoop, kubeconfig: Path) -> None:
        self.loop = loop
        self.kubeconfig = kubeconfig
        self.api = loop.run(config.new_client_from_config(config_file=str(kubeconfig)))
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.coordination = client.CoordinationV1Api(self.api)

    def close(self) -> None:
        self.loop.run(self.api.close())

    # ---- Services ----

    def create_service(
        self,
        name: str,
        annotation: str | None = "auto",
        *,
        pool: str | None = None,
        labels: dict[str, str] | None = None,
        namespace: str = NAMESPACE,
        ip_families: list[str] | None = None,
    ) -> Obj:
        """``ip_families``: the Service's spec.ipFamilies; without it the API server defaults
        the cluster's primary family (IPv4 here), as a real one does."""
        spec: dict[str, Any] = {"ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}
        if ip_families is not None:
            spec["ipFamilies"] = ip_families
            spec["ipFamilyPolicy"] = "SingleStack" if len(ip_families) == 1 else "RequireDualStack"
        annotations = {}
        if annotation is not None:
            annotations["external-ip"] = annotation
        if pool is not None:
            annotations["external-ip-pool"] = pool
        body = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "annotations": annotations,
                "labels": {**LABELS, **(labels or {})},
            },
            "spec": spec,
        }
        return self._raw(self.core.create_namespaced_service, namespace, body)

    def service(self, name: str, namespace: str = NAMESPACE) -> Obj | None:
        try:
            return self._raw(self.core.read_namespaced_service, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def external_ips(self, name: str, namespace: str = NAMESPACE) -> list[str]:
        svc = self.service(name, namespace) or {}
        return list((svc.get("spec") or {}).get("externalIPs") or [])

    def services(self, namespace: str = NAMESPACE) -> list[Obj]:
        out = self._raw(
            self.core.list_namespaced_service, namespace, label_selector="eipctl-e2e=yes"
        )
        return list(out["items"])

    def delete_service(self, name: str, namespace: str = NAMESPACE) -> None:
        try:
            self._raw(self.core.delete_namespaced_service, name, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def events_for(self, name: str, namespace: str = NAMESPACE) -> list[Obj]:
        out = self._raw(
            self.core.list_namespaced_event,
            namespace,
            field_selector=f"involvedObject.name={name}",
        )
        return [e for e in out["items"] if e.get("involvedObject", {}).get("name") == name]

    # ---- eipctl resources ----

    def claims(self) -> list[Obj]:
        out = self._custom(self.custom.list_cluster_custom_object, GROUP, VERSION, "ipclaims")
        return list(out["items"])

    def claim_for(self, ip: str) -> Obj | None:
        return next((c for c in self.claims() if c["spec"].get("ip") == ip), None)

    def delete_claim(self, name: str) -> None:
        try:
            self._custom(self.custom.delete_cluster_custom_object, GROUP, VERSION, "ipclaims", name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def ipnodes(self) -> list[Obj]:
        out = self._custom(self.custom.list_cluster_custom_object, GROUP, VERSION, "ipnodes")
        return list(out["items"])

    def heartbeats(self) -> dict[str, int]:
        """{node: its IpNode's heartbeat counter} (written at a controller's start and then
        every --heartbeat-interval, 10 s: for people, not for liveness)."""
        return {
            n["metadata"]["name"]: int((n.get("status") or {}).get("heartbeat") or 0)
            for n in self.ipnodes()
        }

    def live(self, nodes: list[str]) -> bool:
        """Whether the scheduler leader judges each of `nodes` live: its IpNode's Live
        condition is True (the node answers the liveness probes, docs/liveness.md)."""
        live = set()
        for n in self.ipnodes():
            conditions = (n.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Live" and c.get("status") == "True" for c in conditions):
                live.add(n["metadata"]["name"])
        return live >= set(nodes)

    def macs_published(self, nodes: list[str]) -> bool:
        """Whether every node's IpNode shows its link's MACs, which its controller publishes
        after a pass over the link (right after a start: after its start-up purge)."""
        published = {
            n["metadata"]["name"] for n in self.ipnodes() if (n.get("status") or {}).get("macs")
        }
        return published >= set(nodes)

    def pools(self) -> list[Obj]:
        out = self._custom(self.custom.list_cluster_custom_object, GROUP, VERSION, "ipclaimpools")
        return list(out["items"])

    def apply_pool(self, name: str, spec: Obj) -> Obj:
        body: Obj = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "IpClaimPool",
            "metadata": {"name": name, "labels": dict(LABELS)},
            "spec": spec,
        }
        pools = (GROUP, VERSION, "ipclaimpools")
        for _ in range(CONFLICT_RETRIES):
            try:
                old = self._custom(self.custom.get_cluster_custom_object, *pools, name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                return self._custom(self.custom.create_cluster_custom_object, *pools, body)
            if old.get("spec") == spec and (old["metadata"].get("labels") or {}) == LABELS:
                return old  # as wanted already: no write
            body["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            try:
                return self._custom(self.custom.replace_cluster_custom_object, *pools, name, body)
            except ApiException as exc:
                if exc.status != 409:
                    raise  # 409: the allocator wrote the pool's status meanwhile; read again
        raise RuntimeError(f"pool {name}: {CONFLICT_RETRIES} conflicts in a row")

    def lease_holder(self, name: str, namespace: str) -> str | None:
        try:
            lease = self._raw(self.coordination.read_namespaced_lease, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return (lease.get("spec") or {}).get("holderIdentity") or None

    def ensure_namespace(self, name: str) -> None:
        try:
            self._raw(self.core.create_namespace, {"metadata": {"name": name}})
        except ApiException as exc:
            if exc.status != 409:
                raise

    def create_node(self, name: str, labels: dict[str, str] | None = None) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}},
        }
        try:
            self._raw(self.core.create_node, body)
        except ApiException as exc:
            if exc.status != 409:
                raise

    def node_key_secrets(self, namespace: str) -> list[str]:
        """The names of the node-key Secrets (docs/liveness.md "Node keys")."""
        found = self._raw(self.core.list_namespaced_secret, namespace)
        return sorted(item["metadata"]["name"] for item in found.get("items", []))

    def delete_node_key_secrets(self, namespace: str) -> None:
        """What an operator does before rolling the controllers back under schedulers that
        know node keys (docs/operations.md, "Upgrade")."""
        for name in self.node_key_secrets(namespace):
            self._raw(self.core.delete_namespaced_secret, name, namespace)

    def delete_pod(self, name: str, namespace: str) -> None:
        self._raw(self.core.delete_namespaced_pod, name, namespace, grace_period_seconds=0)

    def put_endpoints(self, service: str, nodes: list[str], namespace: str = NAMESPACE) -> None:
        """The Service's EndpointSlice as the EndpointSlice controller writes it for one
        ready pod per node of `nodes` (none: scaled to zero), applied with kubectl. The bed
        runs no kube-controller-manager, so stories that need endpoints write them."""
        body = endpoint_slice(service, nodes, namespace)
        self.kubectl("apply", "-f", "-", stdin=json.dumps(body))

    def make_local(self, service: str, namespace: str = NAMESPACE) -> None:
        """`externalTrafficPolicy: Local` on a Service that has its external IP."""
        patch = '{"spec":{"externalTrafficPolicy":"Local"}}'
        self.kubectl("-n", namespace, "patch", "service", service, "-p", patch)

    # ---- kubectl, as a user would run it ----

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        proc = subprocess.run(
            [kubectl_binary(), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            input=stdin,
            text=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json"))

    def _raw(self, method: Any, *args: Any, **kwargs: Any) -> Obj:
        """Run a typed-API call and return the raw JSON answer (no model classes in tests)."""

        async def call() -> Obj:
            resp = await retrying(lambda: method(*args, _preload_content=False, **kwargs))
            try:
                body = dict(await resp.json())
            finally:
                resp.release()
            if resp.status >= 400:  # raw responses are not checked by the client
                raise ApiException(status=resp.status, reason=body.get("message", ""))
            return body

        return self.loop.run(call())

    def _custom(self, method: Any, *args: Any) -> Obj:
        return dict(self.loop.run(retrying(lambda: method(*args))))
