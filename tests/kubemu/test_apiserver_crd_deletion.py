"""Deleting a CRD goes through its instances' finalizers, as the apiextensions apiserver does.

The CRD gets deletionTimestamp, the finalizer customresourcecleanup.apiextensions.k8s.io and
a Terminating condition; each instance is deleted (an instance with finalizers stays,
Terminating); new instances are refused (405); the CRD goes with the last instance.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from widget_crd import GROUP, PLURAL, VERSION

from kubemu import ApiServer

CRD_NAME = f"{PLURAL}.{GROUP}"
CRD_URL = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"
WIDGETS = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
EXT = ("apiextensions.k8s.io", "customresourcedefinitions")
HOLD = "example.com/hold"


def widget(name: str, *finalizers: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": meta,
        "spec": {"size": 1},
    }


def terminating(crd: dict[str, Any]) -> dict[str, Any]:
    conds = crd["status"]["conditions"]
    return next(c for c in conds if c["type"] == "Terminating")


async def test_crd_waits_for_instances_with_finalizers(widgets: ApiServer) -> None:
    st = widgets.store
    st.create(GROUP, PLURAL, widget("free"))
    st.create(GROUP, PLURAL, widget("held", HOLD))
    async with aiohttp.ClientSession(widgets.url) as http:
        async with http.delete(CRD_URL) as r:
            assert r.status == 200
            answer = await r.json()
        assert answer["metadata"]["deletionTimestamp"]
        assert "customresourcecleanup.apiextensions.k8s.io" in answer["metadata"]["finalizers"]

        crd = st.get(*EXT, CRD_NAME)
        cond = terminating(crd)
        assert cond["status"] == "True" and cond["reason"] == "InstanceDeletionCheck"
        assert st.find(GROUP, PLURAL, "free") is None
        held = st.get(GROUP, PLURAL, "held")
        assert held["metadata"]["deletionTimestamp"]

        async with http.get(WIDGETS) as r:  # still served
            assert r.status == 200
            assert [o["metadata"]["name"] for o in (await r.json())["items"]] == ["held"]
        async with http.post(WIDGETS, json=widget("new")) as r:
            assert r.status == 405
            status = await r.json()
        assert status["reason"] == "MethodNotAllowed"
        assert status["message"] == (
            "create not allowed while custom resource definition is terminating"
        )

        # the controller that owned the finalizer comes back (or a user removes it)
        async with http.patch(
            f"{WIDGETS}/held",
            json={"metadata": {"finalizers": None}},
            headers={"Content-Type": "application/merge-patch+json"},
        ) as r:
            assert r.status == 200
        assert st.find(*EXT, CRD_NAME) is None
        async with http.get(WIDGETS) as r:
            assert r.status == 404


def test_crd_without_instances_goes_at_once(widgets: ApiServer) -> None:
    widgets.store.delete(*EXT, CRD_NAME)
    assert widgets.store.find(*EXT, CRD_NAME) is None


def test_crd_with_plain_instances_goes_with_them(widgets: ApiServer) -> None:
    widgets.store.create(GROUP, PLURAL, widget("a"))
    widgets.store.create(GROUP, PLURAL, widget("b"))
    widgets.store.delete(*EXT, CRD_NAME)
    assert widgets.store.find(*EXT, CRD_NAME) is None


async def test_dry_run_delete_of_a_crd_changes_nothing(widgets: ApiServer) -> None:
    widgets.store.create(GROUP, PLURAL, widget("a"))
    async with (
        aiohttp.ClientSession(widgets.url) as http,
        http.delete(CRD_URL, json={"dryRun": ["All"]}) as r,
    ):
        assert r.status == 200
        assert (await r.json())["metadata"]["deletionTimestamp"]
    crd = widgets.store.get(*EXT, CRD_NAME)
    assert "deletionTimestamp" not in crd["metadata"]
    assert widgets.store.find(GROUP, PLURAL, "a") is not None


def test_patching_a_terminating_crd_keeps_it_terminating(widgets: ApiServer) -> None:
    """`kubectl apply` of the CRD again meanwhile (a patch) neither revives nor removes it."""
    widgets.store.create(GROUP, PLURAL, widget("held", HOLD))
    widgets.store.delete(*EXT, CRD_NAME)
    out = widgets.store.patch(*EXT, CRD_NAME, {"metadata": {"labels": {"again": "yes"}}})
    assert out["metadata"]["deletionTimestamp"]
    assert terminating(out)["status"] == "True"
    held = widgets.store.get(GROUP, PLURAL, "held")
    held["metadata"]["finalizers"] = []
    widgets.store.update(GROUP, PLURAL, held)
    assert widgets.store.find(*EXT, CRD_NAME) is None
