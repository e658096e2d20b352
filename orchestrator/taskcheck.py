"""``trialbox tasks check``: is this task set fit to be trusted?

For every task, in this order (the first failing step is the root cause and
later steps that depend on it are not run):

1. its environment builds (a failed build names the task, the step and the
   tail of the build log);
2. its repository holds one commit and nothing of the held-out material; the
   image holds none of the held-out files, nor the answer (the solution's
   distinctive added lines found installed somewhere, e.g. the library under
   test at a later version pulled in as a dependency);
3. its test patch applies to the untouched repository;
4. on the untouched repository (twice): the install step succeeds; pytest
   executes (a usage or internal error means no test ran: a test that did not
   run has neither failed nor passed); every fail-to-pass test fails (a test
   whose module cannot be imported before the fix counts as failing, as in
   SWE-bench); every pass-to-pass test passes; the grader's channels agree. A
   script grader must write a reward that is not accepted; one that *times out*
   there fails before (its tests wait for what the change makes): it is run
   once, not twice, nop's grading (the same run) is skipped, and the check
   records it, so a run's trials whose grading times out are the agent's failure
   at the cost of one timeout, not a grader checked against the untouched
   environment (``Task.untouched_times_out``);
5. the oracle is accepted on every replicate and nop is not (a failing solution
   script is named with its exit code and output; the trials of a task's last
   failed check are kept under the state folder, ``taskchecks/<task>``);
6. no outcome changes between identical runs (flaky tests);
7. every alternative correct solution of the grader folder (``alternatives/*.patch``) is accepted;
8. with ``--mutants N``: the grader's strength, N wrong variants of the reference solution graded as trials
   (``grader_strength``; not a problem when some survive: recorded and shown, for a person to judge).

A failure here is a *task-set error*: the task author's problem, never an
agent's outcome. Each task's verdict is recorded under the state folder keyed
by the task's hash, its repository's content, its grader's hash, its image ID,
its run-time settings, and the trialbox version and commit with the grader
tools' hash, so ``trialbox run`` refuses a task whose last check failed without
running it again, and names the tasks never checked (``--unchecked`` runs
them anyway; the run's lock records it).

Tasks are checked in parallel within admission control: a check holds one
slot of the host's share at the grader's CPU reservation (a check measures
nothing, so the manifest's reservations, which exist for comparability, do
not size it; its hard limits are the manifest's). Whatever a task's check raises,
a defect of trialbox's own included, is that task's problem line (type, message,
where it was raised) and the command goes on to report the others.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker

from .agents import BudgetLimits
from .backends import Admission
from .errors import GraderInfraError, ImageBuildError, TestPatchError, TrialboxError
from .events import read_events
from .grading.tree import tree_from_tar
from .grading.compose import compose
from .grading.runner import GraderLimits, TestRun, run_tests
from .grading.script import run_script
from .grading.trusted import trusted_tests
from .images import ImageRecord, build_recipe
from .manifest import LoadedManifest, NopCandidate, OracleCandidate
from .repos import materialize
from .sandbox.base import SandboxSpec
from .sandbox.disks import workspace_filter
from .sandbox.base import SandboxFactory, SandboxHost
from .sandbox.docker import docker_host
from .settings import load_settings
from .report import INTEGRITY_CRITERIA
from .store import FINAL_WORKSPACE, RunPaths
from .tasks import Task, git_env
from .checkrecords import TaskCheck, checked_image, record_path, reusable_check, save_check
from .diagnosis import criterion_detail, log_cause, untouched_problems
from .mutants import candidates as mutant_candidates, counted as mutants_counted, draw as draw_mutants
from .textsafe import printable
from .trial import TrialSpec, run_trial


SHOWN_PROBLEMS = 8
"""A task's problems printed under it; the rest are counted, and all are in its check record."""


# --------------------------------------------------------------------------- leaks
def _held_out(task: Task) -> dict[str, bytes]:
    out = {}
    for p in sorted(task.grader_folder.rglob("*")):
        if p.is_file() and p.name != "grader.yaml" and "__pycache__" not in p.parts and p.stat().st_size > 0:
            out[p.relative_to(task.grader_folder).as_posix()] = p.read_bytes()
    return out


