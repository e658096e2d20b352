"""Holding stock for orders until they ship."""

from __future__ import annotations

from typing import Dict, List, NamedTuple

from .errors import InventoryError, OutOfStock
from .stock import Warehouse, check_quantity


class Reservation(NamedTuple):
    order_id: str
    sku: str
    qty: int


class ReservationBook:
    """Reservations against one warehouse: one reservation per order."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.warehouse = warehouse
        self._held: Dict[str, Reservation] = {}

    def __len__(self) -> int:
        return len(self._held)

    def orders(self) -> List[str]:
        """Order ids holding a reservation, sorted."""
        return sorted(self._held)

    def reserved(self, sku: str) -> int:
        """Units of ``sku`` held for orders."""
        return sum(r.qty for r in self._held.values() if r.sku == sku)

    def available(self, sku: str) -> int:
        """Units of ``sku`` on hand and not held for any order."""
        return self.warehouse.level(sku) - self.reserved(sku)

    def reserve(self, order_id: str, sku: str, qty: int) -> Reservation:
        """Hold ``qty`` units of ``sku`` for ``order_id``."""
        check_quantity(qty)
        if order_id in self._held:
            raise InventoryError(f"order {order_id!r} already holds a reservation")
        free = self.available(sku)
        if qty > free:
            raise OutOfStock(sku, qty, free)
        reservation = Reservation(order_id, sku, qty)
        self._held[order_id] = reservation
        return reservation

    def release(self, order_id: str) -> Reservation:
        """Cancel the reservation of ``order_id``; its units become available again."""
        try:
            return self._held.pop(order_id)
        except KeyError:
            raise InventoryError(f"order {order_id!r} holds no reservation") from None

    def commit(self, order_id: str) -> Reservation:
        """Ship the reserved units of ``order_id``: they leave the warehouse.

        When the warehouse no longer has them, ``OutOfStock`` is raised and
        the reservation is kept.
        """
        try:
            reservation = self._held[order_id]
        except KeyError:
            raise InventoryError(f"order {order_id!r} holds no reservation") from None
        self.warehouse.remove(reservation.sku, reservation.qty)
        del self._held[order_id]
        return reservation
