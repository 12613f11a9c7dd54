"""What every eipctl resource type shares: the envelope (apiVersion, kind, metadata)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, cast

from eipctl.core.conditions import Condition
from eipctl.core.fields import ResourceError, as_mapping, as_str, get_mapping, join
from eipctl.core.naming import API_VERSION

MAX_COUNT: Final = 2**63 - 1
"""Largest count the API stores (int64): writers saturate ``free`` of big IPv6 pools here."""


def conditions_out(out: dict[str, Any], conditions: tuple[Condition, ...]) -> None:
    if conditions:
        out["conditions"] = [c.to_dict() for c in conditions]


@dataclass(frozen=True, kw_only=True)
class Resource:
    """Shared envelope: apiVersion/kind checks and metadata accessors."""

    KIND: ClassVar[str]
    PLURAL: ClassVar[str]

    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", copy.deepcopy(dict(self.metadata)))

    @property
    def name(self) -> str:
        return cast(str, self.metadata.get("name", ""))

    @property
    def labels(self) -> Mapping[str, str]:
        return cast(Mapping[str, str], self.metadata.get("labels") or {})

    @property
    def annotations(self) -> Mapping[str, str]:
        return cast(Mapping[str, str], self.metadata.get("annotations") or {})

    @property
    def resource_version(self) -> str | None:
        return cast(str | None, self.metadata.get("resourceVersion"))

    @property
    def generation(self) -> int | None:
        return cast(int | None, self.metadata.get("generation"))

    @classmethod
    def _envelope(
        cls, d: object, *, spec_required: bool = True
    ) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]:
        """Check apiVersion/kind (when present); return (metadata, spec, status)."""
        top = as_mapping(d, cls.KIND)
        for key, want in (("apiVersion", API_VERSION), ("kind", cls.KIND)):
            got = top.get(key)
            if got is not None and got != want:
                raise ResourceError(key, f"expected {want!r}, got {got!r}")
        metadata = get_mapping(top, "metadata", "") or {}
        for key in ("name", "resourceVersion"):
            if metadata.get(key) is not None:
                as_str(metadata[key], join("metadata", key))
        spec = get_mapping(top, "spec", "")
        if spec is None and spec_required:
            raise ResourceError("spec", "required")
        return metadata, spec or {}, get_mapping(top, "status", "") or {}

    def _to_dict(self, spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": self.KIND,
            "metadata": copy.deepcopy(dict(self.metadata)),
            "spec": spec,
            "status": status,
        }
