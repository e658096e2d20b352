#!/bin/bash
# Reference solution: rewrite median in /app/stats/__init__.py.
cat > /app/stats/__init__.py <<'PY'
"""Small summary statistics."""


def mean(values):
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
PY
