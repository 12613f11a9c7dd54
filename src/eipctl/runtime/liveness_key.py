"""Waiting for the liveness key file (`--liveness-key-file`) instead of crash-looping.

deploy/ mounts the Secret `eipctl-liveness` with ``optional: true``: on a fresh install the
Secret does not exist yet (a scheduler creates it, `scheduler.liveness_secret`), the pod
starts with an empty volume, and the kubelet writes the file at its next sync of the pod
(within a minute or so) once the Secret exists. So the scheduler and the controller look for
the file every `POLL` seconds until it holds a keyring, not ready meanwhile (/readyz names
the file) and alive (/healthz passes: no restart loop). A file that holds no usable keyring
(the operator's edit gone wrong) is an error, logged once per distinct error, and waited on
the same way. The file is read once: a changed key needs new pods (docs/operations.md,
"Rotating the key").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import structlog

from eipctl.core.liveness_wire import Keyring

log = structlog.get_logger(__name__)

POLL: Final = 1.0
"""Seconds between two looks at a key file that is missing or holds no keyring."""


class KeyFile:
    """The key file at ``path``, as the process waits for it (`wait`)."""

    def __init__(self, path: str, *, poll: float = POLL) -> None:
        self.path = path
        self._poll = poll
        self._why: str | None = "not read yet"

    def not_ready(self) -> str | None:
        """Why there is no keyring yet (a readiness reason), None once there is one."""
        return self._why

    def read(self) -> Keyring | str:
        """The keyring in the file, or why there is none (missing, unreadable, invalid)."""
        try:
            text = Path(self.path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return "missing"
        except (OSError, UnicodeDecodeError) as exc:
            return f"unreadable: {exc}"
        try:
            return Keyring.from_text(text)
        except ValueError as exc:
            return f"invalid: {exc}"

    async def wait(
        self, stop: asyncio.Event, *, while_missing: Callable[[], Awaitable[object]] | None = None
    ) -> Keyring | None:
        """The keyring once the file holds one; None if ``stop`` is set first. The first
        time the file is found missing, ``while_missing`` starts (the scheduler's creation
        of the Secret) and runs until the keyring is read or stop."""
        started, told = time.monotonic(), ""
        helper: asyncio.Task[object] | None = None
        try:
            while True:
                found = self.read()
                if isinstance(found, Keyring):
                    self._why = None
                    if told:
                        log.info(
                            "liveness.key_read",
                            path=self.path,
                            waited=round(time.monotonic() - started, 1),
                        )
                    return found
                self._why = f"{self.path}: {found}"
                if found != told:
                    told = found
                    self._tell(found)
                if found == "missing" and helper is None and while_missing is not None:
                    helper = asyncio.ensure_future(while_missing())
                try:
                    await asyncio.wait_for(stop.wait(), self._poll)
                except TimeoutError:
                    continue
                return None
        finally:
            if helper is not None:
                helper.cancel()
                (failed,) = await asyncio.gather(helper, return_exceptions=True)
                if isinstance(failed, Exception):
                    log.error("liveness.key_helper_failed", error=repr(failed))

    def _tell(self, found: str) -> None:
        if found == "missing":
            log.warning(
                "liveness.key_waiting",
                path=self.path,
                detail="no key file yet: the Secret eipctl-liveness does not exist yet (a "
                "scheduler creates it) or the kubelet has not written it into the pod yet "
                "(within a minute or so); not ready until then",
            )
        else:
            log.error(
                "liveness.key_invalid",
                path=self.path,
                error=found,
                detail="the file holds no usable key (docs/operations.md, 'The key'); "
                "waiting for a fixed one, not ready until then",
            )
