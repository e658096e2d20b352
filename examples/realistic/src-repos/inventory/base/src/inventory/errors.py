"""Exceptions raised by the inventory package."""


class InventoryError(Exception):
    """Base class of every error this package raises on purpose."""


class UnknownSku(InventoryError, KeyError):
    """The warehouse has never stocked this SKU."""

    def __init__(self, sku: str) -> None:
        super().__init__(sku)
        self.sku = sku

    def __str__(self) -> str:
        return f"unknown SKU {self.sku!r}"


class OutOfStock(InventoryError):
    """More units were asked for than the warehouse can give."""

    def __init__(self, sku: str, requested: int, available: int) -> None:
        super().__init__(f"{sku}: requested {requested}, available {available}")
        self.sku = sku
        self.requested = requested
        self.available = available
