"""What a person sees while a run runs: a live panel on a terminal, plain lines anywhere else.

Both show the same counts (``Tally``): trials done, running and left; **accepted and rejected apart from
infrastructure errors** (a rejection is an expected outcome of grading, an infrastructure error is not: one
"failed" count hid which was which); the cost so far against the run's cap; the time elapsed and an estimate of
the time left (from this session's trials only: a resumed run's earlier trials took none of its time); the stage
that takes the largest share of the trials' time so far; the warnings logged. ``PlainDisplay`` writes one line
per finished trial (CI logs, pipes, files: nothing is redrawn). ``LiveDisplay`` (a terminal, with ``rich``) prints
the same line per trial above a panel it redraws in place.

Log warnings never land between these lines: ``log.to_file`` sends the run's log to ``trialbox.log`` in the run
folder, as JSON lines, and counts warnings and errors; the display shows the count and where the file is.
Everything shown that a trial could influence (its id, its verdict's reasons) is ``printable`` first.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from .summary import money
from .textsafe import printable


@dataclass
class Tally:
    """The run's counts so far (earlier sessions of a resumed run included)."""

    total: int
    done: int = 0
    accepted: int = 0
    rejected: int = 0
    """Graded and not accepted (the agent's outcome, whatever the criterion)."""
    infra: int = 0
    """Recorded as infrastructure errors (their retry spent, or a kind that is not retried)."""
    cost: float = 0.0
    cap: float | None = None
    done_here: int = 0
    """Finished in this session (the time left is estimated from these)."""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    warnings: Callable[[], int] = lambda: 0
    log_file: str | None = None
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def of(cls, total: int, results: list[Any], cost: float = 0.0, cap: float | None = None) -> "Tally":
        """The tally of ``results`` already recorded (a resumed run's earlier sessions)."""
        t = cls(total, cost=cost, cap=cap)
        for r in results:
            t.count(r, here=False)
        return t

    def count(self, result: Any, here: bool = True) -> None:
        self.done += 1
        self.done_here += here
        if result.is_infra_error:
            self.infra += 1
        elif result.accepted:
            self.accepted += 1
        else:
            self.rejected += 1
        for stage, s in (result.stage_seconds or {}).items():
            self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + float(s)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left_s(self) -> float | None:
        return self.elapsed() / self.done_here * (self.total - self.done) if self.done_here else None

    def slowest(self) -> str | None:
        """The stage with the largest share of the trials' summed time so far, with that share."""
        whole = sum(self.stage_seconds.values())
        if not whole:
            return None
        stage, seconds = max(self.stage_seconds.items(), key=lambda kv: kv[1])
        return f"{stage} {seconds / whole:.0%}"

    def summary(self, running: int) -> str:
        left = self.left_s()
        warned = self.warnings()
        return (f"running {running}, left {self.total - self.done - running}; accepted {self.accepted}, "
                f"rejected {self.rejected}, infra errors {self.infra}; cost {money(self.cost)}"
                + (f" of {money(self.cap)}" if self.cap is not None else "")
                + f"; elapsed {self.elapsed():.0f}s" + (f", ~{left:.0f}s left" if left is not None else "")
                + (f"; slowest stage {self.slowest()}" if self.slowest() else "")
                + (f"; {warned} warning(s) in {self.log_file}" if warned else ""))


def trial_line(tally: Tally, trial_id: str, result: Any, spent: float, show_node: bool = False) -> str:
    """One finished trial: its place, id, verdict (and node), reasons, time and cost."""
    v = result.verdict
    label = v.label + (f" on {printable(result.node_name)}" if show_node else "")
    reasons = f" [{', '.join(printable(r) for r in v.reasons)}]" if v.reasons else ""
    return (f"[{tally.done}/{tally.total}] {printable(trial_id):46s} {label}{reasons}  {result.duration_s or 0:.1f}s "
            f"{money(spent)}")


class PlainDisplay:
    """A line per finished trial, with the counts after it: for pipes, CI logs and files."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say

    def trial(self, tally: Tally, trial_id: str, result: Any, spent: float, running: int,
              show_node: bool = False) -> None:
        self.say(f"{trial_line(tally, trial_id, result, spent, show_node)}  | {tally.summary(running)}")

    def note(self, text: str) -> None:
        self.say(text)

    def close(self) -> None:
        pass


class LiveDisplay(PlainDisplay):
    """On a terminal: each finished trial's line printed once, above a panel of the counts redrawn in place."""

    def __init__(self, tally: Tally, file: TextIO | None = None, force_terminal: bool | None = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=file or sys.stdout, force_terminal=force_terminal, highlight=False,
                               markup=False, emoji=False)
        self.tally = tally
        self.running = 0
        self.live = Live(self._panel(), console=self.console, refresh_per_second=2, transient=False,
                         redirect_stdout=False, redirect_stderr=False, get_renderable=self._panel)
        self.live.start()
        super().__init__(self._print)

    def _print(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def _panel(self):
        from rich.panel import Panel
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        t = self.tally
        grid = Table.grid(padding=(0, 2))
        grid.add_row(ProgressBar(total=max(t.total, 1), completed=t.done, width=40),
                     f"{t.done}/{t.total} done, {self.running} running, {t.total - t.done - self.running} left")
        grid.add_row("accepted / rejected / infra errors", f"{t.accepted} / {t.rejected} / {t.infra}")
        grid.add_row("cost", money(t.cost) + (f" of {money(t.cap)} (the run's cap)" if t.cap is not None else ""))
        left = t.left_s()
        grid.add_row("time", f"{t.elapsed():.0f}s elapsed" + (f", ~{left:.0f}s left" if left is not None else ""))
        if t.slowest():
            grid.add_row("slowest stage", t.slowest())
        if t.warnings():
            grid.add_row("warnings", f"{t.warnings()} in {t.log_file}")
        return Panel(grid, title="trialbox run", expand=False)

    def trial(self, tally: Tally, trial_id: str, result: Any, spent: float, running: int,
              show_node: bool = False) -> None:
        self.tally, self.running = tally, running
        self._print(trial_line(tally, trial_id, result, spent, show_node))
        self.live.refresh()

    def close(self) -> None:
        self.live.stop()
