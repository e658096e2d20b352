"""Grading one trial: diff on the host, tests in a grader container, criteria, verdict.

An abnormal test run (no results, the runner's own error, the whole run
timing out or running out of memory) is checked against the untouched
repository: if the untouched repository fails the same way, the grader is
broken and the result is an infrastructure error (retried once), never
"tests failed"; otherwise it is the agent's failure.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import threading
from dataclasses import dataclass
from typing import Any


from ..stops import AgentResult, StopReason
from ..agents.upstream import trial_fault
from ..hashing import tree_sha256
from ..log import get_logger
from ..tasks import Task
from . import criteria as C
from .leaks import secrets_leaked
from .likeness import near_identical
from .diff import Diff, compute_diff
from .tree import Tree
from .judge import Judge
from ..errors import GraderInfraError
from .compose import compose
from .runner import GraderLimits, TestRun, run_tests
from .script import run_script
from .verdict import GRADER_VERSION, Verdict, decide, infra_verdict
from ..sandbox.base import SandboxFactory
from ..sandbox.meter import Usage
from ..stageclock import lap

log = get_logger("grading")


@dataclass
class Grade:
    verdict: Verdict
    diff: Diff
    run: TestRun | None
    grader_usage: Usage = Usage()
    """What every grader container of this grading used (the baseline check and a retry included)."""


def _suspicious(run: TestRun) -> bool:
    """No results at all, or the runner's own failure: the grader may be broken."""
    return run.timed_out or run.oom or run.exit_code is None or not run.results_found


def _how(run: TestRun, limits: GraderLimits, task: Task | None = None) -> str:
    """How a grader's run failed, in words (the grader's fault when the untouched repository fails so too)."""
    if run.oom:
        return f"the grader container was killed for memory, at its limit of {limits.memory_limit_mb} MiB"
    if run.timed_out:
        own = getattr(task.grader, "timeout_seconds", None) if task is not None else None
        return f"the grader ran out of time ({own or limits.timeout_s:.0f} s)"
    if run.exit_code is None:
        return "the grader's command did not finish"
    return f"no test results (exit code {run.exit_code})"


def _test(sandboxes: SandboxFactory, image_id: str, final: Tree, original: Tree, task: Task, limits: GraderLimits, name: str,
          labels: dict[str, str] | None = None, usage: list[Usage] | None = None,
          prepared: "PreparedGrader | None" = None) -> TestRun:
    """Grade the final tree; an infrastructure error only when the untouched repository fails the same way."""
    nodes = task.grader.fail_to_pass + task.grader.pass_to_pass
    script = task.grader.kind == "script"
    comp = None if script else compose(final, original, task)

    def graded(tree: Tree, composed, suffix: str) -> TestRun:
        ready = prepared.take() if prepared is not None and suffix == "grader" else None  # the first run only
        if script:
            return run_script(sandboxes, image_id, tree, task, limits, f"{name}-{suffix}", labels, usage, original,
                              prepared=ready)
        return run_tests(sandboxes, image_id, composed, task, nodes, limits, f"{name}-{suffix}", labels, usage,
                         prepared=ready)

    for attempt in (1, 2):
        try:
            set_up = True
            try:
                run = graded(final, comp, "grader")
            except GraderInfraError as exc:
                set_up = False
                run = TestRun(integrity=[f"the final workspace could not be set up for grading ({exc.kind}): "
                                         f"{exc.detail[-500:]}"], results_found=False)
            # a grader that could not even be set up is compared with the untouched environment as on every task
            # (the seventeenth review: an engine's failure to start it is no agent's failure)
            if script and task.untouched_times_out and set_up and _suspicious(run):
                # the untouched environment times out by design here: no comparison with it can tell a broken
                # grader (the sixteenth review: code under test that kills the script was then an infrastructure
                # error, retried for free); the oracle passed in time at the check, so it is the agent's failure
                run.results_found = True
                run.reward_note = ("the test script timed out, as it does on the untouched environment (tasks "
                                   "check): the change it waits for is not there" if run.timed_out else
                                   "the test script ended without a reward on a task whose untouched environment "
                                   "times out (tasks check): the agent's failure, not compared with it")
            elif _suspicious(run):
                base = graded(original, None if script else compose(original, original, task), "baseline")
                if _suspicious(base):
                    raise GraderInfraError("grader_broken", f"the untouched repository fails the same way "
                                           f"({_how(base, limits, task)}): {base.log_tail[-800:]}")
                run.results_found = True  # the agent's failure, with whatever it produced
            if comp is not None:
                run.restored, run.removed, run.ignored = comp.restored, comp.removed, comp.ignored
            return run
        except GraderInfraError as exc:
            log.warning("grader infrastructure error", kind=exc.kind, attempt=attempt)
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


