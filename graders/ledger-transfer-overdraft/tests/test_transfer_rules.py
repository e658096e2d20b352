import pytest

from ledger import Book
from ledger.book import InsufficientFunds


def _book():
    book = Book()
    book.deposit("alice", 500)
    return book


def test_overdraft_refused():
    book = _book()
    with pytest.raises(InsufficientFunds):
        book.transfer("alice", "bob", 501)
    assert issubclass(InsufficientFunds, ValueError)
    assert (book.balance("alice"), book.balance("bob")) == (500, 0)


def test_bad_amounts():
    book = _book()
    for amount in (0, -10):
        with pytest.raises(ValueError):
            book.transfer("alice", "bob", amount)
    assert (book.balance("alice"), book.balance("bob")) == (500, 0)


def test_self_transfer():
    book = _book()
    with pytest.raises(ValueError):
        book.transfer("alice", "alice", 10)
    assert book.balance("alice") == 500
