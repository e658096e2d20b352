"""Stock levels per SKU."""

from __future__ import annotations

from typing import Dict, Iterator, List

from .errors import OutOfStock, UnknownSku


def check_quantity(qty: int) -> None:
    """Raise ``ValueError`` unless ``qty`` is a positive whole number of units."""
    if isinstance(qty, bool) or not isinstance(qty, int) or qty <= 0:
        raise ValueError(f"quantity must be a positive integer, got {qty!r}")


class Warehouse:
    """Units on hand per SKU in one warehouse."""

    def __init__(self, name: str = "main") -> None:
        self.name = name
        self._levels: Dict[str, int] = {}

    def __contains__(self, sku: object) -> bool:
        return sku in self._levels

    def __iter__(self) -> Iterator[str]:
        return iter(self.skus())

    def __len__(self) -> int:
        return len(self._levels)

    def __repr__(self) -> str:
        return f"Warehouse({self.name!r}, skus={len(self)}, units={self.total_units()})"

    def skus(self) -> List[str]:
        """Every SKU the warehouse has stocked, sorted."""
        return sorted(self._levels)

    def level(self, sku: str) -> int:
        """Units of ``sku`` on hand; ``UnknownSku`` if it was never stocked."""
        try:
            return self._levels[sku]
        except KeyError:
            raise UnknownSku(sku) from None

    def add(self, sku: str, qty: int) -> int:
        """Receive ``qty`` units of ``sku``; returns the new level."""
        check_quantity(qty)
        self._levels[sku] = self._levels.get(sku, 0) + qty
        return self._levels[sku]

    def remove(self, sku: str, qty: int) -> int:
        """Ship ``qty`` units of ``sku``; returns the new level.

        ``OutOfStock`` (and no change) when fewer than ``qty`` units are on hand.
        """
        check_quantity(qty)
        current = self.level(sku)
        if qty > current:
            raise OutOfStock(sku, qty, current)
        self._levels[sku] = current - qty
        return self._levels[sku]

    def total_units(self) -> int:
        """Units on hand over all SKUs."""
        return sum(self._levels.values())

    def low_stock(self, threshold: int) -> List[str]:
        """SKUs with at most ``threshold`` units on hand, sorted."""
        return sorted(sku for sku, units in self._levels.items() if units <= threshold)
