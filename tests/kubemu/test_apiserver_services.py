"""Service rules a real apiserver applies that controllers trip over: ipMode defaulting and
status.loadBalancer validation (service_status.py), and the DenyServiceExternalIPs admission
plugin as an emulator switch (plugins.py)."""

from __future__ import annotations

import asyncio
import copy
import json
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from kubemu import ApiServer
from kubemu.__main__ import parse_args
from kubemu.service_status import default_ip_mode, load_balancer_causes
from polling import within

SVC = "/api/v1/namespaces/default/services"
MERGE = {"Content-Type": "application/merge-patch+json"}


def service(name: str = "web", kind: str = "LoadBalancer", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": kind, "ports": [{"port": 80}], **spec},
    }


def ingress(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"status": {"loadBalancer": {"ingress": list(entries)}}}


async def call(
    srv: ApiServer, method: str, path: str, body: Any = None, headers: Any = None
) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession(srv.url) as http,
        http.request(method, path, json=body, headers=headers) as r,
    ):
        return r.status, await r.json()


# --- ipMode --------------------------------------------------------------------------------


async def test_ip_mode_defaults_to_vip_on_status_writes(apiserver: ApiServer) -> None:
    assert (await call(apiserver, "POST", SVC, service()))[0] == 201
    code, out = await call(
        apiserver,
        "PATCH",
        f"{SVC}/web/status",
        ingress(
            {"ip": "203.0.113.7"},
            {"hostname": "lb.example"},
            {"ip": "2001:db8::7", "ipMode": "Proxy"},
        ),
        MERGE,
    )
    assert code == 200
    assert out["status"]["loadBalancer"]["ingress"] == [
        {"ip": "203.0.113.7", "ipMode": "VIP"},
        {"hostname": "lb.example"},
        {"ip": "2001:db8::7", "ipMode": "Proxy"},
    ]
    rv = out["metadata"]["resourceVersion"]
    # Writing the same ingress again without ipMode changes nothing: no new revision.
    _, again = await call(
        apiserver,
        "PATCH",
        f"{SVC}/web/status",
        ingress(
            {"ip": "203.0.113.7"},
            {"hostname": "lb.example"},
            {"ip": "2001:db8::7", "ipMode": "Proxy"},
        ),
        MERGE,
    )
    assert again["metadata"]["resourceVersion"] == rv


async def test_ip_mode_defaults_on_put_and_store_writes(apiserver: ApiServer) -> None:
    apiserver.store.create("", "services", service(), namespace="default")
    svc = apiserver.store.get("", "services", "web", "default")
    svc.update(ingress({"ip": "203.0.113.8"}))
    out = apiserver.store.update("", "services", svc, status=True)
    assert out["status"]["loadBalancer"]["ingress"] == [{"ip": "203.0.113.8", "ipMode": "VIP"}]
    svc = apiserver.store.get("", "services", "web", "default")
    svc["status"]["loadBalancer"]["ingress"] = [{"ip": "203.0.113.9"}]
    code, put = await call(apiserver, "PUT", f"{SVC}/web/status", svc)
    assert code == 200
    assert put["status"]["loadBalancer"]["ingress"] == [{"ip": "203.0.113.9", "ipMode": "VIP"}]
    # The main endpoint keeps the stored status, whatever the body says.
    put["status"] = ingress({"ip": "198.51.100.1"})["status"]
    code, main = await call(apiserver, "PUT", f"{SVC}/web", put)
    assert code == 200
    assert main["status"]["loadBalancer"]["ingress"] == [{"ip": "203.0.113.9", "ipMode": "VIP"}]


@pytest.mark.parametrize(
    ("kind", "entry", "field", "message"),
    [
        (
            "LoadBalancer",
            {"ip": "203.0.113.7", "ipMode": "Tunnel"},
            "status.loadBalancer.ingress[0].ipMode",
            'Unsupported value: "Tunnel": supported values: "Proxy", "VIP"',
        ),
        (
            "LoadBalancer",
            {"hostname": "lb.example", "ipMode": "VIP"},
            "status.loadBalancer.ingress[0].ipMode",
            "Forbidden: may not be specified when `ip` is not set",
        ),
        (
            "ClusterIP",
            {"ip": "203.0.113.7"},
            "status.loadBalancer.ingress",
            "Forbidden: may only be used when `spec.type` is 'LoadBalancer'",
        ),
    ],
)
async def test_status_load_balancer_is_validated(
    apiserver: ApiServer, kind: str, entry: dict[str, Any], field: str, message: str
) -> None:
    await call(apiserver, "POST", SVC, service(kind=kind))
    code, status = await call(apiserver, "PATCH", f"{SVC}/web/status", ingress(entry), MERGE)
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["message"] == f'Service "web" is invalid: {field}: {message}'
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [(field, message)]
    assert status["details"]["kind"] == "Service" and status["details"]["group"] == ""


