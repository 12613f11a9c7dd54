"""The CLI as a user meets it: help, precedence of flag > env > file > default, exit 2 on bad values."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eipctl.cli.main import build_parser, build_settings, main
from eipctl.nodeips.settings import NodeIpsSettings
from eipctl.runtime.config import AllocatorSettings, ControllerSettings, SchedulerSettings
from eipctl.runtime.settings import Deprecation, SettingsError


def settings_for(argv: list[str], monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> object:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    args = build_parser().parse_args(argv)
    return build_settings(SchedulerSettings, args, "scheduler")


def test_only_the_scheduler_pays_for_a_short_lease(capsys: pytest.CaptureFixture[str]) -> None:
    """Its 1 s Lease is in the failover budget; the allocator's and nodeips' are client-go's,
    and each process's --help states its own."""
    timings = {
        cls: (s.lease_duration, s.renew_deadline, s.retry_period)
        for cls in (SchedulerSettings, AllocatorSettings, NodeIpsSettings)
        for s in [cls()]
    }
    assert timings == {
        SchedulerSettings: (1.0, 0.8, 0.2),
        AllocatorSettings: (15.0, 10.0, 2.0),
        NodeIpsSettings: (15.0, 10.0, 2.0),
    }
    for command, default in (("scheduler", "1s"), ("allocator", "15s"), ("nodeips", "15s")):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        start = text.index("--lease-duration DURATION how long")
        assert f"(default: '{default}';" in text[start : text.index("--renew-deadline D", start)]
    args = build_parser().parse_args(["allocator", "--retry-period", "1s"])
    allocator = build_settings(AllocatorSettings, args, "allocator")
    assert isinstance(allocator, AllocatorSettings)
    assert (allocator.lease_duration, allocator.retry_period) == (15.0, 1.0)


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_for(["scheduler"], monkeypatch, {})
    assert isinstance(settings, SchedulerSettings)
    assert settings.policy == "spread"
    assert settings.liveness_timeout == 0.4
    assert settings.lease_duration > settings.renew_deadline > settings.retry_period


def test_precedence_flag_over_env_over_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "eipctl.yaml"
    config.write_text(
        "liveness-timeout: 5s\npolicy: single\nworkers: 7\n"
        "scheduler:\n  workers: 9\nallocator:\n  workers: 1\n"
    )
    settings = settings_for(
        ["scheduler", "--config", str(config), "--policy", "all"],
        monkeypatch,
        {"EIPCTL_LIVENESS_TIMEOUT": "3s", "EIPCTL_POLICY": "spread"},
    )
    assert isinstance(settings, SchedulerSettings)
    assert settings.policy == "all"  # flag beats env and file
    assert settings.liveness_timeout == 3.0  # env beats file
    assert settings.workers == 9  # the command's own section beats top-level keys
    assert settings.retry_period == 0.2  # default


