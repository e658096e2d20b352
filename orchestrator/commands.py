"""The commands that work on experiments and their run folders: run, show, regrade, tasks check, report, reproduce,
calibrate and import; and the helpers every command prints and connects through.

Whatever is printed goes through ``textsafe.printable_lines`` (see ``cli``); ``--scripted-model`` starts the
scripted Messages-API server for the command's duration.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import ConfigError
from .textsafe import printable, printable_lines


def echo(text: object = "", file=None, flush: bool = False) -> None:
    """Print ``text`` with every line terminal-safe (``printable_lines``)."""
    print(printable_lines(str(text)), file=file if file is not None else sys.stdout, flush=flush)


def err(text: object) -> None:
    echo(text, file=sys.stderr)


def say(line: str) -> None:
    """The progress callback of long commands: one line (or a few) at once, terminal-safe, flushed. Its callers
    make every field that is not trialbox's own ``printable`` first, so the columns they pad are kept as they
    are (controls and line breaks are still escaped here)."""
    print(printable_lines(str(line), space_runs=False), flush=True)


def connect_engine():
    from .engine import connect
    return connect()


def load_all(path: Path):
    from .loading import load_manifest
    from .taskload import load_tasks

    loaded = load_manifest(path)
    return loaded, load_tasks(loaded)


def scripted_model(path: str):
    """Start the scripted model server and point this process's agents at it."""
    import os

    from .agents.scripted_server import ScriptedModelServer

    server = ScriptedModelServer()
    server.load(Path(path))
    server.start()
    os.environ["ANTHROPIC_BASE_URL"] = os.environ["OPENAI_BASE_URL"] = server.url  # it speaks both APIs
    keys = [name.split("#", 1)[0] for name in server.scripts]
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        # a key already in the shell (a real one, most often) is presented only when the script has it; otherwise
        # the script's first key is: a real key is never sent to the scripted server, nor answered with a 401
        if keys and os.environ.get(var, "").strip() not in keys:
            os.environ[var] = keys[0]
    print(f"scripted model server on {server.url}" + (f" (key presented: {os.environ.get('ANTHROPIC_API_KEY')})"
                                                     if keys else ""), flush=True)
    return server


def with_scripted_model(command):
    """Run ``command`` with the scripted model server up when ``--scripted-model`` is given."""
    def wrapped(args: argparse.Namespace) -> int:
        server = scripted_model(args.scripted_model) if getattr(args, "scripted_model", None) else None
        try:
            return command(args)
        finally:
            if server is not None:
                server.stop()
    return wrapped


def run_manifest(paths, override: str | None = None):
    """The manifest a run used and its tasks (``taskload.load_run_manifest``)."""
    from .taskload import load_run_manifest

    return load_run_manifest(paths, override)


@with_scripted_model
def cmd_run(args: argparse.Namespace) -> int:
    from .job import run_experiment

    loaded, tasks = load_all(Path(args.manifest))
    paths = run_experiment(loaded, tasks, connect_engine(), Path(args.out) if args.out else None,
                           say=say, backend=args.backend, ray_address=args.ray_address,
                           unchecked=args.unchecked, rerun_infra_errors=args.rerun_infra_errors,
                           live=sys.stdout.isatty())
    echo(f"results in {paths.root}")
    return 0


def run_paths(run: str):
    from .errors import TrialboxError
    from .store import RunPaths

    paths = RunPaths(Path(run))
    if not paths.db.exists():
        raise TrialboxError(f"{run}: not a run folder (no results.sqlite)")
    return paths


def cmd_show(args: argparse.Namespace) -> int:
    from .show import show_trial

    echo(show_trial(run_paths(args.run), args.trial))  # already printable line by line; this keeps it so
    return 0


@with_scripted_model
def cmd_regrade(args: argparse.Namespace) -> int:
    from .rerun import regrade_run

    paths = run_paths(args.run)
    loaded, tasks = run_manifest(paths, args.manifest)
    changed = regrade_run(paths, loaded, tasks, connect_engine(), say=say)
    print(f"{changed} verdict(s) changed")
    return 0


def cmd_tasks_check(args: argparse.Namespace) -> int:
    from .taskcheck import check_tasks

    loaded, tasks = load_all(Path(args.manifest))
    ok = check_tasks(loaded, tasks, connect_engine(), replicates=args.replicates, say=say, again=args.again,
                     mutants=args.mutants)
    return 0 if ok else 1


