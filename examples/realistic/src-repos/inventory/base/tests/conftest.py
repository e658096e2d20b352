import pytest

from inventory import Warehouse


@pytest.fixture
def warehouse():
    """A small warehouse of M3/M4 fasteners."""
    wh = Warehouse("north")
    wh.add("BOLT-M4", 120)
    wh.add("NUT-M4", 8)
    wh.add("WASHER-M4", 3)
    wh.add("SCREW-M3", 40)
    return wh
