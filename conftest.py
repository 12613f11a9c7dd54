"""Per-test timeouts (pytest-timeout), made to work for asyncio code. See docs/testing.md.

Defaults: `timeout = 60` in pyproject.toml for every test; tests under tests/e2e and
tests/integration (stories, with their own `eventually(...)` deadlines) get `E2E_TIMEOUT`
instead, unless the test carries its own `@pytest.mark.timeout(N)` or the run
gives `--timeout` (or PYTEST_TIMEOUT), which always win.

Why more than pytest-timeout's `signal` method: SIGALRM raises `Failed` in whatever code is
running. A test coroutine that spins fails there, with its traceback. But a hang in a
*background task* (a fence watchdog that never awaits) raises inside that task; the task
dies, the loop runs again, and the test goes on: it may fail later with an unrelated
message, hang again on an unbounded await, or even pass. So the alarm here also records the
stack that was running and fails the test whatever it does next (the stack goes into the
report), and it fires again every `REFIRE` seconds until the test ends.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import traceback
from collections.abc import Generator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

E2E_TIMEOUT = 180.0
"""Default for tests/e2e and tests/integration: the slowest takes ~35 s on a busy 2-core
machine, and their own `eventually(...)` deadlines (up to 60 + 90 s) must be able to fail with
their message first."""

STORY_TIERS = ("e2e", "integration")
"""The test folders whose tests get `E2E_TIMEOUT` (docs/testing.md, the suites)."""

REFIRE = 10.0
"""After a timeout, seconds between further alarms while the test still runs."""

_HUNG = pytest.StashKey[str]()
_REPORTED = pytest.StashKey[bool]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("timeout"):
        return
    if config.getoption("timeout", None) is not None or os.environ.get("PYTEST_TIMEOUT"):
        return  # an explicit timeout for this run wins over the per-suite default
    stories = [config.rootpath / "tests" / tier for tier in STORY_TIERS]
    for item in items:
        path = Path(item.path)
        if item.get_closest_marker("timeout") is None and any(map(path.is_relative_to, stories)):
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT))


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """pytest-timeout's signal timer, plus the record of where it fired and the re-fires."""
    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return None  # pytest-timeout's own implementation (the thread method)

    from pytest_timeout import is_debugging

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        __tracebackhide__ = True
        if not settings.disable_debugger_detection and is_debugging():
            return
        if _HUNG not in item.stash:
            item.stash[_HUNG] = _where(frame)
        signal.setitimer(signal.ITIMER_REAL, REFIRE)
        pytest.fail(f"Timeout (>{settings.timeout}s) from pytest-timeout.")

    def cancel() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel  # pytest-timeout calls it at the end of the test
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    return True


def _where(frame: FrameType | None) -> str:
    """The stack that was running, without pytest's, pluggy's and asyncio's own frames."""
    frames = traceback.extract_stack(frame) if frame is not None else []
    own = [f for f in frames if not any(part in f.filename for part in _NOT_OURS)]
    return "".join(traceback.format_list(own or frames[-10:]))


_NOT_OURS = (
    "/bin/pytest",
    "/pluggy/",
    "/_pytest/",
    "/pytest_asyncio/",
    "/pytest_timeout",
    "/asyncio/",
)


def _is_timeout(excinfo: pytest.ExceptionInfo[BaseException] | None) -> bool:
    return excinfo is not None and str(excinfo.value).startswith("Timeout (>")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    hung = _HUNG in item.stash
    if hung:  # no re-fire while the report is being written (it parses source files)
        signal.setitimer(signal.ITIMER_REAL, 0)
    report = yield
    if hung:
        if not item.stash.get(_REPORTED, False):
            item.stash[_REPORTED] = True
            stack = item.stash[_HUNG]
            message = f"Timeout from pytest-timeout; this was running when it fired:\n{stack}"
            if report.passed:
                report.outcome = "failed"
                report.longrepr = message
            elif not _is_timeout(call.excinfo):  # else the traceback already shows it
                report.sections.append(("timeout: where the test hung", stack))
        signal.setitimer(signal.ITIMER_REAL, REFIRE)
        if report.when == "teardown":
            # The hung task dies holding `Failed`, never retrieved. Collect it now: its
            # __del__ logs a traceback, which calls ast.parse, and on CPython 3.11 an
            # ast.parse nested in another one (GC during pytest's assertion rewriting)
            # fails with "SystemError: AST constructor recursion depth mismatch".
            gc.collect()
    return report
