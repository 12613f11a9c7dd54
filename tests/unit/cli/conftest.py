"""Every command here gets a liveness key through its environment variable, as a Secret
mounted into a pod would give it, so that tests of other flags get past that check."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def liveness_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    key = tmp_path / "liveness.key"
    key.write_text("a cli test key of enough length\n")
    monkeypatch.setenv("EIPCTL_LIVENESS_KEY_FILE", str(key))
    return key