def _history(tar: Path) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(tar) as tf:
        tf.extractall(tmp, filter=workspace_filter)
        proc = subprocess.run(["git", "-c", "safe.directory=*", "log", "--all", "--format=%H"], cwd=tmp,
                              capture_output=True, text=True, env=git_env())  # our own repository, made on the host
        return proc.stdout.split()


def distinctive_lines(patch: str, most: int = 6) -> list[str]:
    """The solution's added lines most likely to be found only where the answer is (long, not boilerplate)."""
    added = {line[1:].strip() for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")}
    keep = [a for a in added if len(a) >= 24 and not a.startswith(("#", '"""', "import ", "from "))
            and ("(" in a or len(a) >= 40)]
    return sorted(keep, key=lambda a: (-len(a), a))[:most]


def _image_leaks(sandboxes: SandboxFactory, image_id: str, held: dict[str, bytes], answer: list[str]) -> list[str]:
    """Held-out files in the image, and installed files holding the solution's distinctive lines."""
    names = sorted({Path(p).name for p in held})
    spec = SandboxSpec(image_id=image_id, name=f"tb-taskcheck-{uuid.uuid4().hex[:8]}", disk_limit_mb=32)
    problems = []
    with sandboxes(spec) as sb:
        if names:
            script = 'for n in "$@"; do find / -xdev -type f -name "$n" -exec sha256sum {} + 2>/dev/null; done'
            out = sb.exec(["sh", "-c", script, "sh", *names], timeout=120).text()
            digests = {hashlib.sha256(v).hexdigest(): k for k, v in held.items()}
            problems += [f"held-out {digests[line.split()[0]]} is in the image at {line.split(maxsplit=1)[1]}"
                         for line in out.splitlines() if line.split() and line.split()[0] in digests]
        if answer:
            sb.write_file("/tmp/answer.txt", "\n".join(answer).encode() + b"\n")
            script = ("grep -rlF -f /tmp/answer.txt --include='*.py' /usr /opt /home /srv /root 2>/dev/null | head -20;"
                      " true")
            hits = [h for h in sb.exec(["sh", "-c", script], timeout=180).text().splitlines() if h.strip()]
            for hit in hits:
                grep = sb.exec(["grep", "-cF", "-f", "/tmp/answer.txt", hit], timeout=60).text().strip()
                if grep.isdigit() and int(grep) >= min(2, len(answer)):
                    problems.append(f"the environment already holds the answer: {hit} has {grep} of the solution's "
                                    f"distinctive lines (an agent could copy the fix from there)")
    return problems


# --------------------------------------------------------------------------- one task
def check_task(task: Task, loaded: LoadedManifest, host: SandboxHost, image_id: str, replicates: int, folder: Path,
               notes: dict | None = None, mutants: int = 0, grader_image: str | None = None) -> list[str]:
    """Every problem of one task, the root cause first (steps that depend on a failed one are not run); the grader
    runs in ``grader_image`` when the grader names its own (``GraderConfig.image``), else in ``image_id``. ``notes``
    gets ``sealed`` (``sealing``) once the untouched repository ran, and ``strength`` (``grader_strength``, with
    ``mutants`` > 0) once the oracle and nop were judged right."""
    problems: list[str] = []
    repo = materialize(task, load_settings().repos_dir)
    commits = _history(repo.tar_path)
    if commits != [repo.commit]:
        problems.append(f"the repository shows {len(commits)} commits, expected exactly its one")
    original = tree_from_tar(repo.tar_path)
    held = _held_out(task)
    repo_digests = {hashlib.sha256(v).digest() for v in original.files.values()}
    problems += [f"held-out {p} is in the repository" for p, v in held.items() if hashlib.sha256(v).digest() in repo_digests]
    try:
        if task.grader.kind == "pytest":
            trusted_tests(task, original)
    except TestPatchError as exc:
        return [f"the test patch does not apply to the untouched repository: {exc.message}"] + problems
    solution = task.grader_path(task.grader.solution) if task.grader.solution is not None else None
    answer = distinctive_lines(solution.read_text(errors="replace")) \
        if solution is not None and solution.is_file() and solution.suffix == ".patch" else []
    sandboxes = host.sandboxes
    problems += _image_leaks(sandboxes, image_id, held, answer)
    g = task.grader
    nodes = g.fail_to_pass + g.pass_to_pass
    limits = GraderLimits(memory_limit_mb=loaded.manifest.environment.memory_limit_mb,
                          runtime=loaded.manifest.environment.runtime)
    if g.kind == "script":
        runs = [run_script(sandboxes, grader_image or image_id, original, task, limits, "tb-taskcheck")]
        if runs[0].timed_out:  # failing before, at the cost of one timeout: not run again, nor nop's grading
            task = task.model_copy(update={"untouched_times_out": True})
            if notes is not None:
                notes["untouched_times_out"] = task.grader.timeout_seconds or limits.timeout_s
        else:
            runs.append(run_script(sandboxes, grader_image or image_id, original, task, limits, "tb-taskcheck"))
    else:
        runs = [run_tests(sandboxes, image_id, compose(original, original, task), task, nodes, limits,
                          "tb-taskcheck") for _ in range(2)]
    before = untouched_problems(task, runs)
    if notes is not None and g.kind == "pytest":
        notes["sealed"] = sealing(task, runs)
    if before:
        return before + problems
    problems += _agents(task, loaded, host, image_id, replicates, folder, runs, nop=not task.untouched_times_out,
                        grader_image=grader_image)
    if not problems:
        alternatives: dict = {}
        problems += _alternatives(task, loaded, host, image_id, folder, alternatives, grader_image)
        if notes is not None and alternatives:
            notes["alternatives"] = alternatives
    if mutants > 0 and not problems and notes is not None:
        notes["strength"] = grader_strength(task, loaded, host, image_id, folder, original.files, mutants,
                                            grader_image)
    return problems


ALTERNATIVES = "alternatives"
"""A grader folder's other correct solutions: ``alternatives/*.patch``, each of which must be accepted."""


def _patch_trial(task: Task, loaded: LoadedManifest, host: SandboxHost, image_id: str, paths: RunPaths, run_id: str,
                 patch_file: Path, label: str, grader_image: str | None = None):
    """One trial of ``task`` whose oracle applies ``patch_file`` (on the host) instead of the reference solution,
    graded as every trial is; its verdict."""
    changed = task.model_copy(update={"grader": task.grader.model_copy(update={"solution": patch_file.resolve()})})
    spec = TrialSpec(f"{task.id}/{label}", run_id, changed, OracleCandidate(name=label.split("/")[0], agent="oracle"),
                     0, image_id, loaded.manifest.environment, BudgetLimits(deadline_seconds=600),
                     grader_image_id=grader_image, agent_layered=False)
    return run_trial(spec, loaded, host, paths).verdict


def _alternatives(task: Task, loaded: LoadedManifest, host: SandboxHost, image_id: str, folder: Path,
                  record: dict | None = None, grader_image: str | None = None) -> list[str]:
    """Every alternative correct solution in the grader folder accepted (each a patch, applied by the oracle through
    the host as the reference is, for either kind of grader); each one refused is a problem naming the criteria and
    tests that failed (a grader that rejects correct work)."""
    found = sorted((task.grader_folder / ALTERNATIVES).glob("*.patch"))
    if not found:
        return []
    paths, run_id, problems = RunPaths(folder / ALTERNATIVES), f"taskcheck-alt-{uuid.uuid4().hex[:8]}", []
    out = record if record is not None else {}
    out.update(total=len(found), accepted=[], rejected=[], not_graded=[])
    for patch in found:
        verdict = _patch_trial(task, loaded, host, image_id, paths, run_id, patch, f"alternative/{patch.stem}",
                               grader_image)
        if verdict.accepted:
            out["accepted"].append(patch.name)
            continue
        (out["rejected"] if verdict.outcome.value == "rejected" else out["not_graded"]).append(patch.name)
        failing = [c for c in verdict.criteria if c.critical and not c.passed]
        tests = sorted(n for c in failing for n, o in (c.evidence.get("outcomes") or {}).items() if o != "passed")
        problems.append(f"the alternative solution {ALTERNATIVES}/{patch.name} was not accepted ({verdict.outcome.value}: "
                        f"{', '.join(c.name for c in failing) or verdict.reasons}"
                        + (f"; failing: {', '.join(tests[:8])}" if tests else "") + "): the grader rejects correct "
                        "work, or the alternative is wrong")
    return problems


def grader_strength(task: Task, loaded: LoadedManifest, host: SandboxHost, image_id: str, folder: Path,
                    files: dict[str, bytes], count: int, grader_image: str | None = None) -> dict:
    """Up to ``count`` mutants of the reference solution (``orchestrator.mutants``), each applied by the oracle through the
    host and graded in a fresh grader container, exactly as a trial (one agent container and one grader each). A
    mutant the grader accepts *survived*: a wrong fix it lets through, unless the mutant is equivalent (a person
    judges its diff). A mutant whose trial ended in an infrastructure error is *not graded* and counts for
    neither side. ``strength`` = rejected / graded."""
    t0 = time.monotonic()
    sol = task.grader.solution
    if sol is None or not str(sol).endswith(".patch") or not task.grader_path(sol).is_file():
        return {"asked": count, "skipped": "the reference solution is not a patch (a solution script is not mutated)"}
    patch = task.grader_path(sol).read_text(errors="surrogateescape")
    try:
        found = mutant_candidates(patch, files)  # made once: the draw and the count of what exists
        made, available = draw_mutants(found, count, task.id), mutants_counted(found)
    except ValueError as exc:
        return {"asked": count, "skipped": str(exc)}
    out: dict = {"asked": count, "available": available, "generated": len(made), "rejected": 0, "graded": 0,
                 "survivors": [], "not_graded": [], "by_operator": {}, "mutants": [], "integrity": []}
    if not made:
        out.update(strength=None, seconds=round(time.monotonic() - t0, 3),
                   skipped="no line the reference solution adds in a Python file has a mutant that parses")
        return out
    where = folder / "mutants"
    where.mkdir(parents=True, exist_ok=True)
    paths = RunPaths(where)
    run_id = f"taskcheck-mutants-{uuid.uuid4().hex[:8]}"
    for mutant in made:
        patch_file = where / f"{mutant.id}.patch"
        patch_file.write_text(mutant.patch, errors="surrogateescape")
        verdict = _patch_trial(task, loaded, host, image_id, paths, run_id, patch_file, f"mutant/{mutant.id}",
                               grader_image)
        failing = [c.name for c in verdict.criteria if c.critical and not c.passed]
        outcome = "survived" if verdict.accepted else "rejected" if verdict.outcome.value == "rejected" else "not graded"
        entry = {**mutant.summary(), "outcome": outcome, "failing": failing}
        out["mutants"].append(entry)
        tally = out["by_operator"].setdefault(mutant.operator, {"rejected": 0, "graded": 0})
        if outcome == "not graded":
            out["not_graded"].append({"id": mutant.id, "outcome": verdict.outcome.value, "reasons": verdict.reasons})
            continue
        out["graded"] += 1
        tally["graded"] += 1
        if outcome == "rejected":
            out["rejected"] += 1
            tally["rejected"] += 1
            flagged = [name for name in failing if name in INTEGRITY_CRITERIA]
            if flagged:  # a mutant of the reference touches no test nor grader file: not its own doing to explain
                out["integrity"].append({"id": mutant.id, "failing": flagged})
        else:
            out["survivors"].append({**mutant.summary(), "diff": mutant.diff()})
    out["strength"] = round(out["rejected"] / out["graded"], 4) if out["graded"] else None
    out["seconds"] = round(time.monotonic() - t0, 3)
    return out


def strength_line(strength: dict | None) -> str:
    """The check line's account of ``grader_strength``."""
    if not isinstance(strength, dict):
        return ""
    if strength.get("skipped"):
        return f"; grader strength not measured: {strength['skipped']}"
    graded, rejected = strength.get("graded"), strength.get("rejected")
    if not isinstance(graded, int) or not isinstance(rejected, int):
        return ""
    line = f"; grader strength {rejected}/{graded} mutants rejected"
    asked, available = strength.get("asked"), strength.get("available")
    if isinstance(asked, int) and isinstance(available, int) and available < asked:
        line += f" (the reference solution has {available} distinct mutant(s), {asked} asked)"
    if strength.get("not_graded"):
        line += f" ({len(strength['not_graded'])} not graded: infrastructure)"
    odd = strength.get("integrity") or []
    if odd:
        line += ("; " + ", ".join(f"{o.get('id')} rejected on {'/'.join(o.get('failing') or [])}" for o in odd[:3])
                 + (f" and {len(odd) - 3} more" if len(odd) > 3 else "")
                 + " (a mutant of the reference touches no test: the grader's own fault, or the mutant's code reached"
                   " the grader's state; read its trial)")
    survivors = strength.get("survivors") or []
    if survivors:
        shown = ", ".join(f"{s.get('id')} {s.get('operator')} {s.get('path')}:{s.get('line')}" for s in survivors[:3])
        line += f"; SURVIVED (a wrong fix accepted, or an equivalent mutant: read its diff): {shown}" + \
            (f" and {len(survivors) - 3} more" if len(survivors) > 3 else "")
    return line


def sealing(task: Task, runs: list[TestRun]) -> dict:
    """Which fail-to-pass tests failed on the untouched repository, in every run, on a sealed value that decides
    (``Seal.deciding``: a literal the agent did not see, not a first guess, not after a block saying what must be
    refused) and that held nowhere on the untouched repository (a value that did not meet it, or that raised while
    it was computed: ``grading.seal``): code under test that does not compute that value cannot
    pass them by any forgery of the test process, so a task with one of them cannot be accepted untouched that way.
    The others' acceptance rests on the tripwire (its limits in the README's threat model), but for those whose sealed
    assertions the untouched repository never reached (``not_measured``: a forger must still send their values;
    whether its code would compute them right is not known)."""
    f2p = task.grader.fail_to_pass
    # a literal that held anywhere on the untouched repository (another case of a parametrized test, another test)
    # is one the code computes already: a forger replays it
    known = {lit for r in runs for s in r.sealed.values() for lit in s.get("held_literals", [])}
    decided = [n for n in f2p if runs and all(
        any(m.get("deciding") and m.get("literal") not in known for m in r.sealed.get(n, {}).get("mismatched", []))
        or any(m.get("deciding") and m.get("literal") not in known for m in r.sealed.get(n, {}).get("raised", []))
        for r in runs)]
    def unreached(s: dict) -> bool:  # a sealed assertion that neither sent a value nor raised
        return s.get("held", 0) + len(s.get("mismatched", [])) + len(s.get("raised", [])) < s.get("sealed", 0)

    unmeasured = [n for n in f2p if n not in decided and runs and runs[0].sealed.get(n)
                  and any(unreached(r.sealed.get(n, {})) for r in runs)]
    return {"fail_to_pass": len(f2p), "decided_by_sealed_values": decided,
            "with_sealed_assertions": [n for n in f2p if runs and runs[0].sealed.get(n)], "not_measured": unmeasured}


def sealing_line(sealed: dict | None) -> str:
    """The check line's account of ``sealing``."""
    if not isinstance(sealed, dict) or not isinstance(sealed.get("fail_to_pass"), int) or not sealed["fail_to_pass"] \
            or not isinstance(sealed.get("decided_by_sealed_values"), list):
        return ""
    n, total = len(sealed["decided_by_sealed_values"]), sealed["fail_to_pass"]
    unmeasured = len(sealed.get("not_measured") or [])
    return f"; fail-to-pass decided outside the test process: {n} of {total}" + \
        (f", {unmeasured} not measured (sealed assertions the untouched repository never reached: an earlier "
         "failure, or a module that does not import)" if unmeasured else "") + \
        (" (acceptance rests on the tripwire)" if not n and not unmeasured else "")


def _agents(task: Task, loaded: LoadedManifest, host: SandboxHost, image_id: str, replicates: int, folder: Path,
            runs: list[TestRun], nop: bool = True, grader_image: str | None = None) -> list[str]:
    """The oracle accepted on every replicate, nop never; outcomes stable across identical runs. Without ``nop``
    (the untouched environment timed out: nop's grading would be the same run, one more timeout), nop is not run:
    the untouched run already showed it fails."""
    g = task.grader
    problems = []
    verdicts = {}
    paths = RunPaths(folder)
    run_id = f"taskcheck-{uuid.uuid4().hex[:8]}"  # concurrent checks never share container names
    limits = BudgetLimits(deadline_seconds=600)
    m = loaded.manifest
    specs = [TrialSpec(f"{task.id}/oracle/{i}", run_id, task, OracleCandidate(name="oracle", agent="oracle"), i,
                       image_id, m.environment, limits, grader_image_id=grader_image, agent_layered=False)
             for i in range(replicates)]
    if nop:
        specs.append(TrialSpec(f"{task.id}/nop/0", run_id, task, NopCandidate(name="nop", agent="nop"), 0, image_id,
                               m.environment, limits, grader_image_id=grader_image, agent_layered=False))
    solution_failures = []
    for spec in specs:
        result = run_trial(spec, loaded, host, paths)
        files = paths.attempt(spec.trial_id, spec.attempt)
        verdicts[spec.trial_id] = (result.verdict.to_dict(), files.grader_log)
        if "/oracle/" in spec.trial_id and g.solution_is_script and not result.verdict.accepted:
            solution_failures += solution_script_failure(files.events)
    problems += list(dict.fromkeys(solution_failures))
    for tid, (v, log_file) in verdicts.items():
        if "/oracle/" in tid and not v["accepted"] and g.solution is None:
            problems.append("no reference solution (graders/<id>/solution): the oracle abstains and is not "
                            "accepted, so nothing shows that the tests can be passed")
        elif "/oracle/" in tid and not v["accepted"]:
            failing = [c for c in v["criteria"] if c["critical"] and not c["passed"]]
            detail = "; ".join(criterion_detail(c) for c in failing[:3])
            tested = any(c["name"] in ("fail_to_pass", "pass_to_pass", "grader_integrity", "reward") for c in failing)
            cause = log_cause(log_file, failing) if tested else None
            problems.append(f"the oracle was not accepted ({tid}: {v['outcome']} {v['reasons']})"
                            + (f": {cause}" if cause else "") + (f"; {detail}" if detail else ""))
        if "/nop/" in tid and v["accepted"]:
            problems.append(f"nop was accepted ({tid}): the " + ("test script does not test the change"
                            if g.kind == "script" else "fail-to-pass tests do not test the change"))
    if g.kind == "script":
        rewards = {tid: next((c["evidence"].get("metrics") for c in v["criteria"] if c["name"] == "reward"), None)
                   for tid, (v, _) in verdicts.items() if "/oracle/" in tid}
        if len({json.dumps(r, sort_keys=True) for r in rewards.values()}) > 1:
            problems.append(f"flaky: the oracle's reward changed between identical runs ({rewards})")
        return problems
    outcome_sets = [runs[0].outcomes, runs[1].outcomes] + [
        {k: val for c in verdict["criteria"] if c["name"] in ("fail_to_pass", "pass_to_pass")
         for k, val in c["evidence"]["outcomes"].items()} for tid, (verdict, _) in verdicts.items() if "/oracle/" in tid]
    for node in g.fail_to_pass + g.pass_to_pass:
        if len({s.get(node) for s in outcome_sets[:2]}) > 1 or len({s.get(node) for s in outcome_sets[2:]}) > 1:
            problems.append(f"flaky: {node} changed outcome between identical runs")
    return problems


# --------------------------------------------------------------------------- the set
def solution_script_failure(events_file: Path) -> list[str]:
    """What the oracle's solution script said when it failed (its exit code and the tail of its output)."""
    try:
        events = read_events(events_file)
    except (OSError, ValueError):
        return []
    for e in events:
        if e.get("kind") == "tool" and e.get("tool") == "bash" and e.get("exit_code") not in (0, None):
            tail = " ".join(str(e.get("output") or "").split())[-300:]
            return [f"the solution script exited {e['exit_code']}: {tail}"]
        if e.get("kind") == "tool" and e.get("tool") == "bash" and e.get("timed_out"):
            return ["the solution script did not finish within the deadline"]
    return []


def build_environments(loaded: LoadedManifest, tasks: list[Task], client, say: Callable[[str], None]
                       ) -> tuple[dict[str, ImageRecord], dict[str, str]]:
    """Build every environment the tasks need (each once); returns the records and, per task that cannot be
    built, its problem (the recipe, the failed step and the tail of the build log)."""
    images_dir = loaded.resolve(loaded.manifest.tasks.images)
    built: dict[str, ImageRecord] = {}
    failed: dict[str, str] = {}
    errors: dict[str, str] = {}
    for task in tasks:
        key = task.image_key
        if key in errors:
            failed[task.id] = errors[key]
            continue
        for what, recipe in (("environment", task.recipe), ("grader image", task.grader_recipe)):
            if recipe is None:
                continue
            if recipe.key in errors:
                failed[task.id] = errors[recipe.key]
                break
            try:
                build_recipe(client, images_dir, recipe, load_settings(), say, built)
            except (ImageBuildError, TrialboxError) as exc:
                tail = "\n".join(getattr(exc, "log_tail", "").splitlines()[-12:])
                errors[recipe.key] = f"{what} {recipe.key} does not build: {exc.message.splitlines()[0]}" + (
                    "\n      build log (tail):\n      " + tail.replace("\n", "\n      ") if tail else "")
                failed[task.id] = errors[recipe.key]
                break
    return built, failed


def sharing(tasks: list[Task], image_ids: dict[str, str]) -> list[str]:
    """Which tasks share which environment (one built image each)."""
    by_image: dict[str, list[str]] = {}
    for t in tasks:
        by_image.setdefault(image_ids[t.image_key], []).append(t.id)
    return [f"environment {iid[:19]} ({', '.join(sorted({t.image_key for t in tasks if t.id in ids}))}): "
            f"{len(ids)} task(s): {', '.join(ids)}" for iid, ids in sorted(by_image.items())]


def _raised(exc: BaseException) -> str:
    """An exception as a problem line: its type, message and where it was raised (the innermost frame)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" (at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno})" if tb is not None else ""
    return f"{type(exc).__name__}: {str(exc)[-500:]}{where}"


def check_tasks(loaded: LoadedManifest, tasks: list[Task], client: docker.DockerClient, replicates: int = 2,
                say: Callable[[str], None] = print, again: bool = False, mutants: int = 0) -> bool:
    """Check every task as it is now (in parallel within admission control); print one line per task, its root
    cause first, then a summary. Records each verdict for ``trialbox run``; reads and writes no lock. A task whose
    passed check is recorded for exactly these inputs, with as many replicates, is not checked again (its line
    says when it was checked) unless ``again``."""
    t0 = time.monotonic()
    records, build_failures = build_environments(loaded, tasks, client, say)
    image_ids = {key: r.image_id for key, r in records.items()}
    for tid, why in build_failures.items():
        say(f"{tid:32s} PROBLEM  {printable(why)}")
    buildable = [t for t in tasks if t.id not in build_failures]
    results: list[TaskCheck] = [TaskCheck(tid, [why]) for tid, why in build_failures.items()]
    if buildable:
        for line in sharing(buildable, image_ids):
            say(line)
        env = loaded.manifest.environment
        host = docker_host(client)  # the one place a check knows its sandboxes are Docker's
        admission = Admission.for_manifest(loaded.manifest)
        admission = Admission(admission.cpus, admission.memory_mb, min(env.cpu_reservation, GraderLimits.cpu_reservation),
                              env.memory_reservation_mb, admission.cap)
        with tempfile.TemporaryDirectory(prefix="trialbox-taskcheck-") as tmp, \
                ThreadPoolExecutor(max_workers=max(1, admission.slots), thread_name_prefix="taskcheck") as pool:
            def one(task: Task) -> TaskCheck:
                start = time.monotonic()
                image_id = image_ids[task.image_key]
                grader_image = image_ids[task.grader_image_key] if task.grader_recipe is not None else None
                checked = checked_image(task, image_ids)
                recorded = None if again else reusable_check(task, checked, replicates, mutants)
                if recorded is not None:
                    say(f"{task.id:32s} ok  (checked {printable(str(recorded.get('checked_at')))} with "
                        f"{recorded['replicates']} replicate(s), the same inputs: reused; --again checks it again"
                        f"{sealing_line(recorded.get('sealed'))}{strength_line(recorded.get('strength'))})")
                    return TaskCheck(task.id, [], 0.0, reused=True, sealed=recorded.get("sealed"),
                                     strength=recorded.get("strength"), alternatives=recorded.get("alternatives"))
                notes: dict = {}
                try:
                    problems = check_task(task, loaded, host, image_id, replicates, Path(tmp) / task.id, notes,
                                          mutants, grader_image)
                except GraderInfraError as exc:  # a TrialboxError too: the more specific account first
                    problems = [f"the grader could not run on this task ({exc.kind}): {exc.detail[-500:]}"]
                except TrialboxError as exc:
                    problems = [f"could not be checked: {exc.message}"]
                except Exception as exc:  # trialbox's own defect on this task: its problem line, not the command's end
                    problems = [f"trialbox failed while checking it: {_raised(exc)}"]
                strength = notes.get("strength") if isinstance(notes.get("strength"), dict) else {}
                # the last failed check's trials are kept, and a passed one's where its mutants need reading
                # (survivors, or a rejection on an integrity criterion)
                worth = bool(problems or strength.get("survivors") or strength.get("integrity"))
                kept_note = ""
                if worth and (Path(tmp) / task.id).is_dir():
                    kept = load_settings().state_dir / "taskchecks" / task.id
                    try:
                        shutil.rmtree(kept, ignore_errors=True)
                        # a passed check's trials are kept for reading its mutants: without the final workspaces
                        # (a repository's size per trial), which a failed check's keep
                        shutil.copytree(Path(tmp) / task.id, kept, symlinks=True, ignore=None if problems else
                                        shutil.ignore_patterns(FINAL_WORKSPACE))
                        kept_note = f"its check trials (events, diff, grader log per trial) are kept in {kept}"
                    except (OSError, shutil.Error) as exc:
                        kept_note = f"its check trials could not be kept in {kept}: {_raised(exc)}"
                    if problems:
                        problems.append(kept_note)
                        kept_note = ""
                check = TaskCheck(task.id, list(dict.fromkeys(problems)), time.monotonic() - start,
                                  sealed=notes.get("sealed"), strength=notes.get("strength"),
                                  alternatives=notes.get("alternatives"),
                                  untouched_times_out="untouched_times_out" in notes)
                try:
                    save_check(task, checked, check, replicates)
                except Exception as exc:  # unrecorded, `run` treats it as never checked
                    check = TaskCheck(task.id, [*check.problems, f"its verdict could not be recorded: {_raised(exc)}"],
                                      check.seconds, sealed=check.sealed, strength=check.strength,
                                      alternatives=check.alternatives)
                head = "ok" if check.ok else f"PROBLEM  {printable(check.problems[0])}"
                shown = SHOWN_PROBLEMS
                more = "".join(f"\n{'':32s}          {printable(p)}" for p in check.problems[1:shown])
                if len(check.problems) > shown:
                    more += (f"\n{'':32s}          … and {len(check.problems) - shown} more "
                             f"(every one in {record_path(task, checked)})")
                if kept_note and check.ok:
                    more += f"\n{'':32s}          {printable(kept_note)}"
                timeout = (f"; the untouched environment timed out ({notes['untouched_times_out']:g}s): counted as "
                           "failing before, so a trial's grading that times out is the agent's failure"
                           if "untouched_times_out" in notes else "")
                say(f"{task.id:32s} {head}  ({check.seconds:.1f}s{timeout}{sealing_line(check.sealed)}"
                    f"{strength_line(check.strength)}){more}")
                return check

            results += list(pool.map(one, buildable))
    bad = [r for r in results if not r.ok]
    reused = sum(r.reused for r in results)
    say(f"task set {'ok' if not bad else 'has problems'}: {len(results) - len(bad)} of {len(results)} task(s) ok "
        f"in {time.monotonic() - t0:.0f}s" + (f" ({reused} reused from a recorded check)" if reused else "")
        + (f"; with problems: {', '.join(r.task for r in bad)}" if bad else ""))
    return not bad
