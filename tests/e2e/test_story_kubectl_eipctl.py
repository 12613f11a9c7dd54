"""Story: `kubectl eipctl` answers "which node holds which IP" and "why has this Service none".

The bed is `eipctl sandbox` with two nodes (no root), as in test_story_where_is_my_ip.py. Real
kubectl finds the plugin on PATH as ``kubectl-eipctl`` (the console script the package
installs; a copy of it in the test's own bin directory when this venv's was installed before
the script existed) and runs it with the kubeconfig in KUBECONFIG, as kubectl plugins get it.

1. A pool (beside the sandbox's own 203.0.113.0/24), a Service that gets an IP from it, and one annotated with an IP outside every pool.
2. `kubectl eipctl status` (text and ``-o json``) lists the IP, its Service and its node.
3. `kubectl eipctl why` says the second Service's IP is in no pool, exit code 1; the first's
   exit code is 0; a Service that does not exist is a usage error, 2.
4. `kubectl eipctl nodes -o json`: both nodes live, the IP on the one holding it.
5. With an API that does not answer: exit code 3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from story_sandbox import NODES, Sandbox, sandbox

pytestmark = pytest.mark.kubectl
__all__ = ["sandbox"]  # the fixture, used by name

STORY = """apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: eipctl.io/v1alpha1
kind: IpClaimPool
metadata: {name: shop}
spec: {cidr: 198.51.100.0/28}
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  annotations: {external-ip: auto, external-ip-pool: shop}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata:
  name: stray
  namespace: shop
  annotations: {external-ip: 192.0.2.200}
spec:
  selector: {app: stray}
  ports: [{port: 80}]
"""

SCRIPT = """#!{python}
import sys
from eipctl.plugin.main import main
sys.exit(main())
"""


def plugin_dir(tmp_path: Path) -> Path:
    """The directory holding ``kubectl-eipctl``: this venv's, else a copy of the script."""
    installed = Path(sys.executable).parent / "kubectl-eipctl"
    if installed.exists():
        return installed.parent
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "kubectl-eipctl"
    script.write_text(SCRIPT.format(python=sys.executable))
    script.chmod(0o755)
    return bin_dir


def eipctl(
    box: Sandbox, bin_dir: Path, *args: str, kubeconfig: Path | None = None
) -> tuple[int, str, str]:
    """`kubectl eipctl ARGS`: exit code, stdout, stderr."""
    env = {
        **os.environ,
        "HOME": str(box.home),
        "KUBECONFIG": str(kubeconfig or box.kubeconfig),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    done = subprocess.run(
        [box.kubectl_bin, "eipctl", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    return done.returncode, done.stdout, done.stderr


def test_kubectl_eipctl_status_why_nodes(sandbox: Sandbox, tmp_path: Path) -> None:
    box = sandbox
    bin_dir = plugin_dir(tmp_path)

    # 1. a pool, a Service with an IP from it, one asking for an IP outside every pool
    box.kubectl("apply", "-f", "-", stdin=STORY)

    def bound() -> dict[str, object] | None:
        code, out, err = eipctl(box, bin_dir, "status", "-o", "json")
        assert code == 0, err
        rows = [r for r in json.loads(out)["ips"] if r["services"] == ["shop/web"]]
        return rows[0] if rows and rows[0]["phase"] == "Bound" else None

    # 2. status: the IP, its Service, its node, since when, why there
    row = box.until(bound, "shop/web's IP Bound in `kubectl eipctl status -o json`")
    ip, node = str(row["ip"]), str(row["node"])
    assert ip.startswith("198.51.100.") and node in NODES, row
    assert row["pool"] == "shop" and row["since"], row
    code, text, err = eipctl(box, bin_dir, "status")
    assert code == 0, err
    print(f"$ kubectl eipctl status\n{text}")  # shown with -s, and on failure
    header, *lines = text.splitlines()
    assert header.split()[:5] == ["IP", "SERVICES", "NODE", "PHASE", "POOL"], text
    assert any(line.split()[:4] == [ip, "shop/web", node, "Bound"] for line in lines), text

    # 3. why: no IP for stray (1), the reason in one paragraph; web has one (0); no such (2)
    def refused() -> tuple[int, str] | None:
        code, out, _ = eipctl(box, bin_dir, "why", "stray", "-n", "shop")
        return (code, out) if "IPNotInPool" in out else None

    code, text = box.until(refused, "`kubectl eipctl why stray` naming IPNotInPool")
    assert code == 1, text
    print(f"$ kubectl eipctl why stray -n shop  (exit {code})\n{text}")
    assert text.startswith("Service shop/stray: no IP (IPNotInPool)"), text
    assert "does not contain 192.0.2.200" in " ".join(text.split()), text
    code, out, err = eipctl(box, bin_dir, "why", "shop/stray", "-o", "json")
    assert code == 1, err
    why = json.loads(out)
    assert why["cause"] == "IPNotInPool" and not why["hasIP"]
    assert sorted(p["pool"] for p in why["poolsConsidered"]) == ["sandbox", "shop"], why
    code, text, err = eipctl(box, bin_dir, "why", "web", "-n", "shop")
    assert code == 0, err
    assert f"{ip} on {node}" in text, text
    print(f"$ kubectl eipctl why web -n shop  (exit {code})\n{text}")
    code, _, err = eipctl(box, bin_dir, "why", "nosuch", "-n", "shop")
    assert code == 2 and "no Service nosuch in namespace shop" in err, err

    # 4. nodes: both live, the IP on the node that holds it
    code, out, err = eipctl(box, bin_dir, "nodes", "-o", "json")
    assert code == 0, err
    nodes = {n["name"]: n for n in json.loads(out)["nodes"]}
    assert sorted(nodes) == sorted(NODES), out
    assert all(n["live"] == "True" and not n["fenced"] for n in nodes.values()), out
    assert ip in nodes[node]["ips"], out
    code, text, err = eipctl(box, bin_dir, "nodes")
    assert code == 0 and text.split()[:2] == ["NODE", "LIVE"], (text, err)
    print(f"$ kubectl eipctl nodes\n{text}")

    # 5. an API that does not answer
    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    code, _, err = eipctl(box, bin_dir, "status", "--request-timeout", "3", kubeconfig=dead)
    assert code == 3 and "cannot read the API" in err, err
