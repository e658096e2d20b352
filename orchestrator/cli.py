"""The ``trialbox`` command line: a thin layer over the library.

Every error trialbox raises on purpose is printed as one clear message (no
traceback) and exits with its code; Ctrl-C exits 130.

Messages, progress lines and problems can quote what an agent or a node sent,
so whatever is printed here goes through ``textsafe.printable_lines``: its own
line breaks are kept, every control, escape sequence and invisible formatting
character is shown escaped (``show`` and ``report`` make each logical line
``printable`` themselves, so a field cannot add a line there either).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import __version__
from .commands import (cmd_calibrate, cmd_export, cmd_import_harbor, cmd_import_swebench, cmd_regrade, cmd_report, cmd_reproduce, cmd_run,
                       cmd_show, cmd_tasks_check, cmd_view, connect_engine, echo, err, load_all, say)
from .errors import TrialboxError, ValidationFailed
from .mutants import DEFAULT_COUNT as DEFAULT_MUTANTS


def cmd_validate(args: argparse.Namespace) -> int:
    from .loading import parse_manifest
    from .taskload import collect_tasks

    status = 0
    for path in args.manifest:
        loaded, problems = parse_manifest(Path(path))
        tasks = []
        if loaded is not None:
            tasks, task_problems = collect_tasks(loaded)
            problems += task_problems
        for p in problems:
            err(p)
        if problems:
            err(f"{path}: {len(problems)} problem(s)")
            status = 1
        else:
            m = loaded.manifest  # type: ignore[union-attr]
            echo(f"{path}: ok ({len(m.candidates)} candidate(s), {len(tasks)} task(s), "
                   f"{m.execution.trials_per_task} trial(s) per task)")
    return status


def cmd_lock(args: argparse.Namespace) -> int:
    from .errors import DriftError
    from .lock import check_lock, lock_path, resolve_lock, write_lock
    from .settings import load_settings

    loaded, tasks = load_all(Path(args.manifest))
    current = resolve_lock(loaded, tasks, connect_engine(), load_settings())
    if args.check:
        try:
            check_lock(loaded, current)
        except DriftError as exc:
            err(f"{lock_path(loaded.path)}: {exc.message}")
            return 1
        echo(f"{lock_path(loaded.path)}: every identifier matches")
        return 0
    path = write_lock(loaded, current)
    echo(f"wrote {path}")
    return 0


def cmd_images_build(args: argparse.Namespace) -> int:
    from .images import build_images
    from .settings import load_settings

    if args.manifest:
        from .errors import ImageError
        from .taskcheck import build_environments

        from .agentlayers import build_agent_layers

        loaded, tasks = load_all(Path(args.manifest))
        client = connect_engine()
        records, failed = build_environments(loaded, tasks, client, say)
        for tid, why in failed.items():
            err(f"{tid}: {why}")
        environments = {t.image_key: records[t.image_key].image_id for t in tasks if t.image_key in records}
        layers = build_agent_layers(client, loaded, tasks, environments, load_settings(), say)
        for r in records.values():
            print(f"{r.name:10s} {r.image_id} {r.tag}")
        for (candidate, key), r in layers.items():
            print(f"{candidate} on {key}: {r.image_id} {r.tag}")
        if failed:
            raise ImageError(f"{len(failed)} task(s) have an environment that does not build")
        return 0
    records = build_images(connect_engine(), Path(args.images), load_settings(), args.names or None, say)
    for r in records.values():
        print(f"{r.name:10s} {r.image_id} {r.tag}")
    return 0


def cmd_images_save(args: argparse.Namespace) -> int:
    from .images import save_image

    ids = save_image(connect_engine(), Path(args.images), args.name, Path(args.out))
    for name, image_id in ids.items():
        print(f"{name:10s} {image_id}")
    print(f"saved to {args.out} (IDs in {args.out}.json)")
    return 0


def cmd_images_load(args: argparse.Namespace) -> int:
    from .images import load_images

    for name, image_id in load_images(connect_engine(), Path(args.file)).items():
        print(f"{name:10s} {image_id} (verified)")
    return 0


def cmd_gc(args: argparse.Namespace) -> int:
    from .sandbox.gc import collect_garbage
    from .settings import load_settings

    res = collect_garbage(connect_engine(), load_settings(), everything=args.all)
    print(f"removed {len(res.containers)} container(s), {len(res.volumes)} volume(s), {len(res.disks)} disk(s)"
          + (f", {len(res.copies)} folder(s) of copied mounts" if res.copies else ""))
    return 0


def cmd_verify_events(args: argparse.Namespace) -> int:
    from .events import verify_events

    try:
        result = verify_events(Path(args.file), expected_head=args.head)
    except OSError as exc:
        err(f"error: {args.file}: {exc.strerror}")
        return 1
    for p in result.problems:
        err(f"{args.file}: {p}")
    if not result.ok:
        return 1
    echo(f"{args.file}: intact ({result.count} events, final hash {result.head})")
    return 0


def cmd_model_server(args: argparse.Namespace) -> int:
    import time

    from .agents.scripted_server import ScriptedModelServer

    server = ScriptedModelServer(args.host, args.port)
    for script in args.script:
        server.load(Path(script))
    server.start()
    print(f"scripted model server on {server.url} (keys: {', '.join(server.scripts) or 'none'})", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        server.stop()


def _count(text: str) -> int:
    """A whole number, 0 or more (argparse's error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, 0 or more, got {text!r}")
    return value


def _unchecked_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--unchecked", action="store_true",
                   help="run tasks never checked by `trialbox tasks check` (recorded in the run's lock); "
                        "tasks whose last check failed are refused all the same")


