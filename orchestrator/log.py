"""structlog set-up: a console renderer on a terminal, JSON lines elsewhere.

``configure()`` is called by the command line, never at import time. Per-trial
context is bound with ``structlog.contextvars.bound_contextvars(trial_id=...)``.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure(level: str = "INFO", json: bool | None = None) -> None:
    """Configure structlog once for this process; ``json`` defaults to "not a terminal"."""
    if json is None:
        json = not sys.stderr.isatty()
    renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A logger carrying ``component=name``."""
    return structlog.get_logger().bind(component=name)
