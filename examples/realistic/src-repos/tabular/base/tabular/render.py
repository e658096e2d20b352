"""Turning records (dicts) into text tables."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence

from tabulate import tabulate

from .config import table_style

Record = Mapping[str, Any]


def columns_of(records: Sequence[Record]) -> List[str]:
    """Column names for ``records``, in the order they first appear."""
    if not records:
        return []
    return list(records[0].keys())


def render(
    records: Sequence[Record],
    columns: Optional[Sequence[str]] = None,
    *,
    floatfmt: str = ".2f",
) -> str:
    """A table of ``records``; a record without a column shows an empty cell."""
    names = list(columns) if columns is not None else columns_of(records)
    rows = [[record.get(name) for name in names] for record in records]
    return tabulate(rows, headers=names, tablefmt=table_style(), floatfmt=floatfmt, missingval="")
