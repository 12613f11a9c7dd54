"""The bed's run directory: never one a kept run of a reused PID left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eipctl.sandbox.testbed.state import RUN_PREFIX, BedState


def test_a_run_directory_left_by_a_reused_pid_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(1000):  # what earlier processes with this PID kept
        (tmp_path / f"{RUN_PREFIX}{os.getpid()}-{n}").mkdir()
    monkeypatch.setenv("EIPCTL_E2E_RUN_DIR", str(tmp_path))
    run_dir = BedState().run_dir
    assert run_dir.parent == tmp_path
    assert run_dir.name.startswith(f"{RUN_PREFIX}{os.getpid()}-")
    assert not run_dir.exists()
