import io
from datetime import datetime, timezone

from tabular import print_report, summarize

SALES = [
    {"region": "north", "amount": 10.0},
    {"region": "south", "amount": 2.5},
    {"region": "north", "amount": 4.25},
]


def test_summarize_groups_by_key():
    assert summarize(SALES, "region", "amount") == [
        {"region": "north", "amount": 14.25, "count": 2},
        {"region": "south", "amount": 2.5, "count": 1},
    ]


def test_summarize_empty():
    assert summarize([], "region", "amount") == []


def test_print_report_footer(mocker):
    mocker.patch("tabular.report._now", return_value=datetime(2024, 1, 2, 3, 4, tzinfo=timezone.utc))
    out = io.StringIO()
    print_report(SALES, "region", "amount", title="Sales", out=out)
    text = out.getvalue()
    assert text.startswith("Sales\n\n| region   |   amount |   count |\n")
    assert text.endswith("\n3 records, generated 2024-01-02 03:04 UTC\n")


def test_print_report_defaults_to_stdout(mocker, capsys):
    mocker.patch("tabular.report._now", return_value=datetime(2024, 1, 2, 3, 4, tzinfo=timezone.utc))
    print_report(SALES, "region", "amount")
    assert "| north    |    14.25 |       2 |" in capsys.readouterr().out
