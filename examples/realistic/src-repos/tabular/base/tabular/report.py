"""Grouped totals with a footer, printed for people."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from typing import Dict, List, Optional, Sequence, TextIO

from .render import Record, render


def _now() -> datetime:
    return datetime.now(timezone.utc)


def summarize(records: Sequence[Record], key: str, value: str) -> List[Dict[str, object]]:
    """One record per distinct ``key``: its ``value`` total and record count, by key."""
    totals: Dict[object, float] = {}
    counts: Dict[object, int] = {}
    for record in records:
        group = record[key]
        totals[group] = totals.get(group, 0) + record[value]
        counts[group] = counts.get(group, 0) + 1
    return [
        {key: group, value: totals[group], "count": counts[group]}
        for group in sorted(totals, key=str)
    ]


def print_report(
    records: Sequence[Record],
    key: str,
    value: str,
    *,
    title: Optional[str] = None,
    out: Optional[TextIO] = None,
) -> None:
    """Print the totals of ``value`` per ``key`` as a table with a footer."""
    out = out if out is not None else sys.stdout
    if title:
        out.write(f"{title}\n\n")
    out.write(render(summarize(records, key, value)) + "\n")
    stamp = _now().strftime("%Y-%m-%d %H:%M UTC")
    out.write(f"\n{len(records)} records, generated {stamp}\n")
