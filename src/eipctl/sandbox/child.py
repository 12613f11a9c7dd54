"""`python -m eipctl.sandbox.child PARENT_PID COMMAND [FLAGS]`: a sandbox child process.

Becomes ``python -m eipctl COMMAND [FLAGS]`` (execv: same process, the setting survives it)
after asking Linux to SIGKILL it when its parent dies (PR_SET_PDEATHSIG), so a sandbox that
is itself killed with SIGKILL leaves nothing behind. Doing this here rather than in a
``preexec_fn`` keeps the fork in the (threaded) parent free of Python code. If the parent is
already gone by the time this runs, exit at once. An exec rather than an import of the CLI:
the sandbox runs eipctl's commands as programs, and the CLI, which starts the sandbox, stays
the one layer above it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> bool:
    """Arm PR_SET_PDEATHSIG; False when the parent has already gone (we were re-parented)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return os.getppid() == parent_pid


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        sys.stderr.write("usage: python -m eipctl.sandbox.child PARENT_PID COMMAND [FLAGS]\n")
        return 2
    if not die_with_parent(int(argv[0])):
        return 1
    os.execv(sys.executable, [sys.executable, "-m", "eipctl", *argv[1:]])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
