"""Settings read from the environment, at call time."""

from __future__ import annotations

import os

STYLE_VARIABLE = "TABULAR_STYLE"
STYLES = ("github", "grid", "pipe", "plain", "simple")


class ConfigError(RuntimeError):
    """The environment does not say how to render tables."""


def table_style() -> str:
    """The tabulate format named by ``TABULAR_STYLE`` (any case, spaces ignored)."""
    value = os.environ.get(STYLE_VARIABLE)
    if value is None or not value.strip():
        raise ConfigError(
            f"{STYLE_VARIABLE} is not set; set it to one of {', '.join(STYLES)}"
        )
    style = value.strip().lower()
    if style not in STYLES:
        raise ConfigError(
            f"{STYLE_VARIABLE}={value!r} is not a known style; expected one of {', '.join(STYLES)}"
        )
    return style
