"""Preconditions and dry runs on writes, as a real apiserver applies them.

- A PUT without metadata.resourceVersion is refused (422) for kinds whose strategy says
  AllowUnconditionalUpdate() false: Leases, custom resources, CRDs, admission policies; core
  kinds take it (ConfigMap). So two leader candidates cannot overwrite each other blindly.
- metadata.uid in a PUT body is a precondition (409 Conflict, etcd's wording); a patch may not
  change it (422, immutable).
- dryRun (query, or DeleteOptions in a DELETE's body) changes nothing, deletecollection
  included; a dryRun value other than "All" is a 422 on the options kind.
"""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import pytest
from widget_crd import GROUP, PLURAL, VERSION

from kubemu import ApiServer
from kubemu.errors import ApiError

LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
WIDGETS = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


async def send(srv: ApiServer, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession(srv.url) as http,
        http.request(method, path, json=body) as r,
    ):
        return r.status, await r.json()


def lease(name: str, holder: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


def without_rv(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].pop("resourceVersion", None)
    return out


async def test_lease_put_without_resource_version_is_invalid(apiserver: ApiServer) -> None:
    code, created = await send(apiserver, "POST", LEASES, lease("leader", "a"))
    assert code == 201
    blind = without_rv(created)
    blind["spec"]["holderIdentity"] = "b"
    code, status = await send(apiserver, "PUT", f"{LEASES}/leader", blind)
    assert code == 422
    assert status["reason"] == "Invalid"
    assert status["message"] == (
        'leases.coordination.k8s.io "leader" is invalid: metadata.resourceVersion: '
        "Invalid value: 0x0: must be specified for an update"
    )
    assert status["details"]["kind"] == "leases"
    assert status["details"]["causes"][0]["field"] == "metadata.resourceVersion"
    assert apiserver.store.get("coordination.k8s.io", "leases", "leader", "default")["spec"][
        "holderIdentity"
    ] == ("a")


async def test_two_candidates_cannot_both_take_the_lease(apiserver: ApiServer) -> None:
    _, seen = await send(apiserver, "POST", LEASES, lease("leader", ""))
    first, second = copy.deepcopy(seen), copy.deepcopy(seen)
    first["spec"]["holderIdentity"], second["spec"]["holderIdentity"] = "a", "b"
    code, _ = await send(apiserver, "PUT", f"{LEASES}/leader", first)
    assert code == 200
    code, status = await send(apiserver, "PUT", f"{LEASES}/leader", second)
    assert code == 409 and status["reason"] == "Conflict"
    assert "the object has been modified" in status["message"]


async def test_configmap_put_without_resource_version_is_unconditional(
    apiserver: ApiServer,
) -> None:
    cm = {"metadata": {"name": "c"}, "data": {"k": "1"}}
    _, created = await send(apiserver, "POST", CONFIGMAPS, cm)
    blind = without_rv(created)
    blind["data"] = {"k": "2"}
    code, out = await send(apiserver, "PUT", f"{CONFIGMAPS}/c", blind)
    assert code == 200
    assert out["data"] == {"k": "2"}
    assert int(out["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_custom_resource_and_crd_need_a_resource_version(widgets: ApiServer) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Widget"}
    _, w = await send(
        widgets, "POST", WIDGETS, {**body, "metadata": {"name": "w"}, "spec": {"size": 1}}
    )
    code, status = await send(widgets, "PUT", f"{WIDGETS}/w", without_rv(w))
    assert code == 422
    assert status["message"].startswith(
        f'{PLURAL}.{GROUP} "w" is invalid: metadata.resourceVersion'
    )
    crd = widgets.store.get(
        "apiextensions.k8s.io", "customresourcedefinitions", f"{PLURAL}.{GROUP}"
    )
    code, status = await send(widgets, "PUT", f"{CRDS}/{PLURAL}.{GROUP}", without_rv(crd))
    assert code == 422
    assert "customresourcedefinitions.apiextensions.k8s.io" in status["message"]


def test_store_update_of_a_lease_needs_a_resource_version(apiserver: ApiServer) -> None:
    created = apiserver.store.create("coordination.k8s.io", "leases", lease("l", "a"), "default")
    with pytest.raises(ApiError) as err:
        apiserver.store.update("coordination.k8s.io", "leases", without_rv(created))
    assert err.value.code == 422


async def test_uid_in_a_put_body_is_a_precondition(apiserver: ApiServer) -> None:
    _, created = await send(apiserver, "POST", CONFIGMAPS, {"metadata": {"name": "c"}})
    stale = copy.deepcopy(created)
    stale["metadata"]["uid"] = "0f5e1e6c-0000-4000-8000-000000000000"
    code, status = await send(apiserver, "PUT", f"{CONFIGMAPS}/c", stale)
    assert code == 409
    assert status["reason"] == "Conflict"
    assert status["message"].startswith('Operation cannot be fulfilled on configmaps "c": ')
    assert status["message"].endswith(
        "Precondition failed: UID in precondition: 0f5e1e6c-0000-4000-8000-000000000000, "
        f"UID in object meta: {created['metadata']['uid']}"
    )


async def test_uid_precondition_comes_before_the_resource_version(apiserver: ApiServer) -> None:
    """A Lease recreated under the same name: an old copy without resourceVersion still
    names the old uid, and that is what the server reports."""
    _, created = await send(apiserver, "POST", LEASES, lease("leader", "a"))
    old = without_rv(created)
    old["metadata"]["uid"] = "11111111-2222-4333-8444-555555555555"
    code, status = await send(apiserver, "PUT", f"{LEASES}/leader", old)
    assert code == 409
    assert "UID in precondition: 11111111-2222-4333-8444-555555555555" in status["message"]


async def test_matching_uid_is_accepted(apiserver: ApiServer) -> None:
    _, created = await send(apiserver, "POST", LEASES, lease("leader", "a"))
    created["spec"]["holderIdentity"] = "b"
    code, out = await send(apiserver, "PUT", f"{LEASES}/leader", created)
    assert code == 200
    assert out["metadata"]["uid"] == created["metadata"]["uid"]


async def test_patch_may_not_change_the_uid(apiserver: ApiServer) -> None:
    await send(apiserver, "POST", CONFIGMAPS, {"metadata": {"name": "c"}})
    async with (
        aiohttp.ClientSession(apiserver.url) as http,
        http.patch(
            f"{CONFIGMAPS}/c",
            json={"metadata": {"uid": "abc"}},
            headers={"Content-Type": "application/merge-patch+json"},
        ) as r,
    ):
        assert r.status == 422
        status = await r.json()
    assert status["details"]["causes"][0]["field"] == "metadata.uid"


# ---- dryRun -----------------------------------------------------------------------------


async def _configmaps(srv: ApiServer, *names: str, finalizers: bool = False) -> None:
    for name in names:
        meta: dict[str, Any] = {"name": name}
        if finalizers:
            meta["finalizers"] = ["example.com/keep"]
        srv.store.create("", "configmaps", {"metadata": meta}, "default")


def _names(srv: ApiServer) -> list[str]:
    return [o["metadata"]["name"] for o in srv.store.list("", "configmaps", "default")]


async def test_delete_with_dry_run_in_the_body_deletes_nothing(apiserver: ApiServer) -> None:
    await _configmaps(apiserver, "a")
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}
    code, out = await send(apiserver, "DELETE", f"{CONFIGMAPS}/a", body)
    assert code == 200 and out["metadata"]["name"] == "a"
    assert _names(apiserver) == ["a"]


async def test_delete_with_dry_run_in_the_query_deletes_nothing(apiserver: ApiServer) -> None:
    await _configmaps(apiserver, "a")
    code, _ = await send(apiserver, "DELETE", f"{CONFIGMAPS}/a?dryRun=All")
    assert code == 200
    assert _names(apiserver) == ["a"]


async def test_dry_run_delete_of_a_finalized_object_shows_the_deletion(
    apiserver: ApiServer,
) -> None:
    await _configmaps(apiserver, "a", finalizers=True)
    code, out = await send(apiserver, "DELETE", f"{CONFIGMAPS}/a", {"dryRun": ["All"]})
    assert code == 200 and out["metadata"].get("deletionTimestamp")
    stored = apiserver.store.get("", "configmaps", "a", "default")
    assert "deletionTimestamp" not in stored["metadata"]


@pytest.mark.parametrize("how", ["query", "body"])
async def test_deletecollection_dry_run_empties_nothing(apiserver: ApiServer, how: str) -> None:
    await _configmaps(apiserver, "a", "b", "c")
    path, body = (f"{CONFIGMAPS}?dryRun=All", None)
    if how == "body":
        path, body = CONFIGMAPS, {"dryRun": ["All"]}
    revision = apiserver.store.revision
    code, out = await send(apiserver, "DELETE", path, body)
    assert code == 200
    assert [o["metadata"]["name"] for o in out["items"]] == ["a", "b", "c"]
    assert _names(apiserver) == ["a", "b", "c"]
    assert apiserver.store.revision == revision


async def test_deletecollection_without_dry_run_deletes(apiserver: ApiServer) -> None:
    await _configmaps(apiserver, "a", "b")
    code, _ = await send(apiserver, "DELETE", CONFIGMAPS)
    assert code == 200
    assert _names(apiserver) == []


async def test_unknown_dry_run_value_is_refused(apiserver: ApiServer) -> None:
    await _configmaps(apiserver, "a")
    code, status = await send(apiserver, "DELETE", f"{CONFIGMAPS}/a", {"dryRun": ["bogus"]})
    assert code == 422
    assert status["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
        '[]string{"bogus"}: supported values: "All"'
    )
    code, status = await send(apiserver, "DELETE", f"{CONFIGMAPS}?dryRun=bogus")
    assert code == 422 and status["details"]["kind"] == "DeleteOptions"
    assert _names(apiserver) == ["a"]
    code, status = await send(
        apiserver, "POST", f"{CONFIGMAPS}?dryRun=yes", {"metadata": {"name": "b"}}
    )
    assert code == 422
    assert status["message"].startswith('CreateOptions.meta.k8s.io "" is invalid: dryRun:')
    assert _names(apiserver) == ["a"]


async def test_unknown_propagation_policy_is_refused(apiserver: ApiServer) -> None:
    await _configmaps(apiserver, "a")
    code, status = await send(
        apiserver, "DELETE", f"{CONFIGMAPS}/a", {"propagationPolicy": "Eventually"}
    )
    assert code == 422
    assert "propagationPolicy: Unsupported value" in status["message"]
    assert _names(apiserver) == ["a"]


async def test_preconditions_in_the_delete_body_still_apply(apiserver: ApiServer) -> None:
    await _configmaps(apiserver, "a")
    body = {"preconditions": {"resourceVersion": "1"}}
    code, status = await send(apiserver, "DELETE", f"{CONFIGMAPS}/a", body)
    assert code == 409
    assert "Precondition failed: ResourceVersion in precondition: 1" in status["message"]
    assert _names(apiserver) == ["a"]
