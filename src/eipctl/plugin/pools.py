"""Pools being deleted: what their finalizer waits for, and the two ways out. Pure.

`kubectl delete ipp` of a pool in use returns and the pool stays, `Ready=False`/`Deleting`,
until the allocator's finalizer ``eipctl.io/pool-protection`` may go: when no Service holds
an IP of it any more. `status` and `why` say so, with the Services it waits for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eipctl.core.claims import spec_of
from eipctl.core.fields import labels_of, meta_of, name_of
from eipctl.core.naming import LABEL_POOL, POOL_FINALIZER, natural_key
from eipctl.plugin.snapshot import Snapshot

WAYS_OUT = (
    "release its IPs (remove the external-ip annotation from the Services holding them, or "
    "delete those Services), or run the allocator with --purge-on-pool-delete (it then takes "
    "the IPs back itself)"
)


@dataclass(frozen=True)
class DeletingPool:
    name: str
    ips: tuple[str, ...]
    services: tuple[str, ...]
    finalizer: bool

    @property
    def text(self) -> str:
        if not self.finalizer:
            return f"pool {self.name} is being deleted and waits for no finalizer of eipctl"
        if not self.ips:
            return (
                f"pool {self.name} is being deleted; no IP of it is held, so the allocator "
                f"removes its finalizer {POOL_FINALIZER} next (no allocator leading if it stays)"
            )
        held = ", ".join(self.services) or "no Service (claims only)"
        return (
            f"pool {self.name} is being deleted and waits (finalizer {POOL_FINALIZER}) until "
            f"its {len(self.ips)} IP(s) {', '.join(self.ips)} are released; held by {held}. "
            f"Two ways out: {WAYS_OUT}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.name,
            "finalizer": POOL_FINALIZER if self.finalizer else None,
            "waitsFor": list(self.ips),
            "services": list(self.services),
            "message": self.text,
        }


def deleting_pools(snapshot: Snapshot) -> list[DeletingPool]:
    out = []
    for pool in snapshot.pools:
        meta = meta_of(pool)
        if not meta.get("deletionTimestamp"):
            continue
        name = name_of(pool)
        claims = [c for c in snapshot.main_claims() if labels_of(c).get(LABEL_POOL) == name]
        services = {str(s) for c in claims for s in spec_of(c).get("services") or ()}
        out.append(
            DeletingPool(
                name=name,
                ips=tuple(sorted((str(spec_of(c).get("ip")) for c in claims), key=natural_key)),
                services=tuple(sorted(services, key=natural_key)),
                finalizer=POOL_FINALIZER in (meta.get("finalizers") or ()),
            )
        )
    return sorted(out, key=lambda p: natural_key(p.name))
