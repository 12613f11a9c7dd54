"""The verbs, one protocol each, that parts of eipctl ask of the API and of the writer.

A component states what it needs by combining them (`class NodeApi(Gets, Patches,
Protocol)`), so `KubeApi` and `SerializedWriter` satisfy every such need and a test fake
implements only those verbs. The signatures are `KubeApi`'s and `SerializedWriter`'s.
"""

from __future__ import annotations

from typing import Protocol

from eipctl.core.fields import Mutation
from eipctl.kube.client import Obj, ObjectList, ResourceRef

# -- the API (`KubeApi`) ---------------------------------------------------------------------


class Gets(Protocol):
    async def get(
        self,
        ref: ResourceRef,
        name: str,
        namespace: str | None = None,
        *,
        status: bool = False,
        resource_version: str | None = None,
    ) -> Obj: ...


class Lists(Protocol):
    async def list(
        self,
        ref: ResourceRef,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> ObjectList: ...


class Creates(Protocol):
    async def create(self, ref: ResourceRef, obj: Obj, namespace: str | None = None) -> Obj: ...


class Replaces(Protocol):
    async def replace(self, ref: ResourceRef, obj: Obj, *, status: bool = False) -> Obj: ...


class Patches(Protocol):
    async def patch(
        self,
        ref: ResourceRef,
        name: str,
        patch: Obj,
        namespace: str | None = None,
        *,
        status: bool = False,
    ) -> Obj: ...


class Deletes(Protocol):
    async def delete(
        self,
        ref: ResourceRef,
        name: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
    ) -> Obj: ...


# -- the serialized writer (`SerializedWriter`) ----------------------------------------------


class WritesCreate(Protocol):
    async def create(self, ref: ResourceRef, obj: Obj) -> Obj: ...


class WritesUpdate(Protocol):
    async def update(
        self,
        ref: ResourceRef,
        name: str,
        mutate: Mutation,
        *,
        namespace: str | None = None,
        status: bool = False,
    ) -> Obj: ...


class WritesStatus(Protocol):
    async def update_status(
        self, ref: ResourceRef, name: str, mutate: Mutation, *, namespace: str | None = None
    ) -> Obj: ...


class WritesPatch(Protocol):
    async def patch(
        self,
        ref: ResourceRef,
        name: str,
        patch: Obj,
        *,
        namespace: str | None = None,
        status: bool = False,
    ) -> Obj: ...
