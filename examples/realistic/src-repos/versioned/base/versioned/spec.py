"""Version requirements such as ``">=1.2.0, <2.0.0"``."""

from __future__ import annotations

import operator
import re

from .core import Version, parse

_OPERATORS = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_CLAUSE = re.compile(r"\s*(>=|<=|==|!=|>|<)\s*(\S+)\s*")


def satisfies(version: "Version | str", requirement: str) -> bool:
    """Whether ``version`` meets every comma-separated clause of ``requirement``."""
    if isinstance(version, str):
        version = parse(version)
    for clause in requirement.split(","):
        match = _CLAUSE.fullmatch(clause)
        if match is None:
            raise ValueError(f"not a requirement clause: {clause.strip()!r}")
        op, target = match.groups()
        if not _OPERATORS[op](version, parse(target)):
            return False
    return True
