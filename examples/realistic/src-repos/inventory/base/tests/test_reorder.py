import pytest

from inventory import reorder_report


def test_nothing_to_reorder(warehouse):
    assert reorder_report(warehouse, {}) == []


def test_reorder_below_point(warehouse):
    lines = reorder_report(warehouse, {"NUT-M4": 10, "WASHER-M4": 5})
    assert [line.sku for line in lines] == ["NUT-M4", "WASHER-M4"]
    assert lines[0].level == 8
    assert lines[0].order_qty == 12
    assert lines[1].order_qty == 7


def test_default_point(warehouse):
    lines = reorder_report(warehouse, {"BOLT-M4": 0}, default_point=50)
    assert [line.sku for line in lines] == ["NUT-M4", "SCREW-M3", "WASHER-M4"]


def test_rejects_bad_batch(warehouse):
    with pytest.raises(ValueError, match="batch"):
        reorder_report(warehouse, {}, batch=0)
