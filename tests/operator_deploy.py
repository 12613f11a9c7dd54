"""deploy/ as an operator has it, for the tests that install it (e2e and integration)."""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
KEY_FILE = "liveness.key"  # the operator writes it; kustomization.yaml makes the Secret of it


def deploy_with_key(where: Path) -> Path:
    """A copy of deploy/ under `where` with a liveness key of its own (`head -c 32
    /dev/urandom | base64`; a local deploy/liveness.key is not copied)."""
    copy = where / "deploy"
    shutil.copytree(DEPLOY, copy, ignore=shutil.ignore_patterns(KEY_FILE))
    (copy / KEY_FILE).write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
    return copy
