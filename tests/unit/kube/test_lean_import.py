"""kube/lean_import.py: every process loads kubernetes_asyncio's loaders and ApiClient without
its generated APIs and models (~40 MB less each), and nothing that asks for them breaks.

Each check runs in a fresh interpreter: the test process has imported kubernetes_asyncio
the usual way already (then `install` does nothing, by design)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

SERVER_AND_KUBECONFIG = """
import asyncio, json, sys
from aiohttp import web
from eipctl.kube import lean_import

seen = {}

async def service(request):
    seen["authorization"] = request.headers.get("Authorization")
    return web.json_response({"apiVersion": "v1", "kind": "Service",
                              "metadata": {"name": "web", "namespace": "default"}})

async def serve():
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/services/web", service)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    kubeconfig = sys.argv[1]
    open(kubeconfig, "w").write(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t0k3n"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))
    return runner
"""


def run(tmp_path: Path, body: str) -> dict[str, object]:
    """Run ``body`` (which sets ``out``) in a fresh interpreter; its ``out`` as JSON."""
    script = SERVER_AND_KUBECONFIG + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "kubeconfig")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_process_connects_and_requests_without_the_generated_modules(tmp_path: Path) -> None:
    out = run(
        tmp_path,
        """
        from eipctl.kube.client import SERVICES, connect

        async def main():
            runner = await serve()
            api = await connect(sys.argv[1])
            got = await api.get(SERVICES, "web", "default")
            await api.close()
            await runner.cleanup()
            loaded = [m for m in sys.modules if m.startswith("kubernetes_asyncio")]
            return {"name": got["metadata"]["name"], "auth": seen["authorization"],
                    "modules": len(loaded),
                    "models": "kubernetes_asyncio.client.models.v1_pod" in sys.modules}

        out = asyncio.run(main())
        """,
    )
    assert out["name"] == "web"
    assert out["auth"] == "Bearer t0k3n"  # the kubeconfig's credentials, through call_api
    assert out["models"] is False
    assert isinstance(out["modules"], int) and out["modules"] < 60  # ~860 the usual way


def test_whatever_else_is_asked_for_loads_as_it_always_did(tmp_path: Path) -> None:
    """A generated API or model (a test bed, `ApiClient.deserialize`) runs the real
    ``__init__`` once: the names are the real ones."""
    out = run(
        tmp_path,
        """
        assert lean_import.install()
        import kubernetes_asyncio
        from kubernetes_asyncio import client, config, watch
        from kubernetes_asyncio.client.models.v1_pod import V1Pod as direct
        pod = client.models.V1Pod
        api = client.CoreV1Api
        from kubernetes_asyncio.client import ApiClient

        async def deserialized():
            async with ApiClient() as api:
                response = type("R", (), {"data": '{"metadata": {"name": "p"}}'})()
                return api.deserialize(response, "V1Pod")

        made = asyncio.run(deserialized())
        out = {"same": pod is direct, "api": api.__name__, "watch": watch.Watch.__name__,
               "made": made.metadata.name, "version": kubernetes_asyncio.__version__,
               "loader": config.load_incluster_config.__name__}
        """,
    )
    assert out == {
        "same": True,
        "api": "CoreV1Api",
        "watch": "Watch",
        "made": "p",
        "version": out["version"],
        "loader": "load_incluster_config",
    }


def test_the_in_cluster_loader_fills_a_configuration(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("in-cluster-token")
    (tmp_path / "ca.crt").write_text("not checked here\n")
    out = run(
        tmp_path,
        f"""
        assert lean_import.install()
        from kubernetes_asyncio import client
        from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader
        cfg = client.Configuration()
        InClusterConfigLoader(
            token_filename={str(tmp_path / "token")!r},
            cert_filename={str(tmp_path / "ca.crt")!r},
            environ={{"KUBERNETES_SERVICE_HOST": "192.0.2.1",
                      "KUBERNETES_SERVICE_PORT": "443"}},
        ).load_and_set(cfg)
        out = {{"host": cfg.host, "token": cfg.api_key["BearerToken"],
                "lean": "kubernetes_asyncio.client.api" not in sys.modules}}
        """,
    )
    assert out == {
        "host": "https://192.0.2.1:443",
        "token": "Bearer in-cluster-token",
        "lean": True,
    }


def test_nothing_is_installed_once_kubernetes_asyncio_is_imported(tmp_path: Path) -> None:
    out = run(
        tmp_path,
        """
        import kubernetes_asyncio
        out = {"installed": lean_import.install(),
               "real": type(sys.modules["kubernetes_asyncio"]).__name__}
        """,
    )
    assert out == {"installed": False, "real": "module"}
