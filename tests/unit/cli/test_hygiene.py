"""Mistakes an operator makes end in one line on stderr and exit 2, naming the flag or key.

A missing --kubeconfig, a busy metrics or probe port, a misspelt config-file key and a
negative-looking duration must not reach a traceback (or argparse's "expected one argument");
EIPCTL_CONFIG, shown in --help, must be read.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eipctl.cli.main import build_parser, build_settings, main
from eipctl.nodeips.settings import NodeIpsSettings
from eipctl.runtime.config import AllocatorSettings, ControllerSettings, SchedulerSettings
from eipctl.runtime.settings import SettingsError

SETTINGS: dict[str, type] = {
    "scheduler": SchedulerSettings,
    "allocator": AllocatorSettings,
    "controller": ControllerSettings,
    "nodeips": NodeIpsSettings,
}
PORT_FLAGS = ("--metrics-bind-address", "--health-probe-bind-address")


KEPT = "EIPCTL_LIVENESS_KEY_FILE"
"""Set by conftest.py for every test: the key the liveness path requires."""


def _foreign(key: str) -> bool:
    return key.startswith("EIPCTL_") and key != KEPT


@pytest.fixture(autouse=True)
def _no_eipctl_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if _foreign(key):
            monkeypatch.delenv(key)


def settings_of(command: str, *argv: str) -> object:
    args = build_parser().parse_args([command, *argv])
    return build_settings(SETTINGS[command], args, command)


def run_eipctl(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not _foreign(k)}
    return subprocess.run(
        [sys.executable, "-m", "eipctl", *argv],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.endswith("\n"), f"not one line: {err!r}"
    assert "Traceback" not in err
    return err


@pytest.fixture
def unreachable_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig that exists; nothing listens at its server (the tests never get there)."""
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: x, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: x, context: {cluster: x, user: x}}]\n"
        "users: [{name: x, user: {}}]\n"
    )
    return path


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


# (b) --kubeconfig naming a file that is not there


@pytest.mark.parametrize("command", sorted(SETTINGS))
def test_a_missing_kubeconfig_is_a_settings_error(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "kubeconfig"
    with pytest.raises(SettingsError, match=rf"^--kubeconfig: {missing}: no such file"):
        settings_of(command, "--kubeconfig", str(missing))


def test_a_missing_kubeconfig_exits_2_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "x" / "y"
    result = run_eipctl("scheduler", "--kubeconfig", str(missing))
    assert result.returncode == 2, result.stderr
    assert one_line(result.stderr) == (
        f"eipctl scheduler: error: --kubeconfig: {missing}: no such file (from command line)\n"
    )


# (b) a metrics or probe port someone else holds


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        ("scheduler", "--metrics-bind-address"),
        ("allocator", "--health-probe-bind-address"),
        ("nodeips", "--metrics-bind-address"),
        ("controller", "--health-probe-bind-address"),
    ],
)
def test_a_busy_port_exits_2_with_one_line_naming_the_flag(
    command: str, flag: str, busy_port: int, unreachable_kubeconfig: Path
) -> None:
    other = PORT_FLAGS[1 - PORT_FLAGS.index(flag)]  # free: may bind first, says nothing
    argv = [command, f"--kubeconfig={unreachable_kubeconfig}", f"{other}=127.0.0.1:0"]
    argv += [f"{flag}=127.0.0.1:{busy_port}"]
    if command == "controller":
        argv += ["--iface=lo", "--node-name=hygiene"]
    result = run_eipctl(*argv)
    assert result.returncode == 2, result.stderr
    expected = f"eipctl {command}: error: {flag}: 127.0.0.1:{busy_port} is already in use\n"
    assert one_line(result.stderr) == expected


# (c) EIPCTL_CONFIG


def test_eipctl_config_names_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "eipctl.yaml"
    config.write_text("scheduler:\n  policy: single\n")
    monkeypatch.setenv("EIPCTL_CONFIG", str(config))
    settings = settings_of("scheduler")
    assert isinstance(settings, SchedulerSettings)
    assert settings.policy == "single"
    assert settings.config == str(config)


def test_the_config_flag_beats_eipctl_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_env, from_flag = tmp_path / "env.yaml", tmp_path / "flag.yaml"
    from_env.write_text("policy: single\n")
    from_flag.write_text("policy: all\n")
    monkeypatch.setenv("EIPCTL_CONFIG", str(from_env))
    settings = settings_of("scheduler", "--config", str(from_flag))
    assert isinstance(settings, SchedulerSettings)
    assert settings.policy == "all"


