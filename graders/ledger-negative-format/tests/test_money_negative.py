from ledger import format_cents


def test_format_negative():
    assert format_cents(-105) == "-1.05"
    assert format_cents(-5) == "-0.05"
    assert format_cents(-100) == "-1.00"
