"""What the write path's helpers (strategies.py, crd_deletion.py) need of the Engine.

A Protocol, so that the modules the Engine calls on every write do not import the Engine back:
they read objects, delete them, and commit an update that has already passed admission.
"""

from __future__ import annotations

from typing import Any, Protocol

from .resources import Registry, ResourceType
from .selectors import Predicate

Obj = dict[str, Any]


class ObjectStore(Protocol):
    """The Engine as its helpers see it."""

    registry: Registry
    cleaning_crds: set[str]  # CRDs whose instances are being deleted now

    def get_object(self, rt: ResourceType, namespace: str, name: str) -> Obj: ...

    def list_objects(
        self, rt: ResourceType, namespace: str | None, predicate: Predicate | None
    ) -> list[Obj]: ...

    def delete_object(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        preconditions: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> Obj: ...

    def commit_update(
        self, rt: ResourceType, namespace: str, name: str, new: Obj, old: Obj
    ) -> Obj: ...
