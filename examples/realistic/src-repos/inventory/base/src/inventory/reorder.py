"""Reorder suggestions: which SKUs to buy again, and how many units."""

from __future__ import annotations

from typing import List, Mapping, NamedTuple

from .stock import Warehouse


class ReorderLine(NamedTuple):
    sku: str
    level: int
    order_qty: int


def reorder_report(
    warehouse: Warehouse,
    points: Mapping[str, int],
    *,
    default_point: int = 0,
    batch: int = 1,
) -> List[ReorderLine]:
    """One line per SKU at or below its reorder point, sorted by SKU.

    A SKU's reorder point comes from ``points`` (``default_point`` when it is
    not listed). The suggested quantity brings the level back up to twice the
    reorder point, in whole batches of ``batch`` units (suppliers sell by the
    box).
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    lines = []
    for sku in warehouse.skus():
        point = points.get(sku, default_point)
        level = warehouse.level(sku)
        if level > point:
            continue
        missing = 2 * point - level
        order_qty = missing // batch * batch
        lines.append(ReorderLine(sku, level, order_qty))
    return lines