def _backend_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=["local", "ray"], help="where trials run (default: execution.backend)")
    p.add_argument("--ray-address", metavar="HOST:PORT",
                   help="the Ray cluster (default: execution.ray_address, then RAY_ADDRESS)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trialbox", description="Evaluate coding agents without fooling yourself.")
    parser.add_argument("--version", action="version", version=f"trialbox {__version__}")
    parser.add_argument("--log-level", default="WARNING", help="structlog level (default WARNING)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="report every problem in manifests and the tasks they select")
    p.add_argument("manifest", nargs="+")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("lock", help="resolve and hash every identifier; write the lock beside M")
    p.add_argument("manifest")
    p.add_argument("--check", action="store_true", help="exit 1 listing every identifier that drifted")
    p.set_defaults(func=cmd_lock)

    p = sub.add_parser("images", help="images under images/")
    isub = p.add_subparsers(dest="images_command", required=True, metavar="ACTION")
    b = isub.add_parser("build", help="build every recipe whose content changed (cached by content)")
    b.add_argument("names", nargs="*")
    b.add_argument("--images", default="images", help="folder of recipes (default: images)")
    b.add_argument("--manifest", metavar="M", help="build every environment the tasks of manifest M need "
                                                   "(their recipes' chains, each once), naming the tasks of a failed build")
    b.set_defaults(func=cmd_images_build)
    b = isub.add_parser("save", help="write a built image into a tar (to put it on other machines)")
    b.add_argument("name")
    b.add_argument("--images", default="images", help="folder of recipes (default: images)")
    b.add_argument("--out", required=True, help="the tar to write (image IDs go to <out>.json)")
    b.set_defaults(func=cmd_images_save)
    b = isub.add_parser("load", help="load images saved by `images save`, checking every image ID")
    b.add_argument("file")
    b.set_defaults(func=cmd_images_load)

    p = sub.add_parser("run", help="run every trial of the manifest (resumes an interrupted run folder)")
    p.add_argument("manifest")
    p.add_argument("--out", help="run folder (default: runs/<name>-<time>)")
    p.add_argument("--scripted-model", metavar="FILE",
                   help="answer the model from this script file (offline demo; see `trialbox model-server`)")
    p.add_argument("--rerun-infra-errors", action="store_true",
                   help="on a run folder: run again every trial recorded as an infrastructure error, its retry spent "
                        "or not (without it, only those whose retry was not spent)")
    _backend_options(p)
    _unchecked_option(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("show", help="one trial's verdict, criteria with evidence, and event timeline")
    p.add_argument("run")
    p.add_argument("trial", help="trial id (task/candidate/replicate)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("regrade", help="grade the stored final workspaces again, without re-running any agent")
    p.add_argument("run")
    p.add_argument("--manifest", help="the manifest whose tasks and graders to use (default: the one the run used)")
    p.add_argument("--scripted-model", metavar="FILE", help="answer the semantic judge from this script file")
    p.set_defaults(func=cmd_regrade)

    p = sub.add_parser("report", help="metrics with intervals, comparisons and the adoption decision")
    p.add_argument("run")
    p.add_argument("--json", action="store_true", help="the results document (schemas/report.schema.json)")
    p.add_argument("--gate", action="store_true", help="exit 0 on ADOPT, 1 on REJECT, 3 otherwise")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page with plots")
    p.add_argument("--viewer", metavar="URL", help="with --html: link each task's cells to `trialbox view` at URL "
                   "(for example http://127.0.0.1:8770)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("view", help="a local web viewer over run folders: the run, every trial, comparisons, live")
    p.add_argument("runs", nargs="*", metavar="RUN", help="run folders (default: every run folder under ./runs)")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: this machine only)")
    p.add_argument("--port", type=int, default=8770, help="the port (0: any free one; default 8770)")
    p.set_defaults(func=cmd_view)

    p = sub.add_parser("export", help="each trial's trajectory from its host-recorded events (ATIF)")
    p.add_argument("run")
    p.add_argument("--format", choices=["atif"], default="atif", help="ATIF v1.4, Harbor's trajectory format")
    p.add_argument("--out", metavar="DIR", help="where to write one JSON file per trial (default: RUN/atif)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("reproduce", help="re-run from the run's lock; refuse and list any drift; compare verdicts")
    p.add_argument("run")
    p.add_argument("--out", help="folder for the new run (default: RUN-reproduced)")
    p.add_argument("--scripted-model", metavar="FILE", help="answer the model from this script file (offline)")
    _backend_options(p)
    _unchecked_option(p)
    p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("calibrate", help="the semantic judge's false-positive and false-negative rates against labels; "
                                         "with --graders, the graders' false-accept and false-reject rates")
    p.add_argument("run", nargs="?")
    p.add_argument("labels", nargs="?", help="YAML mapping of trial id to pass or fail (human labels)")
    p.add_argument("--graders", metavar="MANIFEST", help="instead: every task's grader, from its recorded `tasks check` "
                                                        "(mutants accepted, alternatives refused)")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("tasks", help="the task set")
    tsub = p.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")
    t = tsub.add_parser("check", help="oracle accepted, nop rejected, fail-to-pass failing untouched, flakiness, leaks")
    t.add_argument("manifest")
    t.add_argument("--replicates", type=int, default=2, help="oracle replicates per task (default 2)")
    t.add_argument("--again", action="store_true", help="check every task, even one whose passed check is recorded "
                                                        "for the same inputs (reused by default)")
    t.add_argument("--mutants", type=_count, nargs="?", const=DEFAULT_MUTANTS, default=0, metavar="N",
                   help="measure each grader's strength: grade N wrong variants of the reference solution (default "
                        f"{DEFAULT_MUTANTS} when given without N) as trials are graded; each costs one trial")
    t.set_defaults(func=cmd_tasks_check)

    t = tsub.add_parser("import-swebench", help="SWE-bench instances to task and grader folders")
    t.add_argument("file", help="instances: a JSON array, or one JSON object a line (JSONL)")
    t.add_argument("--repos", required=True, help="folder of repositories by owner/name (or owner/name.bundle)")
    t.add_argument("--specs", required=True, help="YAML per repository (and version): image, env, python_path, "
                                                  "install, pytest_plugins, test_command, scope, difficulty")
    t.add_argument("--out", required=True, help="folder for the task folders")
    t.add_argument("--graders", help="folder for the grader folders (default: beside --out, named graders)")
    t.set_defaults(func=cmd_import_swebench)

    t = tsub.add_parser("import-harbor", help="Harbor task folders to task and grader folders")
    t.add_argument("dirs", nargs="+", metavar="DIR", help="a Harbor task folder (holding task.toml) or a folder of them")
    t.add_argument("--out", required=True, help="folder for the task folders")
    t.add_argument("--graders", help="folder for the grader folders (default: beside --out, named graders)")
    t.add_argument("--images", help="the task set's recipes (default: beside --out, named images)")
    t.add_argument("--base-image", action="append", default=[], metavar="IMAGE=RECIPE",
                   help="build on this trialbox recipe where the Dockerfile says FROM IMAGE (repeatable)")
    t.add_argument("--force", action="store_true", help="replace task and grader folders that exist")
    t.add_argument("--acceptance", metavar="METRIC>=N,…",
                   help="which rewards mean accepted, every one holding (default: reward>=1; a re-import without it "
                        "keeps the grader's earlier acceptance)")
    t.set_defaults(func=cmd_import_harbor)

    p = sub.add_parser("verify-events", help="check a trial's event log: edited, removed or inserted lines")
    p.add_argument("file")
    p.add_argument("--head", help="the final hash recorded with the trial (detects a cut tail)")
    p.set_defaults(func=cmd_verify_events)

    p = sub.add_parser("model-server", help="serve scripted Messages API answers over HTTP (tests, offline demo)")
    p.add_argument("--script", action="append", default=[], help="YAML file of scripts (repeatable)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.set_defaults(func=cmd_model_server)

    p = sub.add_parser("gc", help="remove leftovers of crashed runs (only what carries trialbox labels)")
    p.add_argument("--all", action="store_true", help="remove every trialbox-labelled resource, live owners too")
    p.set_defaults(func=cmd_gc)
    return parser


WORK_COMMANDS = {cmd_run, cmd_tasks_check, cmd_regrade, cmd_reproduce}
"""Commands whose output closing cuts work short (exit 141); the rest only read (exit 0, as `head` expects)."""


def main(argv: list[str] | None = None) -> int:
    from .log import configure

    args = build_parser().parse_args(argv)
    configure(args.log_level.upper())
    try:
        return args.func(args)
    except ValidationFailed as exc:
        for p in exc.problems:
            err(p)
        return exc.exit_code
    except TrialboxError as exc:  # its message can quote agent data: every line is made printable
        err(f"error: {exc.message}")
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`trialbox report RUN | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if args.func in WORK_COMMANDS:  # work was cut short, not a reading: never a success
            try:
                print(f"the output closed: `trialbox {args.command}` stopped before its end (what finished is "
                      "kept; run the same command again to go on)", file=sys.stderr)
            except OSError:
                pass
            return 141  # 128 + SIGPIPE, as a shell reports a command its pipe ended
        return 0


if __name__ == "__main__":
    sys.exit(main())
