"""Single keys in the live view: `1`..`9` kill or revive node-1..node-9, `q` quits.

Only when stdin is a terminal. The terminal goes into cbreak mode (keys arrive one by one,
unechoed; Ctrl-C still sends SIGINT) and is restored when the reader stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import termios
import tty
from collections.abc import Callable
from typing import Any


class KeyReader:
    def __init__(self, fd: int, on_key: Callable[[str], None]) -> None:
        self.fd = fd
        self.on_key = on_key
        self._saved: list[Any] | None = None

    @property
    def active(self) -> bool:
        return self._saved is not None

    def start(self) -> bool:
        """Start reading keys; False (and nothing changed) when `fd` is not a terminal."""
        if self.fd < 0 or not os.isatty(self.fd):
            return False
        self._saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)
        asyncio.get_running_loop().add_reader(self.fd, self._read)
        return True

    def _read(self) -> None:
        try:
            data = os.read(self.fd, 64)
        except OSError:
            data = b""
        if not data:  # the terminal went away
            self.stop()
            return
        for key in data.decode(errors="ignore"):
            self.on_key(key)

    def stop(self) -> None:
        saved, self._saved = self._saved, None
        if saved is None:
            return
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(self.fd)
        with contextlib.suppress(termios.error):
            termios.tcsetattr(self.fd, termios.TCSADRAIN, saved)
