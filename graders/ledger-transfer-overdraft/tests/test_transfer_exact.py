from ledger import Book


def test_exact_balance_allowed():
    book = Book()
    book.deposit("alice", 500)
    book.transfer("alice", "bob", 500)
    assert (book.balance("alice"), book.balance("bob")) == (0, 500)
