"""Python's parser, called one thread at a time.

CPython 3.11 builds the Python objects of an AST (``ast.parse``, ``compile`` with
``ast.PyCF_ONLY_AST``) with a recursion counter kept in the interpreter's shared
AST state, not per thread (python/cpython#106905, after gh-95185). When the
construction in one thread lets another run (an allocation triggers the garbage
collector, which runs a finaliser, which gives up the GIL), a second parse resets
that counter under the first, and one of them raises ``SystemError: AST
constructor recursion depth mismatch`` on perfectly valid source. ``tasks check``
and grading parse trusted test files from parallel threads, so the failure was
real (1 run in 5 of a check), and during grading it would have been attributed
to the agent.

Every parse trialbox does goes through :func:`parse` (and :func:`compile_source`
for code objects), which hold one process-wide lock: two of trialbox's parses
never overlap. A parse made outside trialbox's code in the same process (the
standard library's ``traceback`` module parses a line to place its carets) can
still overlap one of ours; the counter is reset at the start of every call, so
the error does not persist, and the one that is ours is retried once under the
lock. Any other error (``SyntaxError``, ``ValueError`` for a NUL byte,
``RecursionError`` for source nested too deeply) is the caller's to handle.
"""

from __future__ import annotations

import ast
import threading
from types import CodeType

_LOCK = threading.Lock()
_MISMATCH = "recursion depth mismatch"


def _serialised(call):
    with _LOCK:
        try:
            return call()
        except SystemError as exc:
            if _MISMATCH not in str(exc):
                raise
            return call()  # collided with a parse outside trialbox's lock: the counter is reset per call


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``, serialised across threads (see the module's note)."""
    return _serialised(lambda: ast.parse(source))


def compile_source(source: str | bytes, filename: str, mode: str = "exec", flags: int = 0) -> CodeType | ast.AST:
    """``compile(...)``, serialised across threads like :func:`parse` (``dont_inherit`` always set)."""
    return _serialised(lambda: compile(source, filename, mode, flags, dont_inherit=True))
