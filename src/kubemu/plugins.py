"""Built-in admission plugins a cluster may enable (``--enable-admission-plugins``), as
switches of the emulator, so eipctl can be tried against the clusters that run them.

``DenyServiceExternalIPs`` (plugin/pkg/admission/network/denyserviceexternalips): a create or
update of a Service (not its /status) that adds a ``spec.externalIPs`` entry the old Service
did not have is refused with 403 Forbidden, ``services "<name>" is forbidden: Use of external
IPs is denied by admission control``. Removing entries, or keeping the old ones, is allowed.

The plugins judge every write, HTTP or direct store call alike, dry runs included (admission
runs before a dry run stops). Switch them with ``ApiServer(deny_service_external_ips=True)``,
``srv.plugins.deny_service_external_ips = True``, ``--deny-service-external-ips``, or
``POST /_emulator/admission {"deny_service_external_ips": true}``.
"""

from __future__ import annotations

from typing import Any

import structlog

from .errors import ApiError
from .resources import ResourceType

log = structlog.get_logger(__name__)
Obj = dict[str, Any]
_SERVICES = ("", "services")
_DENIED = "Use of external IPs is denied by admission control"


def _external_ips(svc: Obj | None) -> list[Any]:
    spec = (svc or {}).get("spec")
    ips = spec.get("externalIPs") if isinstance(spec, dict) else None
    return ips if isinstance(ips, list) else []


def adds_external_ips(new: Obj, old: Obj | None) -> bool:
    """The plugin's test: some entry of the new list is not in the old one (any entry, on a
    create)."""
    known = set(map(str, _external_ips(old))) if old is not None else set()
    return any(str(ip) not in known for ip in _external_ips(new))


class Plugins:
    """The switches, and the hook the engine calls before storing a create or update."""

    def __init__(self, *, deny_service_external_ips: bool = False) -> None:
        self.deny_service_external_ips = deny_service_external_ips
        self.denials: list[str] = []
        """The message of every request a plugin refused."""

    def admit(  # noqa: PLR0917 (the engine's AdmissionHook signature)
        self,
        operation: str,
        rt: ResourceType,
        obj: Obj,
        old: Obj | None,
        subresource: str | None,
        dry_run: bool = False,
    ) -> None:
        """Raise the Status an enabled plugin answers with."""
        if not self.deny_service_external_ips or rt.key != _SERVICES or subresource:
            return
        if operation not in ("CREATE", "UPDATE") or not adds_external_ips(obj, old):
            return
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or meta.get("generateName") or "Unknown")
        message = f'services "{name}" is forbidden: {_DENIED}'
        self.denials.append(message)
        log.info("admission.denied", plugin="DenyServiceExternalIPs", service=name)
        details = {"name": name, "group": "", "kind": "services"}
        raise ApiError(403, message, "Forbidden", details)

    def state(self) -> dict[str, Any]:
        """The switches, as the admin endpoint shows them."""
        return {"deny_service_external_ips": self.deny_service_external_ips}

    def configure(self, body: dict[str, Any]) -> None:
        """Apply an admin request: ``deny_service_external_ips`` (bool)."""
        if "deny_service_external_ips" in body:
            self.deny_service_external_ips = bool(body["deny_service_external_ips"])
