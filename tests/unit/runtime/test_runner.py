"""The shared process lifecycle: a signal always stops the process, a busy port is one line."""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from eipctl.runtime import runner
from eipctl.runtime.config import CommonSettings
from eipctl.runtime.health import Health
from eipctl.runtime.settings import Deprecation
from eipctl.runtime.values import BindAddress

OFF = BindAddress("", 0, enabled=False)


def settings(metrics: BindAddress = OFF, probes: BindAddress = OFF) -> CommonSettings:
    return CommonSettings(metrics_bind_address=metrics, health_probe_bind_address=probes)


class UnwritableLog:
    """A logger whose lines cannot be written, as with a closed stderr pipe."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def info(self, event: str, **kw: Any) -> None:
        if event == "signal.received":
            raise BrokenPipeError(32, "Broken pipe")
        self.real.info(event, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def supervise(main: Any, config: CommonSettings | None = None, grace: float = 10.0) -> int:
    async def go() -> int:
        return await asyncio.wait_for(
            runner._supervise("test", config or settings(), main, grace), timeout=5
        )

    return asyncio.run(go())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_process_even_when_its_log_line_fails(
    signum: signal.Signals, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "log", UnwritableLog(runner.log))
    stopped = []

    async def main(_settings: object, *, health: Health, stop: asyncio.Event) -> None:
        signal.raise_signal(signum)
        await stop.wait()
        stopped.append(True)

    assert supervise(main) == 0
    assert stopped == [True]


def test_a_second_signal_cancels_a_process_that_does_not_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner, "log", UnwritableLog(runner.log))

    async def main(_settings: object, *, health: Health, stop: asyncio.Event) -> None:
        signal.raise_signal(signal.SIGTERM)
        await stop.wait()
        signal.raise_signal(signal.SIGTERM)
        await asyncio.sleep(60)  # ignores the stop request

    assert supervise(main) == 0


@pytest.fixture
def busy() -> Iterator[BindAddress]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield BindAddress("127.0.0.1", int(sock.getsockname()[1]))


@pytest.mark.parametrize(
    ("which", "flag"),
    [("metrics", "--metrics-bind-address"), ("probes", "--health-probe-bind-address")],
)
def test_a_busy_port_is_one_line_naming_the_flag_and_main_never_runs(
    which: str, flag: str, busy: BindAddress, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = []

    async def main(_settings: object, *, health: Health, stop: asyncio.Event) -> None:
        ran.append(True)

    config = settings(metrics=busy) if which == "metrics" else settings(probes=busy)
    assert supervise(main, config) == 2
    assert ran == []
    err = capsys.readouterr().err
    assert err == f"eipctl test: error: {flag}: {busy} is already in use\n"


def test_probes_are_closed_when_the_metrics_port_is_busy(busy: BindAddress) -> None:
    """The probe server bound before the metrics one failed is not left listening."""
    free = BindAddress("127.0.0.1", 0)
    health = Health()

    async def go() -> list[int]:
        with pytest.raises(OSError):
            await health.start(metrics=busy, probes=free)
        return health.ports()

    assert asyncio.run(go()) == []


def test_a_flag_given_under_its_old_name_is_one_warning_naming_the_new_one() -> None:
    old = Deprecation("node-timeout", "fence-timeout", "environment EIPCTL_NODE_TIMEOUT", True)
    with structlog.testing.capture_logs() as logs:
        runner.log_deprecations([old])
    [line] = logs
    assert line["event"] == "flag.deprecated" and line["log_level"] == "warning"
    assert (line["flag"], line["replacement"]) == ("--node-timeout", "--fence-timeout")
    assert line["detail"] == (
        "--node-timeout (from environment EIPCTL_NODE_TIMEOUT) is deprecated and will be "
        "removed: its value is used as --fence-timeout; use --fence-timeout "
        "(docs/operations.md, 'Renamed flags')"
    )
