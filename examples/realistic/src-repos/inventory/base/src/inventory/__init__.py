"""Stock levels, reservations and reorder suggestions for a small warehouse."""

from .errors import InventoryError, OutOfStock, UnknownSku
from .reorder import reorder_report
from .reservations import Reservation, ReservationBook
from .stock import Warehouse

__all__ = [
    "InventoryError",
    "OutOfStock",
    "Reservation",
    "ReservationBook",
    "UnknownSku",
    "Warehouse",
    "reorder_report",
]
