"""SelfSubjectAccessReview and SelfSubjectReview: `kubectl auth can-i` and `auth whoami`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest_asyncio

from kubemu import ApiServer

SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
SSR = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def can_i(verb: str, resource: str, namespace: str = "", group: str = "") -> dict[str, Any]:
    attrs = {"verb": verb, "resource": resource, "namespace": namespace, "group": group}
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attrs},
    }


async def post(srv: ApiServer, path: str, body: Any, token: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession(srv.url, headers=headers) as http,
        http.post(path, json=body) as r,
    ):
        return r.status, await r.json()


@pytest_asyncio.fixture
async def rbac_server() -> AsyncIterator[ApiServer]:
    srv = ApiServer(rbac=True)
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


async def test_everything_is_allowed_without_rbac(apiserver: ApiServer) -> None:
    code, review = await post(apiserver, SSAR, can_i("delete", "nodes"))
    assert code == 201
    assert review["kind"] == "SelfSubjectAccessReview"
    assert review["status"]["allowed"] is True
    assert review["spec"]["resourceAttributes"]["resource"] == "nodes"


async def test_review_follows_rbac(rbac_server: ApiServer) -> None:
    rbac = rbac_server.rbac
    assert rbac is not None
    st = rbac_server.store
    st.create("", "namespaces", {"metadata": {"name": "team"}})
    st.create(
        "rbac.authorization.k8s.io",
        "roles",
        {
            "metadata": {"name": "leases", "namespace": "team"},
            "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}
            ],
        },
        "team",
    )
    st.create(
        "rbac.authorization.k8s.io",
        "rolebindings",
        {
            "metadata": {"name": "leases", "namespace": "team"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leases"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "team"}],
        },
        "team",
    )
    token = rbac.service_account_token("team", "bot")
    code, review = await post(
        rbac_server, SSAR, can_i("get", "leases", "team", "coordination.k8s.io"), token
    )
    assert code == 201 and review["status"]["allowed"] is True
    code, review = await post(
        rbac_server, SSAR, can_i("update", "leases", "team", "coordination.k8s.io"), token
    )
    assert code == 201 and review["status"]["allowed"] is False
    code, review = await post(
        rbac_server, SSAR, can_i("get", "leases", "default", "coordination.k8s.io"), token
    )
    assert review["status"]["allowed"] is False
    code, review = await post(rbac_server, SSR, {"kind": "SelfSubjectReview"}, token)
    assert code == 201
    user = review["status"]["userInfo"]
    assert user["username"] == "system:serviceaccount:team:bot"
    assert "system:serviceaccounts:team" in user["groups"]
    assert rbac.denials == []


async def test_whoami_without_rbac_is_the_admin(apiserver: ApiServer) -> None:
    code, review = await post(apiserver, SSR, {})
    assert code == 201
    assert review["apiVersion"] == "authentication.k8s.io/v1"
    assert review["status"]["userInfo"]["username"] == "kubernetes-admin"
    assert "system:masters" in review["status"]["userInfo"]["groups"]


async def test_review_needs_exactly_one_kind_of_attributes(apiserver: ApiServer) -> None:
    code, status = await post(apiserver, SSAR, {"spec": {}})
    assert code == 422 and status["reason"] == "Invalid"
    both = can_i("get", "pods")
    both["spec"]["nonResourceAttributes"] = {"path": "/healthz", "verb": "get"}
    code, _ = await post(apiserver, SSAR, both)
    assert code == 422


async def test_reviews_are_create_only(apiserver: ApiServer) -> None:
    async with aiohttp.ClientSession(apiserver.url) as http, http.get(SSAR) as r:
        assert r.status == 405


async def test_reviews_are_in_discovery(apiserver: ApiServer) -> None:
    async with aiohttp.ClientSession(apiserver.url) as http:
        async with http.get("/apis") as r:
            groups = {g["name"]: g for g in (await r.json())["groups"]}
        for group, plural, kind in (
            ("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
            ("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview"),
        ):
            assert groups[group]["preferredVersion"] == {
                "groupVersion": f"{group}/v1",
                "version": "v1",
            }
            async with http.get(f"/apis/{group}") as r:
                assert r.status == 200 and (await r.json())["kind"] == "APIGroup"
            async with http.get(f"/apis/{group}/v1") as r:
                assert (await r.json())["resources"] == [
                    {
                        "name": plural,
                        "singularName": kind.lower(),
                        "namespaced": False,
                        "kind": kind,
                        "verbs": ["create"],
                    }
                ]
        async with http.get("/apis/authorization.k8s.io/v2") as r:
            assert r.status == 404