def test_ip_mode_rules_as_functions() -> None:
    lb = service() | ingress({"ip": "203.0.113.7"})
    assert load_balancer_causes(lb) == [
        {
            "reason": "FieldValueRequired",
            "field": "status.loadBalancer.ingress[0].ipMode",
            "message": "Required value: must be specified when `ip` is set",
        }
    ]
    shared = copy.deepcopy(lb)
    before = shared["status"]
    default_ip_mode(shared)
    assert before == ingress({"ip": "203.0.113.7"})["status"]  # not edited in place
    assert load_balancer_causes(shared) == []
    cluster_ip = service(kind="ClusterIP") | ingress({"ip": "203.0.113.7"})
    default_ip_mode(cluster_ip)
    assert cluster_ip["status"]["loadBalancer"]["ingress"] == [{"ip": "203.0.113.7"}]


# --- DenyServiceExternalIPs ----------------------------------------------------------------

DENIED = 'services "web" is forbidden: Use of external IPs is denied by admission control'


async def test_deny_service_external_ips_refuses_new_entries_only() -> None:
    async with ApiServer(bookmark_interval=0, deny_service_external_ips=True) as srv:
        code, status = await call(srv, "POST", SVC, service(externalIPs=["203.0.113.7"]))
        assert (code, status["reason"], status["message"]) == (403, "Forbidden", DENIED)
        assert status["details"] == {"name": "web", "group": "", "kind": "services"}
        code, status = await call(
            srv, "POST", f"{SVC}?dryRun=All", service(externalIPs=["203.0.113.7"])
        )
        assert code == 403  # admission runs before a dry run stops
        assert (await call(srv, "POST", SVC, service(externalIPs=[])))[0] == 201

        add = {"spec": {"externalIPs": ["203.0.113.7"]}}
        code, status = await call(srv, "PATCH", f"{SVC}/web", add, MERGE)
        assert (code, status["message"]) == (403, DENIED)
        assert srv.plugins.denials == [DENIED] * 3

        srv.plugins.deny_service_external_ips = False
        both = {"spec": {"externalIPs": ["203.0.113.7", "203.0.113.8"]}}
        assert (await call(srv, "PATCH", f"{SVC}/web", both, MERGE))[0] == 200
        srv.plugins.deny_service_external_ips = True

        keep = {"metadata": {"labels": {"a": "b"}}, "spec": {"externalIPs": ["203.0.113.8"]}}
        code, out = await call(srv, "PATCH", f"{SVC}/web", keep, MERGE)
        assert code == 200 and out["spec"]["externalIPs"] == ["203.0.113.8"]  # removal is fine
        swap = {"spec": {"externalIPs": ["203.0.113.8", "203.0.113.9"]}}
        assert (await call(srv, "PATCH", f"{SVC}/web", swap, MERGE))[0] == 403
        status_write = ingress({"ip": "203.0.113.8"})
        assert (await call(srv, "PATCH", f"{SVC}/web/status", status_write, MERGE))[0] == 200
        with pytest.raises(Exception, match="Use of external IPs is denied"):
            srv.store.create("", "services", service("other", externalIPs=["192.0.2.1"]), "default")


async def test_switch_through_the_admin_api(apiserver: ApiServer) -> None:
    code, state = await call(apiserver, "GET", "/_emulator/admission")
    assert (code, state) == (200, {"deny_service_external_ips": False})
    assert (await call(apiserver, "POST", SVC, service("a", externalIPs=["192.0.2.1"])))[0] == 201
    code, state = await call(
        apiserver, "POST", "/_emulator/admission", {"deny_service_external_ips": True}
    )
    assert (code, state) == (200, {"deny_service_external_ips": True})
    code, status = await call(apiserver, "POST", SVC, service("b", externalIPs=["192.0.2.2"]))
    assert (code, status["message"]) == (403, DENIED.replace('"web"', '"b"'))
    await call(apiserver, "POST", "/_emulator/admission", {"deny_service_external_ips": False})
    assert (await call(apiserver, "POST", SVC, service("b", externalIPs=["192.0.2.2"])))[0] == 201


def test_cli_flag() -> None:
    assert parse_args([]).deny_service_external_ips is False
    assert parse_args(["--deny-service-external-ips"]).deny_service_external_ips is True


async def test_module_runs_with_the_plugin(tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kubemu",
        "--kubeconfig-out",
        str(kc),
        "--deny-service-external-ips",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with within(20, "the emulator's kubeconfig and its admission answer"):
            while not (kc.exists() and kc.stat().st_size):
                await asyncio.sleep(0.05)
            url = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]["server"]
            async with aiohttp.ClientSession(url) as http:
                async with http.get("/_emulator/admission") as r:
                    assert await r.json() == {"deny_service_external_ips": True}
                body = json.dumps(service(externalIPs=["192.0.2.1"]))
                async with http.post(SVC, data=body) as r:
                    assert r.status == 403 and (await r.json())["message"] == DENIED
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(10):
            await proc.wait()
