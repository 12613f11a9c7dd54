"""`kubectl eipctl status|why|nodes` (the console script ``kubectl-eipctl``; `eipctl` has the
same three subcommands): read the API, reason (`plugin.why`, `plugin.status`,
`plugin.nodes`), print.

Exit codes, for scripts: 0 done (and, for `why`, the Service has a working IP); 1 `why`: the
Service has no working IP (the output says why); 2 usage error (bad flag, no such Service);
3 the API could not be read (no kubeconfig, unreachable, refused).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TextIO

import yaml

from eipctl.core.fields import Obj, name_of
from eipctl.core.local_endpoints import SERVICE_NAME_LABEL
from eipctl.kube.client import (
    ENDPOINTSLICES,
    EVENTS,
    IPCLAIMPOOLS,
    IPCLAIMS,
    IPNODES,
    NAMESPACES,
    SERVICES,
    KubeApi,
    connect,
)
from eipctl.kube.errors import ApiError, KubeConfigError, NotFound, TransportError
from eipctl.plugin import render
from eipctl.plugin.nodes import NODE_HEADERS, node_rows
from eipctl.plugin.pools import deleting_pools
from eipctl.plugin.snapshot import Snapshot
from eipctl.plugin.status import IP_HEADERS, ip_rows
from eipctl.plugin.why import Explanation, explain
from eipctl.runtime.logsetup import configure_logging

EXIT_OK: Final = 0
EXIT_NO_IP: Final = 1
EXIT_USAGE: Final = 2
EXIT_API: Final = 3
COMMANDS: Final = ("status", "why", "nodes")
SERVICE_ACCOUNT_NAMESPACE: Final = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster)")
    parser.add_argument("-o", "--output", choices=render.FORMATS, default="text")
    parser.add_argument(
        "--request-timeout", type=float, default=10.0, help="seconds per API request"
    )


def add_commands(subparsers: Any) -> None:
    """The three subcommands, on `kubectl eipctl`'s parser or on `eipctl`'s."""
    status = subparsers.add_parser(
        "status", help="every external IP: Services, node, phase, since when, last move's cause"
    )
    why = subparsers.add_parser(
        "why", help="why a Service has no working external IP, in one paragraph"
    )
    why.add_argument("service", metavar="SERVICE", help="NAME, or NAMESPACE/NAME")
    why.add_argument("-n", "--namespace", help="the Service's namespace (default: the context's)")
    nodes = subparsers.add_parser(
        "nodes", help="every IpNode: live, last heard, fenced, eligible, IPs held"
    )
    for sub in (status, why, nodes):
        _common(sub)


def build_parser(prog: str = "kubectl eipctl") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Where eipctl's external IPs are, and why a Service has none. Exit codes: "
        "0 ok (why: the Service has an IP), 1 why: it has none, 2 usage error, "
        "3 API unreachable.",
    )
    add_commands(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``kubectl-eipctl`` console script."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    return run(args, sys.stdout)


def run(args: argparse.Namespace, stdout: TextIO) -> int:
    configure_logging(level="warning")  # logs on stderr, only when something is wrong
    namespace, name = "", ""
    if args.command == "why":
        namespace, _, name = str(args.service).rpartition("/")
        namespace = namespace or args.namespace or context_namespace(args.kubeconfig)
        if not name:
            return _usage("why: give a Service name")
    try:
        snapshot = asyncio.run(_read(args, namespace, name))
    except (KubeConfigError, TransportError, ApiError) as exc:
        sys.stderr.write(f"kubectl eipctl {args.command}: cannot read the API: {exc}\n")
        return EXIT_API
    now = datetime.now(UTC)
    if args.command == "status":
        return _status(snapshot, args.output, stdout, now)
    if args.command == "nodes":
        return _nodes(snapshot, args.output, stdout, now)
    found = explain(snapshot, namespace, name, now)
    if found is None:
        return _usage(f"why: no Service {name} in namespace {namespace}")
    return _why(found, args.output, stdout)


def _usage(message: str) -> int:
    sys.stderr.write(f"kubectl eipctl {message}\n")
    return EXIT_USAGE


def context_namespace(kubeconfig: str | None) -> str:
    """The namespace kubectl would use: the current context's, in-cluster the pod's, else
    ``default``."""
    paths = [kubeconfig] if kubeconfig else os.environ.get("KUBECONFIG", "").split(os.pathsep)
    paths = [p for p in paths if p] or [str(Path("~/.kube/config").expanduser())]
    for path in paths:
        try:
            config = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        current = config.get("current-context")
        for entry in config.get("contexts") or ():
            if isinstance(entry, dict) and entry.get("name") == current:
                return str((entry.get("context") or {}).get("namespace") or "default")
        return "default"
    try:
        return Path(SERVICE_ACCOUNT_NAMESPACE).read_text().strip() or "default"
    except OSError:
        return "default"


async def _read(args: argparse.Namespace, namespace: str, name: str) -> Snapshot:
    api = await connect(args.kubeconfig, request_timeout=args.request_timeout)
    async with api:
        return await _fetch(api, args.command, namespace, name)


async def _items(api: KubeApi, *a: Any, **kw: Any) -> list[Obj]:
    return (await api.list(*a, **kw)).items


async def _fetch(api: KubeApi, command: str, namespace: str, name: str) -> Snapshot:
    if command == "nodes":
        nodes, claims = await asyncio.gather(_items(api, IPNODES), _items(api, IPCLAIMS))
        return Snapshot(nodes=nodes, claims=claims)
    claims, pools, nodes = await asyncio.gather(
        _items(api, IPCLAIMS), _items(api, IPCLAIMPOOLS), _items(api, IPNODES)
    )
    if command == "status":  # claims' Events are in default (they are cluster-scoped)
        events = await _items(api, EVENTS, "default")
        return Snapshot(claims=claims, pools=pools, nodes=nodes, events=events)
    services, service_events, claim_events = await asyncio.gather(
        _items(api, SERVICES), _items(api, EVENTS, namespace), _items(api, EVENTS, "default")
    )
    try:
        ns_obj = await api.get(NAMESPACES, namespace)
        labels = dict((ns_obj.get("metadata") or {}).get("labels") or {})
    except NotFound:
        labels = {}
    slices: list[Obj] = []
    if any(name_of(s) == name and (s.get("metadata") or {}).get("namespace") == namespace
           for s in services):  # fmt: skip
        slices = await _items(
            api, ENDPOINTSLICES, namespace, label_selector=f"{SERVICE_NAME_LABEL}={name}"
        )
    by_name = {
        (name_of(e), e.get("metadata", {}).get("namespace")): e
        for e in [*claim_events, *service_events]
    }
    return Snapshot(
        services=services,
        claims=claims,
        pools=pools,
        nodes=nodes,
        events=list(by_name.values()),
        slices=slices,
        namespace_labels={namespace: labels},
    )


def _status(snapshot: Snapshot, fmt: str, out: TextIO, now: datetime) -> int:
    rows = ip_rows(snapshot)
    pools = deleting_pools(snapshot)
    if fmt != "text":
        data = {"ips": [r.to_dict() for r in rows], "deletingPools": [p.to_dict() for p in pools]}
        render.structured(out, data, fmt)
        return EXIT_OK
    if rows:
        render.table(out, IP_HEADERS, [r.cells(now) for r in rows])
    else:
        out.write("No external IP is claimed.\n")
    for pool in pools:
        out.write("\n")
        render.paragraph(out, pool.text)
    return EXIT_OK


def _nodes(snapshot: Snapshot, fmt: str, out: TextIO, now: datetime) -> int:
    rows = node_rows(snapshot)
    if fmt != "text":
        render.structured(out, {"nodes": [r.to_dict() for r in rows]}, fmt)
    elif rows:
        render.table(out, NODE_HEADERS, [r.cells(now) for r in rows])
    else:
        out.write("No IpNode: no eipctl controller has started.\n")
    return EXIT_OK


def _why(found: Explanation, fmt: str, out: TextIO) -> int:
    code = EXIT_OK if found.has_ip else EXIT_NO_IP
    if fmt != "text":
        render.structured(out, found.to_dict(), fmt)
        return code
    head = "has an IP" if found.has_ip else f"no IP ({found.cause})"
    out.write(f"Service {found.service}: {head}\n")
    reason = found.reason.rstrip(".")
    render.paragraph(out, reason[:1].upper() + reason[1:] + ".", indent="  ")
    if found.recorded:
        render.paragraph(out, f"Last recorded: {found.recorded}", indent="  ")
    for note in found.notes:
        if note not in found.reason:
            render.paragraph(out, note, indent="  ")
    return code
