"""meta.k8s.io/v1 Table responses, so `kubectl get` prints real columns.

CRDs get their additionalPrinterColumns (jsonPath subset: `.a.b`, `.a[0].b`, `.a[*].b`,
`\\.`-escaped keys, `['x.y']`, filters `[?(@.type=="Ready")]`); core kinds get the columns
kubectl users know.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .resources import ResourceType

Obj = dict[str, Any]
Column = dict[str, Any]
_FILTER = re.compile(
    r"""\[\?\(@\.([A-Za-z0-9_.]+)\s*(==|!=)\s*(?:"([^"]*)"|'([^']*)'|([^)\s]+))\s*\)\]"""
)
_TOKEN = re.compile(
    r"\[\s*'([^']*)'\s*\]|\[\s*\"([^\"]*)\"\s*\]|\[(\*|\d+)\]|\.((?:\\.|[^.\[\\])+)"
)


Token = str | int | tuple[str, bool, str]


def parse_json_path(path: str) -> list[Token]:
    """Tokens of a simple JSONPath: keys, list indexes, and "*" for every element."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    out: list[Token] = []
    pos = 0
    while pos < len(path):
        f = _FILTER.match(path, pos)
        if f is not None:
            key, op, dq, sq, bare = f.groups()
            want = dq if dq is not None else sq if sq is not None else bare
            out.append((key, op == "==", want))
            pos = f.end()
            continue
        m = _TOKEN.match(path, pos)
        if m is None:
            raise ValueError(f"unsupported jsonPath {path!r}")
        quoted, dquoted, index, key = m.groups()
        if index is not None:
            out.append("*" if index == "*" else int(index))
        else:
            text = quoted if quoted is not None else dquoted if dquoted is not None else key
            out.append(text.replace("\\.", "."))
        pos = m.end()
    return out


def _filter_match(item: Any, key: str, eq: bool, want: str) -> bool:
    cur = item
    for part in key.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    got = cur if isinstance(cur, str) else json.dumps(cur) if cur is not None else None
    return (got == want) == eq


def json_path_values(obj: Any, tokens: list[Token]) -> list[Any]:
    """Every value the path reaches (several through `[*]`)."""
    cur = [obj]
    for tok in tokens:
        nxt: list[Any] = []
        for v in cur:
            if isinstance(tok, tuple):
                if isinstance(v, list):
                    nxt.extend(x for x in v if _filter_match(x, *tok))
            elif tok == "*" and isinstance(v, list):
                nxt.extend(v)
            elif isinstance(tok, int):
                if isinstance(v, list) and tok < len(v):
                    nxt.append(v[tok])
            elif isinstance(v, dict) and tok in v:
                nxt.append(v[tok])
        cur = nxt
    return cur


def human_age(ts: str | None, now: datetime | None = None) -> str:
    """Age the way the API server's tables show it (apimachinery's `duration.HumanDuration`):
    45s, 3m20s, 5h, 12d, 3y20d; a time more than a second ahead of the server's clock (a
    writer whose clock runs ahead) is `<invalid>`."""
    if not ts:
        return "<unknown>"
    try:
        then = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return "<invalid>"
    secs = int(((now or datetime.now(UTC)) - then).total_seconds())  # toward zero, as Go
    if secs < -1:
        return "<invalid>"
    secs = max(secs, 0)
    mins, hours, days = secs // 60, secs // 3600, secs // 86400
    if secs < 120:
        return f"{secs}s"
    if mins < 10:
        return f"{mins}m{secs % 60}s" if secs % 60 else f"{mins}m"
    if hours < 3:
        return f"{mins}m"
    if hours < 8:
        return f"{hours}h{mins % 60}m" if mins % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    if days < 365 * 8:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"


def _col(
    name: str, typ: str = "string", fmt: str = "", desc: str = "", priority: int = 0
) -> Column:
    return {"name": name, "type": typ, "format": fmt, "description": desc, "priority": priority}


def _name(o: Obj) -> Any:
    return o["metadata"]["name"]


def _age(o: Obj) -> Any:
    return human_age(o["metadata"].get("creationTimestamp"))


def _svc_external(o: Obj) -> str:
    spec, status = o.get("spec") or {}, o.get("status") or {}
    ips = list(spec.get("externalIPs") or [])
    if spec.get("type") == "LoadBalancer":
        ing = [
            i.get("ip") or i.get("hostname")
            for i in (status.get("loadBalancer") or {}).get("ingress") or []
        ]
        ips = [i for i in ing if i] + [i for i in ips if i not in ing]
        return ",".join(ips) if ips else "<pending>"
    return ",".join(ips) if ips else "<none>"


def _svc_ports(o: Obj) -> str:
    parts = []
    for p in (o.get("spec") or {}).get("ports") or []:
        node = f":{p['nodePort']}" if p.get("nodePort") else ""
        parts.append(f"{p.get('port')}{node}/{p.get('protocol', 'TCP')}")
    return ",".join(parts) if parts else "<none>"


def _svc_selector(o: Obj) -> str:
    sel = (o.get("spec") or {}).get("selector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(sel.items())) or "<none>"


def _node_status(o: Obj) -> str:
    conds = (o.get("status") or {}).get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), None)
    state = (
        "Ready" if ready and ready.get("status") == "True" else "NotReady" if ready else "Unknown"
    )
    if (o.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    return state


def _pod_ready(o: Obj) -> str:
    specs = (o.get("spec") or {}).get("containers") or []
    stats = (o.get("status") or {}).get("containerStatuses") or []
    return f"{sum(1 for s in stats if s.get('ready'))}/{len(specs)}"


_CORE: dict[tuple[str, str], list[tuple[Column, Callable[[Obj], Any]]]] = {
    ("", "services"): [
        (_col("Type"), lambda o: (o.get("spec") or {}).get("type", "ClusterIP")),
        (_col("Cluster-IP"), lambda o: (o.get("spec") or {}).get("clusterIP") or "<none>"),
        (_col("External-IP"), _svc_external),
        (_col("Port(s)"), _svc_ports),
        (_col("Age", desc="CreationTimestamp"), _age),
        (_col("Selector", priority=1), _svc_selector),
    ],
    ("", "namespaces"): [(_col("Status"), lambda o: (o.get("status") or {}).get("phase", ""))],
    ("", "nodes"): [
        (_col("Status"), _node_status),
        (_col("Roles"), lambda o: "<none>"),
        (_col("Age", desc="CreationTimestamp"), _age),
        (
            _col("Version"),
            lambda o: ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", ""),
        ),
    ],
    ("", "pods"): [
        (_col("Ready"), _pod_ready),
        (_col("Status"), lambda o: (o.get("status") or {}).get("phase", "")),
        (_col("Restarts", "integer"), lambda o: 0),
    ],
    ("", "configmaps"): [(_col("Data", "integer"), lambda o: len(o.get("data") or {}))],
    ("", "secrets"): [
        (_col("Type"), lambda o: o.get("type", "Opaque")),
        (_col("Data", "integer"), lambda o: len(o.get("data") or {})),
    ],
    ("discovery.k8s.io", "endpointslices"): [
        (_col("AddressType"), lambda o: o.get("addressType", "")),
        (
            _col("Ports"),
            lambda o: ",".join(str(p.get("port", "")) for p in o.get("ports") or []) or "<unset>",
        ),
        (
            _col("Endpoints"),
            lambda o: (
                ",".join(
                    a for e in o.get("endpoints") or [] for a in (e.get("addresses") or [])[:1]
                )
                or "<unset>"
            ),
        ),
    ],
    ("coordination.k8s.io", "leases"): [
        (_col("Holder"), lambda o: (o.get("spec") or {}).get("holderIdentity", "")),
    ],
    ("", "events"): [
        (_col("Type"), lambda o: o.get("type", "")),
        (_col("Reason"), lambda o: o.get("reason", "")),
        (
            _col("Object"),
            lambda o: "{}/{}".format(
                ((o.get("involvedObject") or {}).get("kind") or "").lower(),
                (o.get("involvedObject") or {}).get("name", ""),
            ),
        ),
        (_col("Message"), lambda o: o.get("message", "")),
    ],
}


def go_json(value: Any) -> str:
    """`encoding/json`'s Marshal: compact, keys sorted, <>& escaped, UTF-8 kept. The server
    prints a list or map cell of a string column so (client-go's jsonpath PrintResults):
    `["192.0.2.7/32","192.0.2.8/32"]`."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _crd_cell(column: Column, o: Obj) -> Any:
    """A printer column's cell; no value (a missing key, a filter that matches nothing) is
    null, which kubectl prints as an empty cell."""
    try:
        values = json_path_values(o, parse_json_path(column.get("jsonPath", "")))
    except ValueError:
        return None
    values = [v for v in values if v is not None]
    if not values:
        return None
    if column.get("type") == "date" and isinstance(values[0], str):
        return human_age(values[0])
    if len(values) == 1 and not isinstance(values[0], dict | list):
        return values[0]
    return ",".join(v if isinstance(v, str) else go_json(v) for v in values)


def _crd_cell_fn(column: Column) -> Callable[[Obj], Any]:
    return lambda o: _crd_cell(column, o)


def columns_for(rt: ResourceType) -> list[tuple[Column, Callable[[Obj], Any]]]:
    """Column definitions and cell functions for a resource."""
    name_col = _col("Name", fmt="name", desc="Name must be unique within a namespace.")
    cols: list[tuple[Column, Callable[[Obj], Any]]] = [(name_col, _name)]
    if rt.from_crd and rt.printer_columns:
        for pc in rt.printer_columns:
            col = _col(
                pc["name"],
                pc.get("type", "string"),
                pc.get("format", ""),
                pc.get("description", ""),
                int(pc.get("priority", 0)),
            )
            cols.append((col, _crd_cell_fn(pc)))
        return cols
    cols.extend(_CORE.get(rt.key, []))
    if not any(c["name"] == "Age" for c, _ in cols):
        cols.append((_col("Age", desc="CreationTimestamp"), _age))
    return cols


def _row_object(o: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return o
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": o["metadata"],
    }


def to_table(rt: ResourceType, objs: list[Obj], list_meta: Obj, include: str = "Metadata") -> Obj:
    """A Table for these objects (one row each)."""
    cols = columns_for(rt)
    rows = []
    for o in objs:
        row: Obj = {"cells": [fn(o) for _, fn in cols]}
        ro = _row_object(o, include)
        if ro is not None:
            row["object"] = ro
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": [c for c, _ in cols],
        "rows": rows,
    }


def wants_table(accept: str) -> bool:
    """True when the client prefers a meta.k8s.io Table (first listed media type)."""
    first = accept.split(",", maxsplit=1)[0]
    return "as=Table" in first and "g=meta.k8s.io" in first
