"""Batch rounding of reorder quantities."""

from inventory import Warehouse, reorder_report


def _single(level, point, batch):
    wh = Warehouse()
    wh.add("GEAR-9", level)
    (line,) = reorder_report(wh, {"GEAR-9": point}, batch=batch)
    return line.order_qty


def test_exact_batches():
    assert _single(level=4, point=12, batch=10) == 20


def test_batches_round_down():
    assert _single(level=3, point=10, batch=5) == 15


def test_partial_batch_is_dropped():
    assert _single(level=5, point=6, batch=12) == 0
