"""Structured logging: one line per decision, key=value (text) or JSON, on stderr."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import TextIO, cast

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
_LEVELS["error"] = logging.ERROR


def configure_logging(fmt: str = "text", level: str = "info", component: str = "") -> None:
    """Configure structlog for the process; stdlib loggers (aiohttp, asyncio) go the same way."""
    numeric = _LEVELS.get(level, logging.INFO)
    renderer: structlog.types.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.processors.KeyValueRenderer(
            key_order=["ts", "level", "component", "event"], drop_missing=True
        )
    processors: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", key="ts"),
    ]
    if component:
        processors.append(_add_component(component))
    processors += [structlog.processors.format_exc_info, renderer]
    stream = cast(TextIO, DroppingStream(sys.stderr))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=stream, force=True)


class DroppingStream:
    """Writes to `stream`, dropping what cannot be written instead of raising.

    A log line must never fail its caller: with stderr piped into `head`, a raising write
    broke the signal handler and the process could not be stopped. Once the reader has gone
    (EPIPE) the descriptor is pointed at /dev/null, so bytes left in the stream's buffer do
    not fail the interpreter's final flush (exit status 120) either.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            self._stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
        except (OSError, ValueError):  # ValueError: the stream was closed
            pass
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()
        except (OSError, ValueError):
            pass

    def _to_devnull(self) -> None:
        with contextlib.suppress(AttributeError, OSError, ValueError):  # no descriptor: drop
            fd = self._stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, fd)
            finally:
                os.close(devnull)
            self._stream.flush()  # the stuck bytes go to /dev/null


def _add_component(component: str) -> structlog.types.Processor:
    def add(
        _logger: object, _name: str, event: structlog.types.EventDict
    ) -> structlog.types.EventDict:
        event.setdefault("component", component)
        return event

    return add