# --- --node-timeout: one name had two meanings (#33) --------------------------------------
def both(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> tuple[SchedulerSettings, ControllerSettings, list[Deprecation]]:
    """The scheduler's and the controller's settings from the same flags and environment."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    told: list[Deprecation] = []
    parser = build_parser()
    scheduler = build_settings(
        SchedulerSettings, parser.parse_args(["scheduler", *argv]), "scheduler", told
    )
    controller = build_settings(
        ControllerSettings, parser.parse_args(["controller", *argv]), "controller", told
    )
    return scheduler, controller, told


def test_each_timeout_has_its_own_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler's liveness timeout and the controller's fence timeout are two names; a
    top-level key of one is not read by the other command."""
    config = tmp_path / "eipctl.yaml"
    config.write_text("liveness-timeout: 600ms\nfence-timeout: 3s\n")
    scheduler, controller, told = both(["--config", str(config)], monkeypatch, {})
    assert (scheduler.liveness_timeout, controller.fence_timeout) == (0.6, 3.0)
    assert told == []


@pytest.mark.parametrize(
    ("argv", "env", "config", "source"),
    [
        (["--node-timeout", "2s"], {}, "", "command line"),
        ([], {"EIPCTL_NODE_TIMEOUT": "2s"}, "", "environment EIPCTL_NODE_TIMEOUT"),
        ([], {}, "node-timeout: 2s\n", "config file key 'node-timeout'"),
    ],
    ids=["flag", "env", "config"],
)
def test_the_old_name_still_works_for_a_release_and_is_told(
    argv: list[str],
    env: dict[str, str],
    config: str,
    source: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--node-timeout` (flag, EIPCTL_NODE_TIMEOUT or a config key) still sets what it set:
    the scheduler's liveness timeout and the controller's fence timeout, each told once."""
    if config:
        path = tmp_path / "eipctl.yaml"
        path.write_text(config)
        argv = [*argv, "--config", str(path)]
    scheduler, controller, told = both(argv, monkeypatch, env)
    assert (scheduler.liveness_timeout, controller.fence_timeout) == (2.0, 2.0)
    assert told == [
        Deprecation("node-timeout", "liveness-timeout", source, applied=True),
        Deprecation("node-timeout", "fence-timeout", source, applied=True),
    ]


def test_the_new_name_set_as_firmly_wins_over_the_old(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"EIPCTL_LIVENESS_TIMEOUT": "2s", "EIPCTL_FENCE_TIMEOUT": "4s"}
    scheduler, controller, told = both([], monkeypatch, {**env, "EIPCTL_NODE_TIMEOUT": "3s"})
    assert (scheduler.liveness_timeout, controller.fence_timeout) == (2.0, 4.0)
    assert [d.applied for d in told] == [False, False]
    assert "ignored: --liveness-timeout is set too and wins" in told[0].text
    _, controller, _ = both(["--node-timeout", "5s"], monkeypatch, {})
    assert controller.fence_timeout == 5.0  # the old name on the command line beats the env


def test_bool_flag_without_value_means_true(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_for(["scheduler", "--rebalance"], monkeypatch, {})
    assert isinstance(settings, SchedulerSettings)
    assert settings.rebalance is True


def test_error_names_flag_and_source(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(
        SettingsError, match=r"--liveness-timeout: invalid duration '10x'.*EIPCTL_LIVENESS_TIMEOUT"
    ):
        settings_for(["scheduler"], monkeypatch, {"EIPCTL_LIVENESS_TIMEOUT": "10x"})


def test_unsafe_lease_timings_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError, match="renew-deadline"):
        settings_for(["scheduler", "--renew-deadline", "2s"], monkeypatch, {})


def test_lease_settings_reach_the_elector(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["scheduler", "--lease-namespace", "ops", "--identity", "me", "--lease-duration", "3s"]
    settings = settings_for(argv, monkeypatch, {})
    assert isinstance(settings, SchedulerSettings)
    config = settings.election("eipctl-scheduler")
    assert (config.lease_name, config.namespace, config.identity) == (
        "eipctl-scheduler",
        "ops",
        "me",
    )
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (
        3.0,
        settings.renew_deadline,
        settings.retry_period,
    )


def test_controller_refuses_api_checks_slower_than_half_the_timeout() -> None:
    args = build_parser().parse_args(["controller", "--api-check-interval", "2s"])
    with pytest.raises(SettingsError, match="api-check-interval"):
        build_settings(ControllerSettings, args, "controller")


def test_a_crashed_holders_address_expires_before_the_new_holders_last_announcement() -> None:
    """Defaults, docs/failover-tuning.md case E: the new holder adds no sooner than the
    scheduler's timeout minus one probe interval after the crash, and announces for
    (count - 1) x interval more; the old kernel's copy lives at most the lifetime (rounded up
    to whole seconds) plus ~0.3 s of kernel granularity. A neighbour that resolved the IP
    from the crashed node meanwhile must still hear the last announcement."""
    controller = build_settings(
        ControllerSettings, build_parser().parse_args(["controller"]), "controller"
    )
    scheduler = build_settings(
        SchedulerSettings, build_parser().parse_args(["scheduler"]), "scheduler"
    )
    assert isinstance(controller, ControllerSettings)
    assert isinstance(scheduler, SchedulerSettings)
    old_copy_gone = math.ceil(controller.address_lifetime) + 0.3
    earliest_add = scheduler.liveness_timeout - scheduler.liveness_interval
    last_announcement = earliest_add + (
        (controller.announce_count - 1) * controller.announce_interval
    )
    assert old_copy_gone < last_announcement


def test_the_address_lifetime_may_be_shorter_than_the_fence_timeout() -> None:
    """Renewals go on until the fence falls, so the two are independent."""
    args = build_parser().parse_args(["controller", "--address-lifetime", "1s"])
    settings = build_settings(ControllerSettings, args, "controller")
    assert isinstance(settings, ControllerSettings)
    assert settings.address_lifetime < settings.fence_timeout


@pytest.mark.parametrize("command", ["controller", "scheduler"])
def test_liveness_needs_a_key(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EIPCTL_LIVENESS_KEY_FILE")
    args = build_parser().parse_args([command])
    settings = ControllerSettings if command == "controller" else SchedulerSettings
    with pytest.raises(SettingsError, match="--liveness-key-file is required"):
        build_settings(settings, args, command)


def test_scheduler_refuses_a_timeout_of_two_probe_intervals() -> None:
    args = build_parser().parse_args(["scheduler", "--liveness-interval", "200ms"])
    with pytest.raises(SettingsError, match="more than twice"):
        build_settings(SchedulerSettings, args, "scheduler")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["scheduler", "--policy", "roundrobin"], "--policy: invalid choice 'roundrobin'"),
        (["scheduler", "--liveness-timeout", "10x"], "--liveness-timeout: invalid duration '10x'"),
        (["controller", "--resync-interval=-5s"], "--resync-interval: duration '-5s' must not"),
        (["allocator", "--workers", "0"], "--workers: 0 is out of range"),
    ],
)
def test_bad_values_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_each_command_shows_only_its_own_flags() -> None:
    helps = {}
    for command in ("scheduler", "controller", "allocator", "sandbox"):
        out = subprocess.run(
            [sys.executable, "-m", "eipctl", command, "--help"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        helps[command] = out
    assert "--policy" in helps["scheduler"] and "--policy" not in helps["controller"]
    assert "--iface" in helps["controller"] and "--iface" not in helps["scheduler"]
    assert "--purge-on-pool-delete" in helps["allocator"]
    assert "--nodes" in helps["sandbox"]
    assert "(default: '400ms'; env EIPCTL_LIVENESS_TIMEOUT)" in " ".join(helps["scheduler"].split())


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith("eipctl ")


class LeftOut:
    """An import finder for which one package is not installed, as in the image."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        if fullname == self.name:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)


@pytest.mark.parametrize("missing", ["eipctl.sandbox", "kubemu"])
def test_sandbox_left_out_of_the_install_is_a_one_line_error(
    missing: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the production image installs neither the sandbox nor the emulator (tools/image)
    for name in [m for m in sys.modules if m.startswith(("eipctl.sandbox", "kubemu"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [LeftOut(missing), *sys.meta_path])
    assert main(["sandbox"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eipctl sandbox: error: this eipctl was installed without the sandbox")
    assert err.count("\n") == 1


def test_nothing_is_imported_by_name_to_hide_it_from_the_import_contracts() -> None:
    # import-linter sees import statements only: a module loaded by name could cross a layer
    # unseen. The loads are cli/main.py's of the processes, a layer below it, and
    # kube/lean_import.py's of kubernetes_asyncio's own submodules (no eipctl module).
    src = Path(__file__).resolve().parents[3] / "src"
    by_name = sorted(
        str(p.relative_to(src))
        for p in src.rglob("*.py")
        if "import_module(" in p.read_text() or "__import__(" in p.read_text()
    )
    assert by_name == ["eipctl/cli/main.py", "eipctl/kube/lean_import.py"]
    from eipctl.kube.lean_import import LEAN_EXPORTS

    assert all(package.split(".")[0] == "kubernetes_asyncio" for package in LEAN_EXPORTS)
    from eipctl.cli.main import COMMANDS

    packages = {c.module.split(":")[0].split(".")[1] for c in COMMANDS}
    assert packages == {"allocator", "scheduler", "controller", "nodeips"}


def test_version_is_also_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """#33: `eipctl --version` failed; only `eipctl version` worked."""
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("eipctl ")


def test_identity_help_names_one_default() -> None:
    """#33: `--identity`'s help printed two defaults ("pod name" and this host's name-pid)."""
    out = subprocess.run(
        [sys.executable, "-m", "eipctl", "scheduler", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "POD_NAME": ""},
    ).stdout
    text = " ".join(out.split())
    start = text.index("--identity IDENTITY holder")
    identity = text[start : text.index("--lease-duration", start)]
    assert identity.count("default") == 1, identity
    assert "(default: $POD_NAME, else HOSTNAME-PID; env EIPCTL_IDENTITY)" in identity
