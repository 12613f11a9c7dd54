"""A log line that cannot be written is dropped: logging never raises into the caller."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import pytest
import structlog

from eipctl.runtime.logsetup import configure_logging


class ClosedPipe:
    """A text stream whose reader has gone: every write and flush fails."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.attempts = 0

    def write(self, _text: str) -> int:
        self.attempts += 1
        raise self.error

    def flush(self) -> None:
        raise self.error


@pytest.mark.parametrize(
    "error", [BrokenPipeError(32, "Broken pipe"), ValueError("I/O operation on closed file")]
)
def test_structlog_and_stdlib_lines_on_a_broken_stderr_are_dropped(
    error: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = ClosedPipe(error)
    monkeypatch.setattr(sys, "stderr", stream)
    configure_logging("text", "info", "test")
    structlog.get_logger("t").info("still.running", n=1)
    structlog.get_logger("t").error("still.running", n=2)
    logging.getLogger("aiohttp.test").error("stdlib too")
    assert stream.attempts >= 1  # it was tried, then dropped


def test_a_broken_pipe_is_swapped_for_devnull_so_exit_does_not_fail_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bytes stuck in the buffer would fail the interpreter's final flush (exit status 120)."""
    read_end, write_end = os.pipe()
    stream: Any = os.fdopen(write_end, "w", buffering=1)
    os.close(read_end)
    try:
        monkeypatch.setattr(sys, "stderr", stream)
        configure_logging("json", "info", "test")
        for n in range(3):
            structlog.get_logger("t").info("line", n=n)
        stream.flush()  # what interpreter shutdown does: must not raise
        # the descriptor behind stderr now writes to /dev/null, not to the broken pipe
        assert os.readlink(f"/proc/self/fd/{stream.fileno()}") == os.devnull
    finally:
        stream.close()


def test_lines_still_reach_a_working_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("text", "info", "test")
    structlog.get_logger("t").info("hello", who="operator")
    err = capsys.readouterr().err
    assert "event='hello'" in err and "who='operator'" in err and "component='test'" in err