def cmd_export(args: argparse.Namespace) -> int:
    """Each recorded trial's trajectory, as ATIF JSON, one file per trial."""
    from .exporting import export_atif

    paths = run_paths(args.run)
    loaded, tasks = run_manifest(paths)
    out = Path(args.out) if args.out else paths.root / "atif"
    written = export_atif(paths, loaded, tasks, out)
    echo(f"{len(written)} trajectory(ies) in {out} (ATIF v1.4)")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import GATE, run_report, to_json
    from .summary import terminal

    paths = run_paths(args.run)
    report = run_report(paths, *run_manifest(paths))
    if args.html:
        from .html import render

        link = None
        if args.viewer:
            from urllib.parse import quote, urlencode

            base = args.viewer.rstrip("/") + "/runs/" + quote(paths.root.resolve().name, safe="")
            link = lambda task, cand: f"{base}/compare?" + urlencode({"task": task, "a": cand})  # noqa: E731
        Path(args.html).write_text(render(report, link))
    print(to_json(report) if args.json else terminal(report))  # JSON is ASCII (escaped); terminal() is printable
    return GATE[report["adoption"]["decision"]] if args.gate else 0


def cmd_view(args: argparse.Namespace) -> int:
    """``trialbox view [RUN…]``: the viewer over the run folders given (default: every run under ./runs)."""
    from .viewer.serve import named_runs, runs_under, serve

    folders = [Path(r) for r in args.runs] or runs_under(Path("runs"))
    if not folders:
        raise ConfigError("view: no run folder given, and none under ./runs (name one: trialbox view RUN)")
    serve(named_runs(folders), args.host, args.port, say=echo)
    return 0


