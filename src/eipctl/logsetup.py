"""Structured logging: one line per decision, key=value (text) or JSON, on stderr."""

from __future__ import annotations

import logging
import sys

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
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr, force=True)


def _add_component(component: str) -> structlog.types.Processor:
    def add(
        _logger: object, _name: str, event: structlog.types.EventDict
    ) -> structlog.types.EventDict:
        event.setdefault("component", component)
        return event

    return add
