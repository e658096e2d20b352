import os

import pytest

from tabular import ConfigError, table_style


def test_style_from_environment():
    # The test environment sets TABULAR_STYLE=github.
    assert table_style() == "github"


def test_missing_style(mocker):
    mocker.patch.dict(os.environ)
    del os.environ["TABULAR_STYLE"]
    with pytest.raises(ConfigError, match="TABULAR_STYLE is not set"):
        table_style()


def test_blank_style(mocker):
    mocker.patch.dict(os.environ, {"TABULAR_STYLE": "  "})
    with pytest.raises(ConfigError, match="not set"):
        table_style()


def test_style_is_case_insensitive(mocker):
    mocker.patch.dict(os.environ, {"TABULAR_STYLE": "GitHub"})
    assert table_style() == "github"


def test_style_ignores_surrounding_spaces(mocker):
    mocker.patch.dict(os.environ, {"TABULAR_STYLE": " grid\n"})
    assert table_style() == "grid"


def test_unknown_style(mocker):
    mocker.patch.dict(os.environ, {"TABULAR_STYLE": "fancy"})
    with pytest.raises(ConfigError, match="'fancy' is not a known style"):
        table_style()