@with_scripted_model
def cmd_reproduce(args: argparse.Namespace) -> int:
    from .rerun import reproduce_run

    paths = run_paths(args.run)
    loaded, tasks = run_manifest(paths)
    out = Path(args.out) if args.out else paths.root.with_name(paths.root.name + "-reproduced")
    differing = reproduce_run(paths, loaded, tasks, connect_engine(), out, say=say,
                              backend=args.backend, ray_address=args.ray_address, unchecked=args.unchecked)
    if differing:
        echo(f"{len(differing)} verdict(s) differ from {paths.root}:")
        for trial in differing:
            echo(f"  {printable(trial)}")
        return 1
    echo(f"every verdict matches {paths.root} (reproduced in {out})")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    import yaml

    from .errors import ConfigError
    from .rerun import calibrate_run

    if args.graders:
        if args.run or args.labels:
            raise ConfigError("calibrate: --graders MANIFEST takes no run or labels (those calibrate the judge)")
        return _calibrate_graders(Path(args.graders))
    if not (args.run and args.labels):
        raise ConfigError("calibrate: expected RUN LABELS (the judge) or --graders MANIFEST (the graders)")

    try:
        labels = yaml.safe_load(Path(args.labels).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{args.labels}: cannot read labels: {exc}") from exc
    if not isinstance(labels, dict) or not all(v in ("pass", "fail") for v in labels.values()):
        raise ConfigError(f"{args.labels}: expected a mapping of trial id to pass or fail")
    r = calibrate_run(run_paths(args.run), labels)
    rate = lambda x: "undefined (no such human label)" if x is None else f"{x:.1%}"  # noqa: E731
    span = lambda iv: f" [{iv[0]:.1%}, {iv[1]:.1%}]" if iv else ""  # noqa: E731
    echo(f"compared {r['compared']} trial(s): {r['human_pass']} labelled pass, {r['human_fail']} labelled fail")
    echo(f"false-positive rate: {rate(r['false_positive_rate'])}{span(r['false_positive_rate_interval'])} of "
           f"{r['human_fail']}  (judge pass, human fail: {r['false_positives']})")
    echo(f"false-negative rate: {rate(r['false_negative_rate'])}{span(r['false_negative_rate_interval'])} of "
           f"{r['human_pass']}  (judge fail, human pass: {r['false_negatives']})")
    echo(f"undeterminable: {r['undeterminable']}; judged but unlabelled: {len(r['unlabelled'])}")
    echo("calibrated: yes (both 95% intervals at most 20 points wide)" if r["calibrated"] else
           "calibrated: NO, too few labels for these rates to mean much: " + "; ".join(r["not_calibrated_because"]))
    return 0


def _calibrate_graders(manifest: Path) -> int:
    """``calibrate --graders``: each task's grader from its recorded check (``graderrates``); exit 1 when no task
    of the manifest has a recorded check for its current inputs."""
    from .checkrecords import checked_image, last_check
    from .graderrates import grader_rates, rates_lines
    from .lock import _images_section

    loaded, tasks = load_all(manifest)
    images = _images_section(connect_engine(), loaded.resolve(loaded.manifest.tasks.images), tasks)
    records = {t.id: last_check(t, checked_image(t, images)) for t in tasks}
    never = sorted(t for t, r in records.items() if r is None)
    rates = grader_rates(records, {t.id: t.cluster for t in tasks}, loaded.manifest.analysis.confidence)
    echo(f"graders of {len(tasks)} task(s), from their recorded `tasks check` ({len(never)} with no check recorded "
         f"for their inputs as they are now{': ' + ', '.join(never[:10]) if never else ''})")
    if never:
        from .lock import harness_identity

        echo(f"  a check is recorded for the task, its grader, its image and this trialbox (commit "
             f"{harness_identity().get('commit')}): after any change to one of them, `tasks check --mutants` again")
    for line in rates_lines(rates):
        echo(line)
    return 1 if len(never) == len(tasks) else 0


def cmd_import_swebench(args: argparse.Namespace) -> int:
    from .importers import import_swebench

    tasks_out = Path(args.out)
    graders_out = Path(args.graders) if args.graders else tasks_out.parent / "graders"
    result = import_swebench(Path(args.file), Path(args.repos), Path(args.specs), tasks_out, graders_out)
    for tid, fields in result.unmapped.items():
        echo(f"{tid}: not mapped (no trialbox meaning): {', '.join(fields)}")
    for tid, paths in result.outside_scope.items():
        echo(f"{tid}: warning: its own fix changes files outside the scope, so its oracle would be rejected on "
               f"scope: {', '.join(paths)} (widen `scope` in the specs file)")
    echo(f"imported {len(result.written)} instance(s): task folders in {tasks_out.absolute()}, held-out grader "
           f"folders in {graders_out.absolute()}{'' if args.graders else ' (beside the tasks; --graders to choose)'}: "
           f"{', '.join(result.written)}")
    echo("next: `trialbox images build --manifest M` and `trialbox tasks check M` with a manifest selecting them")
    return 0


def cmd_import_harbor(args: argparse.Namespace) -> int:
    """Harbor task folders to task and grader folders: one line per task, one per refusal; exit 1 if any."""
    from .harbor import import_task, task_folders
    from .settings import load_settings

    tasks_out = Path(args.out)
    graders_out = Path(args.graders) if args.graders else tasks_out.parent / "graders"
    images_dir = Path(args.images) if args.images else tasks_out.parent / "images"
    base_images = {}
    for item in args.base_image:
        name, sep, recipe = item.partition("=")
        if not sep or not name or not recipe:
            raise ConfigError(f"--base-image: expected IMAGE=RECIPE (e.g. python:3.11-slim=python), got {item!r}")
        if not (images_dir / recipe).is_dir():
            raise ConfigError(f"--base-image {item}: no recipe {recipe!r} under {images_dir}")
        base_images[name] = recipe
    if args.acceptance is not None:
        from .tasks import parse_acceptance

        try:
            parse_acceptance(args.acceptance)
        except ValueError as exc:
            raise ConfigError(f"--acceptance: {exc}") from None
    sources = task_folders([Path(d) for d in args.dirs])
    if not sources:
        raise ConfigError(f"no Harbor task folder (holding task.toml) in {', '.join(args.dirs)}")
    client = connect_engine()
    written, refused = [], 0
    for source in sources:
        r = import_task(source, tasks_out, graders_out, images_dir, client, load_settings(), base_images,
                        force=args.force, acceptance=args.acceptance)
        if r.refusals:
            refused += 1
            for refusal in r.refusals:
                err(f"refused {refusal}")
            continue
        written.append(r.task_id)
        echo(f"imported {r.task_id} (workspace {r.workdir})")
        for note in r.notes:
            echo(f"  note: {note}")
    echo(f"imported {len(written)} of {len(sources)} Harbor task(s): task folders in {tasks_out.absolute()}, held-out "
         f"grader folders in {graders_out.absolute()}" + (f"; {refused} refused" if refused else ""))
    if written:
        echo("next: `trialbox tasks check M` with a manifest selecting them")
    return 1 if refused else 0
