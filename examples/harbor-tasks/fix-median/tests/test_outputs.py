import stats


def test_even_length():
    assert stats.median([4, 1, 3, 2]) == 2.5


def test_odd_length():
    assert stats.median([3, 1, 2]) == 2


def test_mean_unchanged():
    assert stats.mean([1, 2, 3, 4]) == 2.5
