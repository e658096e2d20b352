"""Why a task's check failed, in words a task author can act on: the root cause read from the grader's output.

``untouched_problems`` judges the two runs on the untouched repository (pytest did not execute, a fail-to-pass test
passed, a pass-to-pass test failed, the channels disagreed); ``root_cause`` finds the line of a test run's log that
says why (a usage or collection error, the first ``E`` line); ``criterion_detail`` and ``log_cause`` say the same
of an oracle that was not accepted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .grading.runner import TestRun
from .tasks import Task


# --------------------------------------------------------------------------- root causes
USAGE = re.compile(r"^(?:ERROR: .*|\w*Error: .*|error: .*|INTERNALERROR> .*\w+Error.*)$", re.M)


E_LINE = re.compile(r"^E\s+(\S.*)$", re.M)


def root_cause(run: TestRun) -> str | None:
    """The first line that says why tests could not run as declared (None: nothing stands out)."""
    if run.setup_failed:  # the first line is the runner's own ("the install step failed (exit N):")
        lines = [line.strip() for line in run.log_tail.splitlines()[1:] if line.strip()]
        errors = [line for line in lines if re.search(r"error", line, re.I)]
        return (errors or lines or [run.log_tail.strip()])[-1]
    for err in run.collect_errors:
        found = E_LINE.findall(err.get("error", ""))
        if found:
            return f"{err.get('node')}: {found[-1]}"
        tail = [line for line in err.get("error", "").splitlines() if line.strip()]
        if tail:
            return f"{err.get('node')}: {tail[-1].strip()}"
    log = "\n".join(line for line in run.log_tail.splitlines() if "tripwire" not in line)  # trialbox's own test
    usage = USAGE.findall(log)
    if usage:
        return usage[0].strip()
    found = E_LINE.findall(log)
    return found[0].strip() if found else None


def _did_not_execute(run: TestRun, nodes: list[str]) -> bool:
    """The install step failed, no results came back, or a test file's pytest session ended in a usage or
    internal error (exit 2-4) that is not its module failing to import (which fails its tests, as in SWE-bench)."""
    if run.setup_failed or not run.results_found:
        return True
    files = sorted({n.split("::", 1)[0] for n in nodes})  # the runner's groups, in its order
    collect_failed = {posixpath_file(e.get("node", "")) for e in run.collect_errors}
    return any(code in (2, 3, 4) and (i >= len(files) or files[i] not in collect_failed)
               for i, code in enumerate(run.exit_codes))


def untouched_script_problems(task: Task, runs: list[TestRun]) -> list[str]:
    """A script grader on the untouched repository: it must write a valid reward, and not an accepted one."""
    a = task.grader.acceptance
    out = []
    for i, run in enumerate(runs, 1):
        tail = run.log_tail[-300:].strip()
        if run.timed_out:  # failing before: its tests wait for what the change makes (``Task.untouched_times_out``)
            pass
        elif run.reward is None:
            out.append(f"untouched repository (run {i}): the test script wrote no valid reward "
                       f"({run.reward_note or 'see the integrity problems'}; exit {run.exit_code}): {tail}")
        elif a.holds(run.reward):
            out.append(f"untouched repository (run {i}): the reward {run.reward} is already accepted "
                       f"({a}): the tests do not test the change")
        out += [f"grader integrity on the untouched repository: {p}" for p in run.integrity]
        if out:
            return out
    if runs[0].reward != runs[-1].reward:
        out.append(f"flaky: the untouched repository's reward changed between identical runs "
                   f"({runs[0].reward} then {runs[-1].reward})")
    return out


def untouched_problems(task: Task, runs: list[TestRun]) -> list[str]:
    """Problems on the untouched repository (with the test patch), the root cause first."""
    g = task.grader
    if getattr(g, "kind", "pytest") == "script":
        return untouched_script_problems(task, runs)
    run = runs[0]
    cause = root_cause(run)
    if _did_not_execute(run, g.fail_to_pass + g.pass_to_pass):
        what = "the install step failed" if run.setup_failed else "pytest did not execute the tests"
        codes = f" (pytest exit codes {run.exit_codes})" if run.exit_codes else ""
        return [f"untouched repository: {what}{codes}: {cause or run.log_tail[-300:].strip()}"]
    out = []
    collect_failed = {posixpath_file(e.get("node", "")) for e in run.collect_errors}
    for n in g.fail_to_pass:
        outcome = run.outcomes.get(n)
        if outcome == "passed":
            out.append(f"fail-to-pass {n} already passes on the untouched repository")
        elif outcome is None and n.split("::", 1)[0] not in collect_failed:
            out.append(f"fail-to-pass {n} did not run on the untouched repository (no such test?)")
    for n in g.pass_to_pass:
        outcome = run.outcomes.get(n)
        if outcome != "passed":
            out.append(f"pass-to-pass {n} does not pass on the untouched repository ({outcome or 'not run'})")
    if out and cause:
        out.insert(0, f"root cause: {cause}")
    out += [f"grader integrity on the untouched repository: {p}" for r in runs for p in r.integrity]
    return out


def posixpath_file(node: str) -> str:
    return node.split("::", 1)[0]


def criterion_detail(c: dict[str, Any]) -> str:
    ev = c.get("evidence") or {}
    if "outcomes" in ev:
        bad = [f"{k} {v}" for k, v in ev["outcomes"].items() if v != "passed"][:3]
        sealed = [m for s in (ev.get("sealed") or {}).values() for m in s.get("mismatched", [])][:2]
        why = "".join(f"; the sealed {m['assertion'].splitlines()[0][:120]!r} got {m['got'][:120]}" +
                      (" (an object compared by its repr: seal: false in grader.yaml if its __eq__ accepts the literal)"
                       if str(m["got"]).startswith("<") else "") for m in sealed)
        return f"{c['name']}: {', '.join(bad)}{why}"
    if ev.get("problems"):
        return f"{c['name']}: {ev['problems'][0]}"
    keys = [k for k in ("outside", "protected_changed", "symlinks_leaving_workspace") if ev.get(k)]
    return f"{c['name']}: " + "; ".join(f"{k} {ev[k][:3]}" for k in keys) if keys else c["name"]


def log_cause(log_file: Path, criteria: list[dict[str, Any]] = ()) -> str | None:
    """Why a grader run failed: the collection errors its verdict kept (a module that cannot be imported is the
    cause of every ``not found`` after it, and the log's tail may have lost it), then the log's own lines."""
    errors = [e for c in criteria for e in (c.get("evidence") or {}).get("collect_errors") or []]
    try:
        text = log_file.read_text()
    except OSError:
        text = ""
    return root_cause(TestRun(log_tail=text, collect_errors=errors)) if text or errors else None
