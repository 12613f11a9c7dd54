"""SetDefaults_Secret: a Secret written without `type` (or with an empty one) is Opaque, on
create and on every later write, as a real apiserver decodes it."""

from __future__ import annotations

from typing import Any

import aiohttp

from kubemu import ApiServer


def secret(name: str, **fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "data": {"k": "dg=="}, **fields}


def test_created_without_type_is_opaque(apiserver: ApiServer) -> None:
    st = apiserver.store
    assert st.create("", "secrets", secret("plain"), "default")["type"] == "Opaque"
    assert st.create("", "secrets", secret("empty", type=""), "default")["type"] == "Opaque"
    tls = secret("tls", type="kubernetes.io/tls")
    tls["data"] = {"tls.crt": "", "tls.key": ""}
    assert st.create("", "secrets", tls, "default")["type"] == "kubernetes.io/tls"
    assert st.get("", "secrets", "plain", "default")["type"] == "Opaque"


def test_updates_and_patches_are_defaulted_too(apiserver: ApiServer) -> None:
    st = apiserver.store
    st.create("", "secrets", secret("s"), "default")
    stored = st.get("", "secrets", "s", "default")
    del stored["type"]
    assert st.update("", "secrets", stored)["type"] == "Opaque"
    patched = st.patch("", "secrets", "s", {"type": None}, namespace="default")
    assert patched["type"] == "Opaque"


async def test_over_http_and_in_dry_run(apiserver: ApiServer) -> None:
    path = "/api/v1/namespaces/default/secrets"
    async with aiohttp.ClientSession(apiserver.url) as http:
        async with http.post(path, json=secret("web")) as r:
            assert r.status == 201 and (await r.json())["type"] == "Opaque"
        async with http.post(path, params={"dryRun": "All"}, json=secret("dry")) as r:
            assert r.status == 201 and (await r.json())["type"] == "Opaque"
        async with http.get(f"{path}/web") as r:
            assert (await r.json())["type"] == "Opaque"
