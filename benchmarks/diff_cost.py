"""The host's cost of computing a trial's diff (``grading.diff.compute_diff``), beside ``difflib.unified_diff``
alone on the same files (the baseline, what trialbox used before the fifteenth review).

Shapes: an honest edit of a large module (two changed lines in 12,000), a module rewritten by inserting a comment
after every line (the review's attack: ``difflib`` is quadratic there), and the same at 30,000 lines (the 1 MiB
per-file bound allows about that many short lines; the baseline is skipped there, it takes many minutes).
Prints seconds for each side and the ratio. Run: .venv/bin/python benchmarks/diff_cost.py
"""

from __future__ import annotations

import difflib
import time

from orchestrator.grading.diff import compute_diff
from orchestrator.grading.tree import Tree


def shapes() -> dict[str, tuple[list[str], list[str]]]:
    big = [f"value_{i} = compute({i}, {i * 7 % 13})\n" for i in range(12_000)]
    honest = list(big)
    honest[5_000] = "value_5000 = compute(5000, 0)  # fixed\n"
    honest.insert(100, "import functools\n")
    woven = [x for i, line in enumerate(big) for x in (line, f"# note {i}\n")]
    huge = [f"v{i} = {i}\n" for i in range(30_000)]
    return {"honest 12k": (big, honest), "woven 12k": (big, woven),
            "woven 30k": (huge, [x for i, line in enumerate(huge) for x in (line, f"# n{i}\n")])}


def main() -> None:
    print(f"{'shape':12s} {'trialbox s':>10s} {'difflib s':>10s} {'ratio':>7s}")
    for name, (a, b) in shapes().items():
        t0 = time.process_time()
        compute_diff(Tree(files={"m.py": "".join(a).encode()}), Tree(files={"m.py": "".join(b).encode()}))
        ours = time.process_time() - t0
        if name == "woven 30k":
            print(f"{name:12s} {ours:10.2f} {'skipped':>10s} {'':>7s}")
            continue
        t0 = time.process_time()
        list(difflib.unified_diff(a, b, "a/m.py", "b/m.py"))
        base = time.process_time() - t0
        print(f"{name:12s} {ours:10.2f} {base:10.2f} {ours / base:7.3f}")


if __name__ == "__main__":
    main()
