"""`eipctl sandbox` actions: usage errors exit 2 with one line, no sandbox exits 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from eipctl.cli.main import main as eipctl_main
from eipctl.runtime.config import SandboxSettings
from eipctl.sandbox import cli
from eipctl.sandbox.netns import write_node_kubeconfig


def settings(tmp_path: Path, **kw: object) -> SandboxSettings:
    return SandboxSettings(state_dir=str(tmp_path / "state"), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("action", "node", "message"),
    [
        ("kill-node", None, "kill-node needs a node name"),
        ("revive-node", None, "revive-node needs a node name"),
        ("run", "node-1", "`run` takes no node name"),
    ],
)
def test_usage_errors(
    action: str, node: str | None, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(action, node, settings(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("eipctl sandbox: error: ") and message in err
    assert not (tmp_path / "state").exists()  # nothing started


def test_bad_pool_cidr_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main("run", None, settings(tmp_path, pool_cidr="203.0.113.7/24")) == 2
    assert "--pool-cidr '203.0.113.7/24'" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()


def test_control_actions_without_a_sandbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main("kill-node", "node-1", settings(tmp_path)) == 1
    assert "no sandbox is running" in capsys.readouterr().err


def test_flags_reach_the_sandbox(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "elsewhere"
    code = eipctl_main(["sandbox", "status", "--state-dir", str(state)])
    assert code == 1
    assert str(state) in capsys.readouterr().err


def test_node_kubeconfig_points_at_the_relay(tmp_path: Path) -> None:
    from kubemu import ApiServer

    path = tmp_path / "node.kubeconfig"
    write_node_kubeconfig(ApiServer(), path)
    assert "server: http://127.0.0.1:6443" in path.read_text()
    assert path.stat().st_mode & 0o077 == 0
