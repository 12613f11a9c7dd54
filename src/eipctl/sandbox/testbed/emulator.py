"""The API emulator as the bed runs it: its process and its admin endpoint (`/_emulator/`).

Admin calls retry only where a real client would. A refused connection never reached the
server (the API is restarting), so any call is tried again until its deadline; a connection
reset or closed before the answer may have been served, so only a read (GET) is tried again,
and a POST fails at once. Nothing is retried once the emulator process has exited: the error
then says how it exited and ends with its last log lines.

`restart()` returns once the restarted server answers: the restart generation that
`/_emulator/state` reports has moved past the one the restart was asked from. An old listener
still finishing its answers reports the old generation, so it cannot be mistaken for the new.
"""

from __future__ import annotations

import collections
import http.client
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from eipctl.sandbox.testbed.processes import Process, wait_for

ADMIN_DEADLINE = 20.0  # seconds an admin call may keep meeting a restarting API
REFUSED, RESET, TIMED_OUT, FAILED = "refused", "reset", "timed out", "failed"


class AdminError(RuntimeError):
    """An admin call that failed; the message says the call, the failure, how long it was
    tried and how the emulator process is. `kind` is refused, reset, timed out, failed or
    http."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class Emulator:
    """`python -m kubemu` in the bed's run directory, and its admin calls."""

    def __init__(self, run_dir: Path, crds: Path | None = None) -> None:
        self.kubeconfig = run_dir / "kubeconfig"
        argv = [sys.executable, "-m", "kubemu", "--port", "0"]
        argv += ["--kubeconfig-out", str(self.kubeconfig)]
        argv += ["--crds", str(crds)] if crds is not None else []
        argv += ["--bookmark-interval", "1", "--history-window", "5000"]
        self.process = Process("apiserver", argv, run_dir)
        self.url = ""
        self.retried: collections.Counter[str] = collections.Counter()  # "GET state refused": n

    def start(self, timeout: float = 20.0) -> None:
        self.process.start()
        self.url = str(
            wait_for(
                lambda: server_in(self.kubeconfig), timeout, what="the API emulator's kubeconfig"
            )
        )
        wait_for(self.ready, timeout, what="the API emulator to answer")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=1):
                return True
        except OSError:
            return False

    # ---- admin calls ----

    def state(self, deadline: float = ADMIN_DEADLINE) -> dict[str, Any]:
        """GET /_emulator/state: revision, compaction point, watchers, restart generation."""
        return self.call("GET", "state", deadline=deadline)

    def post(
        self, what: str, body: dict[str, Any], deadline: float = ADMIN_DEADLINE
    ) -> dict[str, Any]:
        return self.call("POST", what, body, deadline=deadline)

    def drop_watches(self) -> int:
        return int(self.post("faults", {"drop_watches": True}).get("closed", 0) or 0)

    def restart(self, timeout: float = ADMIN_DEADLINE) -> int:
        """The API server restarts (every connection drops, the data stays); returns once the
        restarted server answers, with its restart generation."""
        started = time.monotonic()
        before = int(self.state(deadline=timeout)["generation"])
        try:
            before = int(self.post("restart", {}, deadline=timeout)["generation"])
        except AdminError as err:
            if err.kind != RESET:
                raise
            # the answer was lost: whether the restart began, the generation will tell

        def moved() -> int | None:
            left = max(0.0, timeout - (time.monotonic() - started))
            generation = int(self.state(deadline=left)["generation"])
            return generation if generation > before else None

        return int(
            wait_for(
                moved,
                timeout,
                interval=0.02,
                what=f"the emulator's restart generation to move past {before}",
            )
        )

    def call(
        self,
        method: str,
        what: str,
        body: dict[str, Any] | None = None,
        deadline: float = ADMIN_DEADLINE,
    ) -> dict[str, Any]:
        """One admin call, retried while the API restarts where a real client would."""
        label = f"{method} /_emulator/{what}" + (f" {json.dumps(body)}" if body else "")
        started = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            try:
                return self._once(method, what, body)
            except urllib.error.HTTPError as exc:  # an answer, not a connection failure
                text = exc.read().decode(errors="replace")[:200]
                raise AdminError(f"{label}: HTTP {exc.code} {text}", "http") from exc
            except (OSError, http.client.HTTPException) as exc:
                kind = failure_kind(exc)
                waited = time.monotonic() - started
                again = kind == REFUSED or (method == "GET" and kind in (RESET, TIMED_OUT))
                if not again or waited >= deadline or not self.process.alive:
                    raise AdminError(
                        f"{label}: connection {kind} ({exc}) after {attempts} attempt(s) in "
                        f"{waited:.1f}s (deadline {deadline:.0f}s); {self.describe()}",
                        kind,
                    ) from exc
                self.retried[f"{method} {what} {kind}"] += 1
                time.sleep(min(0.02 * attempts, 0.25))

    def _once(self, method: str, what: str, body: dict[str, Any] | None) -> dict[str, Any]:
        req = urllib.request.Request(
            f"{self.url}/_emulator/{what}",
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json"},
            method=method,
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return dict(json.loads(resp.read() or b"{}"))

    def describe(self, lines: int = 15) -> str:
        """How the emulator process is: running, or how it exited and its last log lines."""
        proc = self.process
        if proc.alive:
            return f"the emulator runs (pid {proc.pid}, {self.url})"
        code = proc.popen.returncode if proc.popen is not None else None
        return (
            f"the emulator exited with status {code}; the end of {proc.log_path}:\n"
            + proc.log_tail(lines)
        )


def failure_kind(exc: BaseException) -> str:
    """refused, reset (also closed before or during the answer), timed out, or failed."""
    cause: object = exc
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        cause = exc.reason
    if isinstance(cause, ConnectionRefusedError):
        return REFUSED
    resets = (
        ConnectionResetError,
        ConnectionAbortedError,
        BrokenPipeError,
        http.client.HTTPException,
    )
    if isinstance(cause, resets):
        return RESET  # RemoteDisconnected (closed before the answer), IncompleteRead (during)
    if isinstance(cause, TimeoutError):
        return TIMED_OUT
    return FAILED


def server_in(kubeconfig: Path) -> str | None:
    """The server URL of a kubeconfig, once the file is completely written."""
    try:
        doc = yaml.safe_load(kubeconfig.read_text())
        return str(doc["clusters"][0]["cluster"]["server"])
    except (OSError, yaml.YAMLError, TypeError, KeyError, IndexError):
        return None
