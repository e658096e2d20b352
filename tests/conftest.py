"""Shared test set-up. Docker tests live in tests/docker and carry the `docker` marker."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/docker" in str(item.fspath):
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT
