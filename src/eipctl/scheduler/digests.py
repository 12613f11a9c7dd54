"""What the leader's probes vouch for: per node, the digest of the claims labelled for it.

A controller that cannot reach the API keeps its addresses while the writing leader's probes
carry a digest equal to that of its own claims (docs/liveness.md, "Outages"). Both sides
hash the same set, the claims labelled `eipctl.io/node=<node>` (the selector of the
controller's watch), with `core.liveness_wire.placement_digest`. The sets are kept from the
claim informer's changes, so a probe round costs a dictionary look-up per node, and a digest
is computed again only after its node's set changed.
"""

from __future__ import annotations

from eipctl.core.fields import Obj, labels_of, name_of
from eipctl.core.liveness_wire import placement_digest
from eipctl.core.naming import LABEL_NODE


class NodeDigests:
    def __init__(self) -> None:
        self._claims: dict[str, set[str]] = {}
        self._digests: dict[str, bytes] = {}

    def observe(self, old: Obj | None, new: Obj | None) -> None:
        """A claim changed (the informer's change handler)."""
        before = labels_of(old).get(LABEL_NODE) if old is not None else None
        after = labels_of(new).get(LABEL_NODE) if new is not None else None
        if before == after and (old is None) == (new is None):
            return
        name = name_of(new or old or {})
        if before is not None:
            names = self._claims.get(before)
            if names is not None:
                names.discard(name)
                if not names:
                    del self._claims[before]
            self._digests.pop(before, None)
        if after is not None:
            self._claims.setdefault(after, set()).add(name)
            self._digests.pop(after, None)

    def digest(self, node: str) -> bytes:
        """The digest of the claims labelled for ``node`` (of no claim, if none)."""
        digest = self._digests.get(node)
        if digest is None:
            digest = placement_digest(self._claims.get(node, ()))
            self._digests[node] = digest
        return digest
