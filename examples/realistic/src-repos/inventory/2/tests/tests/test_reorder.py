import pytest

from inventory import Warehouse, reorder_report


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


@pytest.mark.parametrize(
    "level, point, batch, expected",
    [
        (4, 12, 10, 20),  # exactly two batches
        (3, 10, 5, 20),  # 17 missing: four batches
        (5, 6, 12, 12),  # less than one batch missing: still one batch
        (1, 1, 1, 1),  # batches of one unit: no rounding
    ],
)
def test_batches_round_up(level, point, batch, expected):
    wh = Warehouse()
    wh.add("GEAR-9", level)
    (line,) = reorder_report(wh, {"GEAR-9": point}, batch=batch)
    assert line.order_qty == expected


def test_batch_rounding_reaches_target(warehouse):
    points = {"NUT-M4": 10, "WASHER-M4": 5, "SCREW-M3": 40}
    for line in reorder_report(warehouse, points, batch=25):
        assert line.order_qty % 25 == 0
        assert line.level + line.order_qty >= 2 * points[line.sku]


def test_rejects_bad_batch(warehouse):
    with pytest.raises(ValueError, match="batch"):
        reorder_report(warehouse, {}, batch=0)
