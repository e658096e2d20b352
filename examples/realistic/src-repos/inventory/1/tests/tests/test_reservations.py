import pytest

from inventory import InventoryError, OutOfStock, ReservationBook


@pytest.fixture
def book(warehouse):
    return ReservationBook(warehouse)


def test_reserve_holds_units(book):
    book.reserve("order-1", "BOLT-M4", 30)
    assert book.reserved("BOLT-M4") == 30
    assert book.available("BOLT-M4") == 90
    assert book.warehouse.level("BOLT-M4") == 120


def test_one_reservation_per_order(book):
    book.reserve("order-1", "BOLT-M4", 1)
    with pytest.raises(InventoryError, match="already holds"):
        book.reserve("order-1", "NUT-M4", 1)


def test_reservations_cannot_oversell(book):
    book.reserve("order-1", "NUT-M4", 6)
    with pytest.raises(OutOfStock) as caught:
        book.reserve("order-2", "NUT-M4", 6)
    assert caught.value.available == 2
    assert book.orders() == ["order-1"]


def test_release_frees_units(book):
    book.reserve("order-1", "NUT-M4", 8)
    book.release("order-1")
    assert book.available("NUT-M4") == 8
    book.reserve("order-2", "NUT-M4", 8)
    assert book.orders() == ["order-2"]


def test_commit_ships_units(book):
    book.reserve("order-1", "SCREW-M3", 15)
    book.commit("order-1")
    assert book.warehouse.level("SCREW-M3") == 25
    assert book.reserved("SCREW-M3") == 0
    assert len(book) == 0


def test_commit_after_stock_was_shipped_elsewhere(book):
    book.reserve("order-1", "WASHER-M4", 3)
    book.warehouse.remove("WASHER-M4", 2)
    with pytest.raises(OutOfStock):
        book.commit("order-1")
    assert book.warehouse.level("WASHER-M4") == 1
    assert book.orders() == ["order-1"]
