import pytest

from ledger import parse_amount


def test_thousands():
    assert parse_amount("1,234.50") == 123450
    assert parse_amount("-1,000") == -100000
    assert parse_amount("12,345,678") == 1234567800


def test_dollar_sign():
    assert parse_amount("$1,234.50") == 123450
    assert parse_amount("$7") == 700


@pytest.mark.parametrize("bad", ["1,23.00", "12,34", ",100", "1,,000", "$", "1.234"])
def test_bad_grouping(bad):
    with pytest.raises(ValueError):
        parse_amount(bad)
