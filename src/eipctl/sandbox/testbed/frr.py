"""FRR in one node namespace: zebra, bfdd and bgpd, and the reloader that applies what eipctl's
controller renders, as in a node's pod (the bed's plan: `routing.py`).

The daemons run as the `frr` user with a pathspace of their own (``-N <node namespace>``:
/etc/frr/<ns>, /var/run/frr/<ns>), started with a minimal config;
`deploy/workloads/frr/reload.sh` applies ``<run dir>/frr-<node>.conf`` whenever it changes
and reports in ``.status``. `stop()` ends the daemons and removes the pathspace directories.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
from pathlib import Path

from eipctl.sandbox.namespaces import pid_alive, sh
from eipctl.sandbox.testbed.network import NodeNet
from eipctl.sandbox.testbed.processes import Process, wait_for
from eipctl.sandbox.testbed.routing import BGP_LINK, FRR_BIN, FRR_DAEMONS, FRR_USER

FRR_CONF_DIR = Path("/etc/frr")
FRR_RUN_DIR = Path("/var/run/frr")
FRR_CRASH_DIR = Path("/var/tmp/frr")  # <daemon>.<pid>/logbuf.<pid> of each running daemon
RELOAD_SH = Path("deploy/workloads/frr/reload.sh")  # in the source tree
RELOAD_SH_ENV = "EIPCTL_FRR_RELOAD_SH"  # overrides where reload.sh is

MINIMAL_FRR_CONF = "frr defaults datacenter\n!\n"
VTYSH_CONF = "service integrated-vtysh-config\n"


def reload_script() -> Path:
    """deploy/workloads/frr/reload.sh: `$EIPCTL_FRR_RELOAD_SH`, else the source tree this
    module is in, else the current directory (tox runs from the checkout)."""
    if env := os.environ.get(RELOAD_SH_ENV):
        return Path(env)
    for base in (Path(__file__).resolve().parents[4], Path.cwd()):
        if (base / RELOAD_SH).is_file():
            return base / RELOAD_SH
    raise FileNotFoundError(f"{RELOAD_SH} not found (set {RELOAD_SH_ENV})")


def reap_leftover_pathspaces(prefix: str) -> list[Path]:
    """Remove the FRR pathspace directories (``<prefix><pid>-...``) of dead runs."""
    owner = re.compile(rf"^{re.escape(prefix)}(\d+)-")
    removed = []
    for parent in (FRR_CONF_DIR, FRR_RUN_DIR):
        for path in parent.glob(f"{prefix}*"):
            m = owner.match(path.name)
            if m and not pid_alive(int(m.group(1))):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def add_bgp_link(node: NodeNet, name: str = BGP_LINK) -> str:
    """A dummy link `name` in the node's namespace, up (what eipctl's controller makes and
    puts the addresses it announces on); its kind. A kernel without the dummy driver (some
    VM kernels) gets an ifb link instead, which behaves the same here: up, always carrier,
    its addresses local and connected routes for zebra."""
    for kind in ("dummy", "ifb"):
        try:
            node.ns.ip(f"link add {name} type {kind}")
        except RuntimeError as err:
            if "Unknown device type" in str(err) and kind == "dummy":
                continue
            raise
        node.ns.ip(f"link set {name} up")
        return kind
    raise AssertionError("unreachable")


def _kill_group(proc: Process) -> None:
    """SIGKILL a process and what it started (its own session: `Process` starts one)."""
    if proc.alive and proc.pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()


class FrrNode:
    """FRR (zebra, bfdd, bgpd) and the reloader in one node's namespace.

    `config_file` is what the reloader applies (eipctl's controller writes it, or a test);
    `status()` reads what the reloader said about it.
    """

    def __init__(
        self,
        node: NodeNet,
        run_dir: Path,
        *,
        pathspace: str | None = None,
        reload_interval: float = 0.5,
    ) -> None:
        self.node = node
        self.name = node.name
        self.pathspace = pathspace or node.ns.name  # unique per node and run
        self.conf_dir = FRR_CONF_DIR / self.pathspace
        self.sock_dir = FRR_RUN_DIR / self.pathspace
        self.config_file = run_dir / f"frr-{node.name}.conf"
        self.status_file = Path(f"{self.config_file}.status")
        self.daemons = [
            Process(f"frr-{node.name}-{daemon}", self._argv(daemon), run_dir, netns=node.ns.name)
            for daemon in FRR_DAEMONS
        ]
        env = {"FRR_PATHSPACE": self.pathspace, "RELOAD_INTERVAL": str(reload_interval)}
        argv = ["sh", str(reload_script()), str(self.config_file)]
        self.reloader = Process(
            f"frr-{node.name}-reload", argv, run_dir, netns=node.ns.name, env=env
        )

    def _argv(self, daemon: str) -> list[str]:
        # -N puts the config (/etc/frr/<ps>), the vty and zserv sockets and the pid files
        # (/var/run/frr/<ps>) in a space of this node's; -P 0: no TCP vty
        argv = [str(FRR_BIN / daemon), "-N", self.pathspace, "-f", str(self.conf_dir / "frr.conf")]
        return [*argv, "-P", "0", "--log", "stdout", "--log-level", "info"]

    @property
    def processes(self) -> list[Process]:
        return [*self.daemons, self.reloader]

    @property
    def alive(self) -> bool:
        return all(p.alive for p in self.processes)

    def start(self, timeout: float = 15.0) -> None:
        """Fresh pathspace directories, the daemons, then (once vtysh reaches all three) the
        reloader. Also after `kill()`: what the dead daemons left is wiped first."""
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """`start` without the wait (`wait_ready`), to start several nodes at once."""
        self.status_file.unlink(missing_ok=True)  # the new reloader applies the config again
        for path in (self.conf_dir, self.sock_dir):
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
            shutil.chown(path, FRR_USER, FRR_USER)
        (self.conf_dir / "frr.conf").write_text(MINIMAL_FRR_CONF)
        (self.conf_dir / "vtysh.conf").write_text(VTYSH_CONF)
        for name in ("frr.conf", "vtysh.conf"):
            shutil.chown(self.conf_dir / name, FRR_USER, FRR_USER)
        self.daemons[0].start()  # zebra first: the others connect to its zserv socket
        wait_for(
            lambda: (self.sock_dir / "zserv.api").exists() or self._dead(self.daemons[:1]),
            10,
            what=f"zebra of {self.name}",
        )
        for proc in self.daemons[1:]:
            proc.start()

    def wait_ready(self, timeout: float = 15.0) -> None:
        def ready() -> bool:
            self._dead(self.daemons)
            out = self.vtysh("show daemons", check=False)
            return all(d in out.split() for d in FRR_DAEMONS)

        wait_for(ready, timeout, interval=0.1, what=f"FRR of {self.name} answering vtysh")
        if not self.reloader.alive:
            self.reloader.start()

    @staticmethod
    def _dead(daemons: list[Process]) -> bool:
        """False, or raises with the log of a daemon that exited."""
        for proc in daemons:
            if proc.popen is not None and not proc.alive:
                raise RuntimeError(f"{proc.name} exited:\n{proc.log_tail(15)}")
        return False

    def kill(self) -> None:
        """SIGKILL every daemon and the reloader (the node died): its BGP sessions drop
        (the router sees the TCP reset, or, with the link down, BFD's silence)."""
        _kill_group(self.reloader)
        for daemon, proc in zip(FRR_DAEMONS, self.daemons, strict=True):
            pid = proc.pid
            _kill_group(proc)
            if pid is not None:  # a daemon's crash-log buffer, left behind by a SIGKILL
                shutil.rmtree(FRR_CRASH_DIR / f"{daemon}.{pid}", ignore_errors=True)

    def stop(self) -> None:
        """Kill everything and remove the pathspace directories."""
        self.kill()
        for path in (self.conf_dir, self.sock_dir):
            shutil.rmtree(path, ignore_errors=True)

    # ---- looking at it ----

    def vtysh(self, *commands: str, check: bool = True) -> str:
        args = [a for c in commands for a in ("-c", c)]
        return sh("vtysh", "-N", self.pathspace, *args, check=check)

    def show(self, command: str) -> str:
        """`vtysh -c <command>` in this node's FRR, e.g. ``show("show bgp summary")``."""
        return self.vtysh(command)

    def bgp_neighbors(self) -> dict[str, dict[str, object]]:
        """{peer address: its entry of `show bgp summary json`} over every address family
        (``state`` is "Established" when up; ``pfxSnt`` counts the family's routes sent)."""
        peers: dict[str, dict[str, object]] = {}
        summary = json.loads(self.show("show bgp summary json") or "{}")
        for family, data in summary.items():
            if isinstance(data, dict):
                for peer, info in data.get("peers", {}).items():
                    peers.setdefault(peer, {}).update(info, family=family)
        return peers

    def bfd_peers(self) -> dict[str, str]:
        """{peer address: BFD status ("up", "down", ...)}."""
        return {
            str(p["peer"]): str(p.get("status"))
            for p in json.loads(self.show("show bfd peers json") or "[]")
        }

    # ---- the reloader ----

    def write_config(self, text: str) -> str:
        """Replace the config file atomically (what the controller does); its sha256."""
        tmp = self.config_file.with_name(self.config_file.name + ".new")
        tmp.write_text(text)
        tmp.replace(self.config_file)
        return hashlib.sha256(text.encode()).hexdigest()

    def status(self) -> tuple[str, str, str] | None:
        """What the reloader said last: (sha256, "applied" | "failed", frr-reload's tail)."""
        try:
            first, _, rest = self.status_file.read_text().partition("\n")
        except FileNotFoundError:
            return None
        sha, _, state = first.partition(" ")
        return sha, state, rest

    def wait_config(self, sha: str, timeout: float = 20.0) -> str:
        """Until the reloader has tried the config `sha` (`write_config`'s); its outcome."""

        def tried() -> str | None:
            status = self.status()
            return status[1] if status is not None and status[0] == sha else None

        return str(wait_for(tried, timeout, interval=0.1, what=f"{self.name} reloading {sha}"))
