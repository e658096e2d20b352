"""structlog set-up: a console renderer on a terminal, JSON lines elsewhere.

``configure()`` is called by the command line, never at import time. Per-trial
context is bound with ``structlog.contextvars.bound_contextvars(trial_id=...)``.

Log fields often carry what an agent influenced (an error's text, a command, a
path), so ``printable_event`` runs before either renderer: every string in the
event dict, keys and nested values included, is made ``printable``, and one log
call stays one line with no escape sequence reaching the terminal. A traceback
(``exc_info``, ``stack``) keeps its own line breaks, each line made printable.
"""

from __future__ import annotations

import logging
import threading
import sys
import traceback
from typing import Any

import structlog

from .textsafe import printable, printable_lines


_LOG_DEPTH = 16
"""Containers in a log value shown this deep; deeper is ``…`` (a value the agent shaped cannot exhaust the
recursion limit of the logger)."""


def _printable_value(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, (dict, list, tuple, set, frozenset)) and depth >= _LOG_DEPTH:
        return "…"
    if isinstance(value, dict):
        return {_printable_value(k, depth + 1): _printable_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable_value(v, depth + 1) for v in value]
    if isinstance(value, (tuple, set, frozenset)):
        return tuple(_printable_value(v, depth + 1) for v in value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return printable(repr(value))  # what either renderer would show of it (an exception's text, a path), made safe


def _exc_text(exc_info: Any) -> str | None:
    if isinstance(exc_info, BaseException):
        exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
    elif not isinstance(exc_info, tuple):
        exc_info = sys.exc_info()
    if exc_info[0] is None:
        return None
    return "".join(traceback.format_exception(*exc_info)).rstrip("\n")


def printable_event(logger: Any, method_name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """A structlog processor: every string of the event (keys too) ``printable``; a traceback formatted here
    (so no renderer prints it raw) with each of its lines printable."""
    out: dict[str, Any] = {}
    for key, value in event_dict.items():
        if key == "exc_info":
            if value and (text := _exc_text(value)) is not None:
                out["exception"] = printable_lines(text)
            continue
        if key in ("exception", "stack") and isinstance(value, str):
            out[key] = printable_lines(value)
            continue
        out[_printable_value(key)] = _printable_value(value)
    return out


class _Route:
    """Where the log's lines go: standard error (looked up when written), or a run's log file (``to_file``), with
    the warnings and errors counted while it is one. Loggers made before a route is set follow it too (they keep
    the configuration they were made with, which writes here)."""

    def __init__(self) -> None:
        self.file: Any = None
        self.warnings = 0
        self.lock = threading.Lock()

    def write(self, text: str) -> None:
        with self.lock:
            (self.file or sys.stderr).write(text)

    def flush(self) -> None:
        with self.lock:
            (self.file or sys.stderr).flush()


_ROUTE = _Route()
_JSON = structlog.processors.JSONRenderer()


def _counted(logger: Any, method_name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    if _ROUTE.file is not None and method_name in ("warning", "warn", "error", "exception", "critical"):
        _ROUTE.warnings += 1
    return event_dict


def configure(level: str = "INFO", json: bool | None = None) -> None:
    """Configure structlog once for this process; ``json`` defaults to "not a terminal"."""
    if json is None:
        json = not sys.stderr.isatty()
    renderer = _JSON if json else structlog.dev.ConsoleRenderer()

    def render(logger: Any, method_name: str, event_dict: dict[str, Any]) -> str:
        return (_JSON if _ROUTE.file is not None else renderer)(logger, method_name, event_dict)

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            printable_event,
            _counted,
            render,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=_ROUTE),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A logger carrying ``component=name``."""
    return structlog.get_logger().bind(component=name)


class to_file:
    """``with to_file(path) as count:`` the log of this process goes to ``path`` (JSON lines, appended) instead of
    standard error, and ``count()`` says how many warnings and errors it took; standard error again after.
    ``trialbox run`` uses it so a warning never lands between the display's lines (``display``)."""

    def __init__(self, path) -> None:
        self.path = path

    def __enter__(self):
        fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  (closed in __exit__)
        with _ROUTE.lock:
            self._before, _ROUTE.file, _ROUTE.warnings = _ROUTE.file, fh, 0
        return lambda: _ROUTE.warnings

    def __exit__(self, *exc: Any) -> None:
        with _ROUTE.lock:
            fh, _ROUTE.file = _ROUTE.file, self._before
        fh.close()
