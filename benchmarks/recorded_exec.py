"""200 recorded ``bash`` calls of ``true`` against bare docker-py ``exec_run`` on an identical container.

trialbox's side is the whole tool-contract path: budget charge, the exec with
its timeout machinery and OOM counter, and one hash-chained event written to
the host log. The bare side is ``container.exec_run(["bash", "-c", "true"])``.
Both use containers created the same way; calls are interleaved in blocks of
10 (A×10, B×10, …) so drifts of the machine hit both.
Run: .venv/bin/python benchmarks/recorded_exec.py [calls]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _common import median_interval, quantile

from orchestrator.agents import Budget, BudgetLimits, ToolBox
from orchestrator.engine import connect
from orchestrator.events import EventLog
from orchestrator.images import resolve_image
from orchestrator.sandbox.base import SandboxSpec
from orchestrator.sandbox.docker import DockerSandbox

ROOT = Path(__file__).resolve().parent.parent
BLOCK = 10


def main(calls: int = 200) -> int:
    client = connect()
    image = resolve_image(client, ROOT / "images", "python").image_id
    spec = lambda: SandboxSpec(image_id=image, name=f"bench-exec-{uuid.uuid4().hex[:8]}", disk_limit_mb=64)  # noqa: E731
    a, b = DockerSandbox(spec(), client), DockerSandbox(spec(), client)
    with tempfile.TemporaryDirectory() as tmp, a, b:
        events = EventLog(Path(tmp) / "events.jsonl", "bench")
        toolbox = ToolBox(a, events, Budget(BudgetLimits(max_tool_calls=10 * calls + 100)))
        bare = b.container

        def recorded() -> None:
            assert not toolbox.call("bash", {"command": "true"}).is_error

        def plain() -> None:
            assert bare.exec_run(["bash", "-c", "true"], user="1000:1000").exit_code == 0

        for _ in range(BLOCK):  # warm-up
            recorded()
            plain()
        ta, tb = [], []
        for block in range(calls // BLOCK):
            order = [(recorded, ta), (plain, tb)] if block % 2 == 0 else [(plain, tb), (recorded, ta)]
            for fn, out in order:
                for _ in range(BLOCK):
                    t0 = time.perf_counter()
                    fn()
                    out.append(time.perf_counter() - t0)
        events.close()
    med_a, med_b = statistics.median(ta), statistics.median(tb)
    ratio, lo, hi = median_interval([x / y for x, y in zip(ta, tb)])
    p99 = quantile(ta, 0.99) / quantile(tb, 0.99)
    print(f"recorded bash vs bare exec_run: {len(ta)} calls each, blocks of {BLOCK}")
    print(f"  trialbox recorded bash   median {med_a * 1000:7.2f} ms   p99 {quantile(ta, 0.99) * 1000:7.2f} ms")
    print(f"  bare docker-py exec_run  median {med_b * 1000:7.2f} ms   p99 {quantile(tb, 0.99) * 1000:7.2f} ms")
    print(f"  median ratio {med_a / med_b:.3f}x (per-call pairs: {ratio:.3f}x, 95% interval {lo:.3f}-{hi:.3f})  target <= 1.20x  "
          f"{'MET' if med_a / med_b <= 1.2 else 'NOT MET'}")
    print(f"  p99 ratio    {p99:.3f}x  target <= 1.50x  {'MET' if p99 <= 1.5 else 'NOT MET'}")
    return 0 if med_a / med_b <= 1.2 and p99 <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
