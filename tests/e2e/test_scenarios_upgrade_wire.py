"""Story: the release that adds holding through outages (new liveness kinds and flags,
docs/liveness.md "Upgrades") is rolled out over the previous release, in either order,
while clients keep connecting to every external IP every 20 ms.

The previous release is the commit before it (`PREVIOUS`), taken from this repository's own
history with `git archive` and run with its `src/` first on PYTHONPATH: real old processes,
speaking the old wire. The bed goes old -> new with the schedulers first, back to old, then
old -> new with the controllers first; each step one process at a time, as the rolling
updates do. No IP may go unanswered for more than 100 ms, and nothing may move, with one
exception that is the previous release's and cannot be fixed in it: in the last leg old
controllers are replaced while the old schedulers judge them, and the old judge ended a
restart grace at the next reply, so a reply from the stopping controller just after its
grace was seen had the node declared dead one timeout later (this release ends a grace only
at the successor's first heartbeat: docs/liveness.md "Upgrades"). Such a move is allowed
only where an old scheduler's own log shows exactly that: a restart grace for the node, then
its death within two timeouts, then the move.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from eipctl.core.node_keys import NODE_KEY_NAMESPACE
from eipctl.sandbox.testbed import LocalBed, wait_for
from eipctl.sandbox.testbed.checks import (
    create_services,
    forget_node_keys,
    placement,
    wait_answered_by,
    wait_bound,
    wait_for_ips,
)
from eipctl.sandbox.testbed.processes import Process

REPO = Path(__file__).resolve().parents[2]
PREVIOUS = "ec7e7f0b08fd233611bc72ff239d03d459adfef2"
"""main before the release that holds through outages (session 7's last commit)."""
MAX_OUTAGE = 0.1
RACE_WINDOW = 0.8
"""Two liveness timeouts: a death this soon after a restart grace was seen is the old race."""
FIELD = re.compile(r"(\w+)=('[^']*'|\S+)")


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    shallow = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if shallow == "true":
        pytest.skip("a shallow clone has no previous release to run")
    dest = tmp_path_factory.mktemp("previous-release")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", PREVIOUS, "src", "deploy"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    assert (dest / "src" / "eipctl" / "__main__.py").exists()
    yield dest / "src"


NEW_FLAGS = ("--node-hold-down", "--liveness-node-key-file")
"""Flags of this release the previous one refuses (it exits on an unknown flag)."""
_THIS_RELEASE_ARGV: dict[str, list[str]] = {}
"""Each process's command line as this release runs it, kept while an old one runs."""


def _use(proc: Process, src: Path | None) -> None:
    env = {k: v for k, v in (proc.env or {}).items() if k != "PYTHONPATH"}
    argv = _THIS_RELEASE_ARGV.setdefault(proc.name, list(proc.argv))
    if src is not None:
        env["PYTHONPATH"] = str(src)
        old = list(argv)
        for flag in NEW_FLAGS:
            while flag in old:
                del old[old.index(flag) : old.index(flag) + 2]
        argv = old
    proc.argv = list(argv)
    proc.env = env


def _forget_node_keys(bed: LocalBed) -> None:
    """Before the controllers go back to the previous release under schedulers of this one:
    a scheduler that knows a node's own key probes it under that key, which an old
    controller cannot read (docs/operations.md, "Upgrade"). Without the Secrets the
    schedulers go back to the cluster key, which this release's controllers answer too."""
    forget_node_keys(bed, NODE_KEY_NAMESPACE)


def _roll_schedulers(bed: LocalBed, src: Path | None) -> None:
    for proc in list(bed.schedulers):
        _use(proc, src)
        bed.replace_replica(proc)


def _roll_controllers(bed: LocalBed, src: Path | None) -> None:
    """Each controller replaced, and shown to run the release asked for: this release lists
    its peers once registered (`peers.listed`), the previous one has no peers."""
    for node in bed.node_names:
        proc = bed.controllers[node]
        _use(proc, src)
        offset = proc.log_size()
        bed.replace_controller(node)
        if src is None:
            wait_for(lambda p=proc, o=offset: "peers.listed" in p.log_since(o), 10)
        else:
            assert "peers.listed" not in proc.log_since(offset), f"{node} runs this release"


def _events(text: str) -> list[dict[str, str]]:
    """The structured log lines of a process as dicts (values unquoted)."""
    out = []
    for line in text.splitlines():
        fields = {k: v.strip("'") for k, v in FIELD.findall(line)}
        if "event" in fields and "ts" in fields:
            out.append(fields)
    return out


def _seconds(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _moves_by_the_old_race(bed: LocalBed, offsets: list[int]) -> dict[str, list[str]]:
    """The claims the schedulers moved since `offsets` (ip -> nodes moved to, in order);
    each move must be the previous release's race (module docstring), or this fails."""
    moved: dict[str, list[str]] = {}
    for proc, offset in zip(bed.schedulers, offsets, strict=True):
        graces: dict[str, float] = {}
        deaths: dict[str, float] = {}
        for e in _events(proc.log_since(offset)):
            node, at = e.get("node", ""), _seconds(e["ts"])
            if e["event"] == "node.restart_grace":
                graces[node] = at
            elif e["event"] == "node.dead":
                deaths[node] = at
                assert at - graces.get(node, float("-inf")) <= RACE_WINDOW, (
                    f"{proc.name} declared {node} dead {at - graces.get(node, 0):.2f}s after "
                    "its restart grace: not the previous release's race"
                )
            elif e["event"] == "object.event" and e.get("kind") == "IpClaim":
                if e.get("reason") in ("Placed", "Bound", None):
                    continue
                source = e.get("from_node", "")
                assert e.get("reason") == "NodeDead" and source in deaths, f"{proc.name}: {e}"
                moved.setdefault(e["ip"], []).append(e["to_node"])
    return moved


def test_rolling_out_over_the_previous_release_in_either_order_moves_nothing(
    local_bed: LocalBed, previous_release: Path
) -> None:
    bed = local_bed
    names = [f"wire-{i}" for i in range(6)]
    create_services(bed, names)
    placed = wait_bound(bed, wait_for_ips(bed, names).values())
    wait_answered_by(bed, placed)
    series = bed.client.start_probes(sorted(placed), interval=0.02)
    old = previous_release
    try:
        time.sleep(0.5)
        _forget_node_keys(bed)  # this release's controllers handed their keys over
        _roll_controllers(bed, old)  # a bed of the previous release: controllers ...
        _roll_schedulers(bed, old)  # ... and schedulers
        _roll_schedulers(bed, None)  # upgrade, schedulers first
        _roll_controllers(bed, None)
        wait_for(  # this release's controllers hand their keys over again
            lambda: bed.kube.node_key_secrets(NODE_KEY_NAMESPACE) == sorted(bed.node_names),
            10,
            what="every node's key Secret",
        )
        _forget_node_keys(bed)  # back to the previous release, as docs/operations.md says
        _roll_controllers(bed, old)
        _roll_schedulers(bed, old)
        offsets = [proc.log_size() for proc in bed.schedulers]
        _roll_controllers(bed, None)  # upgrade, controllers first: old ones under old judges
        raced = _moves_by_the_old_race(bed, offsets)
        _roll_schedulers(bed, None)
        time.sleep(1.0)
    finally:
        bed.client.stop_probes(series)
        for proc in [*bed.schedulers, *bed.controllers.values()]:
            if (proc.env or {}).get("PYTHONPATH"):  # a failure left an old one running
                _use(proc, None)
                proc.terminate(grace=5)
                proc.start()
    print(f"moved by the previous release's grace race (excused): {raced}")
    for ip, node in placed.items():
        dark = series.longest_loss(ip)
        print(f"{ip} on {node}: longest dark time {dark * 1000:.0f} ms over the four roll-outs")
        assert dark <= MAX_OUTAGE, f"{ip} went dark for {dark:.2f}s"
        assert series.answerers(ip) == list(dict.fromkeys([node, *raced.get(ip, [])]))
    expected = {ip: raced[ip][-1] if ip in raced else node for ip, node in placed.items()}
    assert placement(bed.kube.claims()) == expected
