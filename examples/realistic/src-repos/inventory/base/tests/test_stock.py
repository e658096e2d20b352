import pytest

from inventory import UnknownSku, Warehouse


def test_add_new_sku():
    wh = Warehouse()
    assert wh.add("BOLT-M4", 10) == 10
    assert wh.level("BOLT-M4") == 10
    assert "BOLT-M4" in wh


def test_add_accumulates():
    wh = Warehouse()
    wh.add("BOLT-M4", 10)
    wh.add("BOLT-M4", 5)
    assert wh.level("BOLT-M4") == 15
    assert len(wh) == 1


@pytest.mark.parametrize("qty", [0, -3, 2.5, True])
def test_add_rejects_bad_quantity(qty):
    with pytest.raises(ValueError):
        Warehouse().add("BOLT-M4", qty)


def test_remove_reduces_level(warehouse):
    assert warehouse.remove("BOLT-M4", 20) == 100
    assert warehouse.level("BOLT-M4") == 100


def test_remove_more_than_level():
    wh = Warehouse()
    wh.add("NUT-M4", 10)
    assert wh.remove("NUT-M4", 15) == 0
    assert wh.level("NUT-M4") == 0


def test_unknown_sku():
    wh = Warehouse()
    with pytest.raises(UnknownSku, match="unknown SKU 'GEAR-9'"):
        wh.level("GEAR-9")
    with pytest.raises(KeyError):
        wh.remove("GEAR-9", 1)


def test_low_stock(warehouse):
    assert warehouse.low_stock(10) == ["NUT-M4", "WASHER-M4"]
    assert warehouse.low_stock(3) == ["WASHER-M4"]
    assert warehouse.low_stock(0) == []


@pytest.mark.slow
def test_many_receipts_and_shipments(warehouse):
    before = warehouse.total_units()
    for _ in range(2000):
        warehouse.add("SCREW-M3", 7)
        warehouse.remove("SCREW-M3", 7)
        warehouse.add("NUT-M4", 1)
    assert warehouse.level("SCREW-M3") == 40
    assert warehouse.total_units() == before + 2000
