"""What the sandbox puts into a fresh API: the CRDs, a default pool, Nodes, demo Services.

The CRDs come from the installed package (``eipctl/crds/*.yaml``, which the wheel carries),
so the sandbox needs no checkout. Everything else is built here as plain objects and created
through the emulator's store, before any eipctl process starts.
"""

from __future__ import annotations

import ipaddress
from importlib import resources
from typing import Any

import structlog
import yaml

from eipctl.core.naming import ANNOTATION_EXTERNAL_IP, AUTO, GROUP, VERSION
from eipctl.core.node_keys import NODE_KEY_NAMESPACE
from kubemu import ApiServer

log = structlog.get_logger(__name__)

Obj = dict[str, Any]

CRD_GROUP = "apiextensions.k8s.io"
CRD_PLURAL = "customresourcedefinitions"
POOL_NAME = "sandbox"
DEMO_NAMESPACE = "default"
DEMO_PREFIX = "demo-"
NODE_PREFIX = "node-"
LINK = "eth0"


def check_pool_cidr(cidr: str) -> str:
    """The CIDR in canonical form; ValueError (with a readable message) when it is not one."""
    try:
        return str(ipaddress.ip_network(cidr, strict=True))
    except ValueError as exc:
        raise ValueError(f"--pool-cidr {cidr!r}: {exc}") from None


def crd_documents() -> list[Obj]:
    """The CustomResourceDefinitions shipped in the package, in file-name order."""
    folder = resources.files("eipctl") / "crds"
    docs: list[Obj] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith((".yaml", ".yml")):
            continue
        for doc in yaml.safe_load_all(entry.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                docs.append(doc)
    if not docs:
        raise RuntimeError(f"no CRDs found in {folder} (is the package installed whole?)")
    return docs


def node_names(count: int) -> list[str]:
    return [f"{NODE_PREFIX}{n}" for n in range(1, count + 1)]


def default_pool(cidr: str) -> Obj:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "IpClaimPool",
        "metadata": {"name": POOL_NAME},
        "spec": {"cidr": cidr, "autoAssign": True},
    }


def node_object(name: str) -> Obj:
    """A core v1 Node, so the controllers find labels to copy onto their IpNodes."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "eipctl.io/sandbox": "true"},
        },
    }


def demo_service(index: int) -> Obj:
    return _auto_service(f"{DEMO_PREFIX}{index}", {"type": "ClusterIP"})


def _auto_service(name: str, spec: Obj) -> Obj:
    """A Service annotated external-ip: auto, selecting pods labelled app=<name>."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": DEMO_NAMESPACE,
            "labels": {"app": name},
            "annotations": {ANNOTATION_EXTERNAL_IP: AUTO},
        },
        "spec": {
            **spec,
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
        },
    }


LOCAL_DEMO = "demo-local"
"""The Service `eipctl sandbox move-endpoint NODE` makes and moves: externalTrafficPolicy Local,
so its IP follows its one endpoint (docs/scheduler.md "Local Services")."""


def local_demo_service() -> Obj:
    return _auto_service(LOCAL_DEMO, {"type": "NodePort", "externalTrafficPolicy": "Local"})


def endpoint_slice(service: str, nodes: list[str], namespace: str = DEMO_NAMESPACE) -> Obj:
    """``service``'s EndpointSlice as the EndpointSlice controller writes it for one ready pod
    per node of ``nodes`` (the sandbox and the test bed run no kube-controller-manager)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-pods",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": [f"10.244.{i}.7"], "nodeName": n, "conditions": {"ready": True}}
            for i, n in enumerate(nodes)
        ],
    }


def move_local_endpoint(server: ApiServer, node: str) -> bool:
    """Put the Local demo Service's pod on ``node`` (making the Service first if there is
    none); True if the Service was made now."""
    store = server.store
    made = store.find("", "services", LOCAL_DEMO, DEMO_NAMESPACE) is None
    if made:
        store.create("", "services", local_demo_service(), DEMO_NAMESPACE)
    body = endpoint_slice(LOCAL_DEMO, [node])
    current = store.find("discovery.k8s.io", "endpointslices", f"{LOCAL_DEMO}-pods", DEMO_NAMESPACE)
    if current is None:
        store.create("discovery.k8s.io", "endpointslices", body, DEMO_NAMESPACE)
    else:
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        store.update("discovery.k8s.io", "endpointslices", body)
    log.info("sandbox.endpoint_moved", service=LOCAL_DEMO, node=node, service_made=made)
    return made


def install_crds(server: ApiServer) -> list[str]:
    """Create the package's CRDs in the emulator; returns their names."""
    names = []
    for doc in crd_documents():
        server.store.create(CRD_GROUP, CRD_PLURAL, doc)
        names.append(str(doc["metadata"]["name"]))
    return names


def seed(server: ApiServer, *, pool_cidr: str, nodes: list[str], services: int) -> None:
    """CRDs, the default pool, one Node per simulated node and the demo Services."""
    crds = install_crds(server)
    # where the simulated nodes hand their own liveness keys to the scheduler, as in deploy/
    server.store.create("", "namespaces", {"metadata": {"name": NODE_KEY_NAMESPACE}})
    server.store.create(GROUP, "ipclaimpools", default_pool(pool_cidr))
    for name in nodes:
        server.store.create("", "nodes", node_object(name))
    for index in range(1, services + 1):
        server.store.create("", "services", demo_service(index), DEMO_NAMESPACE)
    log.info(
        "sandbox.seeded", crds=crds, pool=POOL_NAME, cidr=pool_cidr, nodes=nodes, services=services
    )
