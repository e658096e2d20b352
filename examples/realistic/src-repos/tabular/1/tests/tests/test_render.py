import tabulate as tabulate_module

from tabular import columns_of, render

STOCK = [
    {"sku": "BOLT-M4", "qty": 120, "price": 0.1},
    {"sku": "NUT-M4", "qty": 8, "price": 0.05},
]


def test_render_github_table():
    assert render(STOCK) == (
        "| sku     |   qty |   price |\n"
        "|---------|-------|---------|\n"
        "| BOLT-M4 |   120 |    0.10 |\n"
        "| NUT-M4  |     8 |    0.05 |"
    )


def test_explicit_columns():
    assert render(STOCK, ["qty", "sku"]).splitlines()[0] == "|   qty | sku     |"


def test_missing_value_is_empty():
    table = render([{"sku": "A", "qty": 3}, {"sku": "B"}])
    assert table.splitlines()[-1] == "| B     |       |"


def test_columns_in_first_seen_order():
    assert columns_of(STOCK) == ["sku", "qty", "price"]
    assert columns_of([]) == []
    assert columns_of([{"b": 1}, {"a": 2, "b": 3}, {"c": 4, "a": 5}]) == ["b", "a", "c"]


def test_column_only_in_later_records():
    table = render([{"sku": "A", "qty": 3}, {"sku": "B", "note": "recount"}])
    assert table.splitlines() == [
        "| sku   |   qty | note    |",
        "|-------|-------|---------|",
        "| A     |     3 |         |",
        "| B     |       | recount |",
    ]


def test_render_passes_style_to_tabulate(mocker):
    spy = mocker.patch("tabular.render.tabulate", wraps=tabulate_module.tabulate)
    render(STOCK)
    spy.assert_called_once()
    assert spy.call_args.kwargs["tablefmt"] == "github"
