import json
import sys

expected = {"apple": 3, "pear": 2, "fig": 1, "_total": 6}
try:
    with open(sys.argv[1]) as fh:
        got = json.load(fh)
except (OSError, ValueError):
    got = None
counts = isinstance(got, dict) and all(got.get(k) == v for k, v in expected.items() if k != "_total")
total = isinstance(got, dict) and got.get("_total") == 6
exact = got == expected
with open(sys.argv[2], "w") as fh:
    json.dump({"reward": 1.0 if exact else 0.0, "counts": float(counts), "total": float(total)}, fh)
