"""Service ``status.loadBalancer`` as a real apiserver (>= 1.35, where the LoadBalancerIPMode
and AllowServiceLBStatusOnNonLB gates are gone) defaults and validates it, so a controller
that writes ingress learns here what a cluster will store and refuse.

- Defaulting (pkg/apis/core/v1 SetDefaults_Service), on every Service write: on a Service of
  type LoadBalancer, an ingress entry with an ``ip`` and no ``ipMode`` gets ``ipMode: VIP``.
  A client that compares the ingress it wrote with the stored one must expect the field.
- Validation (pkg/apis/core/validation ValidateLoadBalancerStatus), on /status writes:
  ingress only on LoadBalancer Services; ``ipMode`` required with ``ip``, forbidden without
  it, one of VIP and Proxy.

Not emulated: the IP and hostname checks of ingress entries, the ``ports`` of an entry.
"""

from __future__ import annotations

import json
from typing import Any

Obj = dict[str, Any]
Cause = dict[str, str]
IP_MODES = ("Proxy", "VIP")  # sorted, as Kubernetes lists them in its message
_PATH = "status.loadBalancer.ingress"


def _ingress(svc: Obj) -> list[Any]:
    status = svc.get("status")
    balancer = status.get("loadBalancer") if isinstance(status, dict) else None
    ingress = balancer.get("ingress") if isinstance(balancer, dict) else None
    return ingress if isinstance(ingress, list) else []


def _is_load_balancer(svc: Obj) -> bool:
    spec = svc.get("spec")
    return isinstance(spec, dict) and spec.get("type") == "LoadBalancer"


def default_ip_mode(svc: Obj) -> None:
    """Set ``ipMode: VIP`` where Kubernetes would. Rebuilds the status instead of editing it:
    the dicts may be shared with the stored object and the watch history."""
    ingress = _ingress(svc)
    if not _is_load_balancer(svc) or not any(_wants_default(e) for e in ingress):
        return
    entries = [{**e, "ipMode": "VIP"} if _wants_default(e) else e for e in ingress]
    status = svc["status"]
    svc["status"] = {**status, "loadBalancer": {**status["loadBalancer"], "ingress": entries}}


def _wants_default(entry: Any) -> bool:
    return isinstance(entry, dict) and bool(entry.get("ip")) and entry.get("ipMode") is None


def load_balancer_causes(svc: Obj) -> list[Cause]:
    """What ValidateLoadBalancerStatus says about a Service's status (after defaulting)."""
    ingress = _ingress(svc)
    if ingress and not _is_load_balancer(svc):
        return [
            {
                "reason": "FieldValueForbidden",
                "field": _PATH,
                "message": "Forbidden: may only be used when `spec.type` is 'LoadBalancer'",
            }
        ]
    causes: list[Cause] = []
    for i, entry in enumerate(ingress):
        if not isinstance(entry, dict):
            continue
        field = f"{_PATH}[{i}].ipMode"
        mode, ip = entry.get("ipMode"), entry.get("ip")
        if mode is None:
            if ip:
                causes.append(
                    {
                        "reason": "FieldValueRequired",
                        "field": field,
                        "message": "Required value: must be specified when `ip` is set",
                    }
                )
        elif not ip:
            causes.append(
                {
                    "reason": "FieldValueForbidden",
                    "field": field,
                    "message": "Forbidden: may not be specified when `ip` is not set",
                }
            )
        elif mode not in IP_MODES:
            allowed = ", ".join(json.dumps(m) for m in IP_MODES)
            message = f"Unsupported value: {json.dumps(mode)}: supported values: {allowed}"
            causes.append({"reason": "FieldValueNotSupported", "field": field, "message": message})
    return causes