class PreparedGrader:
    """The grader container of a trial, created ahead (in a thread, while the agent works) and started only when
    grading begins: a fresh container all the same, used once. ``take`` hands it over (its user removes it);
    ``discard`` removes it when grading never took it."""

    def __init__(self, sandboxes: SandboxFactory, spec) -> None:
        self.sandbox = sandboxes(spec)
        self._thread = threading.Thread(target=self._create, name="grader-prepare", daemon=True)
        self._error: BaseException | None = None
        self._taken = False
        self._thread.start()

    def _create(self) -> None:
        try:
            self.sandbox.create()
        except BaseException as exc:  # noqa: BLE001  (the grading that takes it then starts it itself, or fails)
            self._error = exc

    def wait(self) -> None:
        """Until the container is created; raises what its creation raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error

    def take(self):
        if self._taken:  # used once: a retried grading gets a fresh container the usual way
            return None
        self._thread.join()
        self._taken = True
        if self._error is not None:  # a failed preparation: a fresh sandbox the usual way
            self._remove()
            return None
        return self.sandbox

    def discard(self) -> None:
        if not self._taken:
            self._thread.join()
            self._taken = True
            self._remove()

    def _remove(self) -> None:
        try:
            self.sandbox.remove()
        except Exception as exc:  # noqa: BLE001
            log.warning("a prepared grader could not be removed", error=str(exc))


def without(tree: Tree, paths: tuple[str, ...] | list[str]) -> Tree:
    """``tree`` without ``paths`` (the install step's outputs)."""
    if not paths:
        return tree
    drop = set(paths)
    return dataclasses.replace(tree, files={p: b for p, b in tree.files.items() if p not in drop},
                               symlinks={p: t for p, t in tree.symlinks.items() if p not in drop},
                               executable=tree.executable - drop)


def owned_by_agent(final: Tree, original: Tree, patterns: tuple[str, ...] | list[str]) -> tuple[Tree, list[str]]:
    """``final`` without what the agent's program keeps for itself in the workspace (``patterns``: a preset's
    or a candidate's ``owned_paths``, e.g. aider's ``.aider*``), and the paths excluded. A path the original
    repository has keeps its original content (so an owned pattern can hide no change to the task's files); one
    it does not have is left out. Neither the diff, the scope nor the grader's workspace sees them; the secrets and
    tampering checks still see every file the agent left, owned ones included."""
    if not patterns:
        return final, []
    def owned(path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(path.split("/", 1)[0], p) for p in patterns)
    hit = sorted(p for p in set(final.files) | set(final.symlinks) if owned(p))
    if not hit:
        return final, []
    files = {p: b for p, b in final.files.items() if not owned(p)}
    symlinks = {p: t for p, t in final.symlinks.items() if not owned(p)}
    executable = {p for p in final.executable if not owned(p)}
    for p in hit:
        if p in original.files:
            files[p] = original.files[p]
            if p in original.executable:
                executable.add(p)
        elif p in original.symlinks:
            symlinks[p] = original.symlinks[p]
    return dataclasses.replace(final, files=files, symlinks=symlinks, executable=executable), hit


def broken_reason(events: list[dict[str, Any]]) -> str | None:
    for e in reversed(events):
        kind = str(e.get("error_kind") or "")
        if kind.startswith("sandbox_broken"):
            return kind.partition(":")[2] or None
    return None


def grade_trial(sandboxes: SandboxFactory, image_id: str, task: Task, original: Tree, final: Tree,
                events: list[dict[str, Any]], agent: AgentResult, canaries: list[str], policy: str,
                agent_kind: str, limits: GraderLimits, name: str, judge: Judge | None = None,
                trial_id: str = "", labels: dict[str, str] | None = None,
                setup_outputs: tuple[str, ...] | list[str] = (), usage: list[Usage] | None = None,
                tool_map: dict[str, Any] | None = None, owned_paths: tuple[str, ...] | list[str] = (),
                prepared: PreparedGrader | None = None, text_edits: str = "none") -> Grade:
    """Grade one trial. ``setup_outputs`` (what the task's install step created before the agent started) are
    trialbox's files: left out of the agent's diff and scope; the grader's own install run provides them.
    What each grader container used is appended to ``usage`` as it is removed (kept when grading fails later)."""
    exported = final  # everything the agent left: the secrets and tampering checks see it whole
    final, owned = owned_by_agent(final, original, owned_paths)
    view = without(final, setup_outputs)
    diff = compute_diff(original, view)
    lap("grading")  # the diff, on the host
    used: list[Usage] = usage if usage is not None else []
    try:
        run = _test(sandboxes, image_id, final, original, task, limits, name, labels, used, prepared)
    except GraderInfraError as exc:
        return Grade(infra_verdict(exc.kind, exc.detail), diff, None, sum(used, Usage()))
    g = task.grader
    tested = [C.reward(task, run)] if g.kind == "script" else \
        [C.tests("fail_to_pass", g.fail_to_pass, run), C.tests("pass_to_pass", g.pass_to_pass, run)]
    crits = [*tested, C.integrity(run), C.scope(task, original, view, diff), C.trajectory(task, events, agent_kind, tool_map, text_edits),
             C.network(policy, events), C.budget(agent.stop_reason), C.abstention(task, agent.abstained),
             C.completed(agent.stop_reason), C.tampering(run, original, exported)]
    if owned_paths:
        crits.append(C.Criterion("agent_owned_paths", False, True, {"patterns": list(owned_paths), "excluded": owned[:200]}))
    rubric = task.grader_path(g.rubric) if g.rubric is not None else None
    if judge is not None and rubric is not None and rubric.is_file():
        outcomes = "\n".join(f"{n}: {run.outcomes.get(n, 'not run')}" for n in g.fail_to_pass + g.pass_to_pass) \
            if g.kind == "pytest" else f"reward: {run.reward}"
        evidence = {"instruction": (task.folder / task.config.instruction).read_text(), "diff": diff.text,
                    "submit summary": agent.summary or "(none)", "test outcomes": outcomes}
        crits.append(judge.judge(rubric.read_text(), evidence, trial_id))
    # the secrets last: what the grader produced and every other criterion's evidence are stored with the trial,
    # and the agent's code ran inside the grader, so they are scanned too (a canary it decoded and printed)
    at = len(tested) + 3  # where the secrets stood: after the trajectory
    crits[at:at] = secrets_leaked(canaries, diff, agent.summary, events, original, exported, run,
                                  [c.evidence for c in crits])
    likeness = near_identical(task, diff.text)  # a diagnostic: an answer looked up leaves the reference's diff
    if likeness is not None:
        crits.append(likeness)
    if final.skipped or not final.complete:  # a workspace the export could not bring over whole cannot be judged
        notes = final.notes()
        crits.append(C.Criterion("export", not final.complete, final.complete,
                                 {"truncated": notes["truncated"], "missing_or_different": notes["problems"][:50],
                                  "notes": notes["notes"][:50]}))
    fault = trial_fault(events) or (agent.detail if agent.stop_reason is StopReason.MODEL_ERROR else None)
    verdict = dataclasses.replace(decide(crits, agent.stop_reason, broken_reason(events),
                                         None if agent.stop_reason.is_budget else fault),
                                  grader_version=grader_version(task))
    lap("grading")  # the criteria, computed on the host
    return Grade(verdict, diff, run, sum(used, Usage()))


def grader_version(task: Task) -> str:
    """The version a verdict is graded with: trialbox's grader and the content of the task's grader folder (the
    same for a run and a regrade, so verdict histories compare like with like)."""
    return f"{GRADER_VERSION}+{tree_sha256(task.grader_folder)[:12]}"