def test_an_unreadable_eipctl_config_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EIPCTL_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(SettingsError, match=r"^--config: cannot read .*EIPCTL_CONFIG"):
        settings_of("scheduler")


# (d) keys of the config file that no command reads


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "eipctl.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fence-timout: 2s\n", "unknown key 'fence-timout' (did you mean 'fence-timeout'?)"),
        (
            "scheduler:\n  liveness-timout: 2s\n",
            "unknown key 'liveness-timout' in section 'scheduler'",
        ),
        ("scheduler:\n  iface: eth1\n", "unknown key 'iface' in section 'scheduler'"),
        ("schedular:\n  policy: all\n", "unknown key 'schedular' (did you mean 'scheduler'?)"),
        ("scheduler: all\n", "section 'scheduler' must be a mapping"),
        ("controller:\n  iface: eth0\nallocator:\n  polcy: x\n", "'polcy' in section 'allocator'"),
    ],
)
def test_unknown_config_keys_are_refused(tmp_path: Path, text: str, message: str) -> None:
    config = write_config(tmp_path, text)
    with pytest.raises(SettingsError) as caught:
        settings_of("scheduler", "--config", str(config))
    assert str(caught.value).startswith(f"--config: {config}: ")
    assert message in str(caught.value)


def test_a_key_of_another_command_is_fine_at_top_level(tmp_path: Path) -> None:
    """One file serves every process: `iface` is the controller's, the scheduler skips it."""
    config = write_config(tmp_path, "iface: eth1\npolicy: single\nworkers: 3\n")
    scheduler = settings_of("scheduler", "--config", str(config))
    controller = settings_of("controller", "--config", str(config))
    assert isinstance(scheduler, SchedulerSettings) and scheduler.policy == "single"
    assert isinstance(controller, ControllerSettings) and controller.iface == "eth1"


def test_an_empty_key_or_section_leaves_the_defaults(tmp_path: Path) -> None:
    config = write_config(tmp_path, "liveness-timeout:\nscheduler:\n  # policy: all\n")
    settings = settings_of("scheduler", "--config", str(config))
    assert isinstance(settings, SchedulerSettings)
    assert (settings.liveness_timeout, settings.policy) == (0.4, "spread")


def test_an_unknown_config_key_exits_2_with_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, "log-level: info\nfence-timout: 2s\n")
    result = run_eipctl("controller", "--config", str(config))
    assert result.returncode == 2, result.stderr
    assert one_line(result.stderr).startswith(
        f"eipctl controller: error: --config: {config}: unknown key 'fence-timout'"
    )


# (e) values that start with a dash


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["scheduler", "--liveness-timeout", "-1s"],
            "--liveness-timeout: duration '-1s' must not be",
        ),
        (["controller", "--fence-timeout", "-1s"], "--fence-timeout: duration '-1s' must not be"),
        (["controller", "--node-timeout", "-1s"], "--node-timeout: duration '-1s' must not be"),
        (["allocator", "--lease-duration", "-2s"], "--lease-duration: duration '-2s' must not"),
        (
            ["nodeips", "--node-min-reconciliation-interval", "-1m"],
            "--node-min-reconciliation-interval: duration '-1m' must not be negative",
        ),
        (["sandbox", "--duration", "-5s"], "--duration: duration '-5s' must not be negative"),
        (["scheduler", "--workers", "-3"], "--workers: -3 is out of range"),
    ],
)
def test_a_negative_looking_value_reaches_its_parser(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = one_line(capsys.readouterr().err)
    assert err.startswith(f"eipctl {argv[0]}: error: {message}")


def test_a_flag_without_its_value_is_still_an_argparse_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["scheduler", "--liveness-timeout", "--policy", "all"])
    assert exit_.value.code == 2
    assert "--liveness-timeout: expected one argument" in capsys.readouterr().err


def test_no_kubeconfig_anywhere_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """Not in a cluster, no --kubeconfig, no ~/.kube/config: say so, don't crash."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    env["HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "eipctl", "scheduler", "--metrics-bind-address", "0",
         "--health-probe-bind-address", "0", "--log-level", "error"],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "eipctl scheduler: error: --kubeconfig: no kubeconfig: not in a cluster, and "
        "~/.kube/config does not exist (give --kubeconfig)"
    ]
