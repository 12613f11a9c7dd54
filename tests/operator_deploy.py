"""deploy/ as a fresh clone has it, for the tests that install it (e2e and integration)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
OLD_KEY_FILE = "liveness.key"  # an older install's key file (deploy/.gitignore): never copied


def deploy_checkout(where: Path) -> Path:
    """A copy of deploy/ under `where` holding what a clone of this tree holds: the files git
    tracks (their content in the working tree), and nothing written before applying it. An
    untracked file (an older install's deploy/liveness.key) is not copied. Outside a git
    checkout, deploy/ without that file."""
    copy = where / "deploy"
    try:
        listed = subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-z", "--", "deploy"],
            check=True,
            capture_output=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(DEPLOY, copy, ignore=shutil.ignore_patterns(OLD_KEY_FILE, "__pycache__"))
        return copy
    for name in filter(None, listed.split("\0")):
        target = where / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    return copy
