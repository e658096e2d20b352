"""``trialbox tasks import-harbor``: Harbor task folders become trialbox task and grader folders.

A Harbor task folder holds ``task.toml`` (read by ``harbortoml``), ``instruction.md``, ``environment/``
(a Dockerfile and its build context), ``tests/`` (``test.sh`` and its files) and, optionally,
``solution/`` (``solve.sh``). Per task, the importer writes:

* ``<tasks>/<id>/``: ``task.yaml`` (its ``origin`` records the Harbor task's content digest and
  metadata), ``instruction.md``, ``environment/`` (the Dockerfile, its base image pinned — see below) and
  ``repo/``: **the task's initial state, what the built environment holds at its working directory**, copied
  out of the image once, on the host (without any ``.git``); trialbox commits it history-free like any
  repository and mounts the workspace disk at that path (``workdir``), in the agent's sandbox and in the
  grader. Nothing else of the image changes.
* ``<graders>/<id>/``: ``grader.yaml`` (``kind: script``), ``tests/`` and ``solution/``: held out, never in
  the agent's container (the solution enters only the oracle's sandbox, when it runs).

**Base images.** trialbox never pulls. Each ``FROM`` of the Dockerfile (and a ``docker_image``) is pinned:
an image named in ``--base-image NAME=RECIPE`` becomes that trialbox recipe (the first such ``FROM`` is the
recipe's ``BASE``, so the chain rebuilds when the recipe changes; others are pinned by the recipe's image ID);
an image the engine already has is pinned by its image ID; anything else is a refusal naming it.

A task with any refusal (see ``harbortoml``; also: a compose environment, no test script, a working directory
that is ``/`` or a system folder) is not written; every refusal is reported, one line each, and the command
exits 1. Fields with no effect here are listed per task as notes.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import docker
import yaml

from .engine import docker_errors
from .errors import ImageBuildError, TrialboxError
from .harbortoml import HarborTask, Refusal, fetches, read_task_toml
from .hashing import tree_sha256
from .images import NO_PARENT, build_recipe, load_recipe
from .sandbox.disks import workspace_filter
from .settings import Settings
from .taskload import SYSTEM_PATHS, load_task
from .tasks import Acceptance

FROM = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.I)
TASK_ID = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_REPO_BYTES = 512 << 20


@dataclass
class Imported:
    """One task written (or, with refusals, not written)."""

    task_id: str
    source: Path
    workdir: str = ""
    notes: list[str] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    tasks_dir: Path = Path(".")

    def refuse(self, task: str, fld: str, reason: str) -> None:
        self.refusals.append(Refusal(task, fld, reason))


def task_folders(dirs: list[Path]) -> list[Path]:
    """Each DIR is a Harbor task folder (holding task.toml) or a folder of them (a dataset)."""
    out = []
    for d in dirs:
        if (d / "task.toml").is_file():
            out.append(d)
        elif d.is_dir():
            out += sorted(p for p in d.iterdir() if (p / "task.toml").is_file())
    return out


def _pin_from(dockerfile: str, base_images: dict[str, str], resolve: Callable[[str], str | None],
              recipe_id: Callable[[str], str], refuse: Callable[[str, str], None]) -> tuple[str, str | None]:
    """The Dockerfile with every external ``FROM`` pinned, and the recipe its ``BASE`` is (None: none)."""
    stages: set[str] = set()
    parent = None
    lines = []
    for line in dockerfile.splitlines():
        m = FROM.match(line)
        if not m:
            lines.append(line)
            continue
        head, flags, image, tail = m.groups()
        alias = re.search(r"\bAS\s+(\S+)", tail, re.I)
        if image.lower() in stages:
            lines.append(line)
        elif "$" in image:
            refuse("environment/Dockerfile", f"FROM {image}: a base image given by a build argument cannot be pinned")
        elif image in base_images and parent in (None, base_images[image]):
            parent = base_images[image]
            lines.append(f"{head}{flags}${{BASE}}{tail}")
        elif image in base_images:
            lines.append(f"{head}{flags}{recipe_id(base_images[image])}{tail}")
        elif (pinned := resolve(image)) is not None:
            lines.append(f"{head}{flags}{pinned}{tail}")
        else:
            refuse("environment/Dockerfile", f"FROM {image}: the engine does not have this image and trialbox never "
                                             f"pulls: load it, or map it to a trialbox recipe with --base-image "
                                             f"{image}=RECIPE")
        if alias:
            stages.add(alias.group(1).lower())
    return "\n".join((["ARG BASE"] if parent else []) + lines) + "\n", parent


def _links_out(source: Path) -> list[tuple[str, str]]:
    """Symbolic links of the task folder that would bring in something from outside it: the folder's own entries
    (``instruction.md``, ``tests``…) may not be links at all; links inside ``tests``, ``solution`` and
    ``environment`` must stay inside the task folder (the importer copies them as links)."""
    out = []
    root = source.resolve()
    for name in ("task.toml", "instruction.md", "tests", "solution", "environment"):
        if (source / name).is_symlink():
            out.append((name, "a symbolic link: the task's files must be in its folder, not brought in from elsewhere"))
    for name in ("tests", "solution", "environment"):
        folder = source / name
        if not folder.is_dir() or folder.is_symlink():
            continue
        for path in sorted(folder.rglob("*")):
            if path.is_symlink() and not (path.parent.resolve() / os.readlink(path)).resolve().is_relative_to(root):
                out.append((path.relative_to(source).as_posix(), f"a symbolic link to {os.readlink(path)!r}, outside "
                                                                 "the task folder"))
    return out


ROOTS = r"/(?:home|root|tmp|var|opt|srv|data|mnt|output|outputs|results|usr/local/share)"
ABSOLUTE = re.compile(r"""["'](""" + ROOTS + r"""(?:/[^"'\s]*)?)["']""")
UNDER_ROOTS = re.compile("^" + ROOTS + "(?:/|$)")


def paths_outside(tests: Path, workdir: str) -> list[str]:
    """Absolute paths the task's test files name that lie outside the workspace (and outside the grader's own
    folders): where a shared-container harness would find what the agent left, and trialbox's grader cannot."""
    found: list[str] = []
    root = workdir.rstrip("/")
    for path in sorted(tests.rglob("*")) if tests.is_dir() else []:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > 1 << 20:
            continue
        for m in ABSOLUTE.finditer(path.read_text(errors="replace")):
            for p in m.group(1).split(":"):  # a PATH-like list names several
                p = p.rstrip("/")
                if not UNDER_ROOTS.match(p) or "$" in p or p == root or p.startswith(root + "/") \
                        or root.startswith(p + "/") or p.startswith("/logs/"):
                    continue
                if p not in found:
                    found.append(p)
    return found


def absent_from_image(client: docker.DockerClient, image_id: str, paths: list[str], most: int = 20) -> list[str]:
    """Those of ``paths`` the image does not hold (what the image holds, the grader has too: only what an agent
    would have to leave there is a concern)."""
    out = []
    with docker_errors():
        container = client.containers.create(image_id, command=["true"], network_disabled=True)
        try:
            api = client.api
            for path in paths[:most]:  # HEAD: the path's stat only, no archive streamed
                res = api.head(api._url("/containers/{0}/archive", container.id), params={"path": path})
                if res.status_code == 404:
                    out.append(path)
        finally:
            container.remove(force=True)
    return out


def _workdir_problem(workdir: str) -> str | None:
    if not workdir or workdir == "/":
        return "the environment sets no working directory (WORKDIR, or [environment] workdir): the task's files " \
               "have no place to be the workspace"
    if any(workdir == p or workdir.startswith(p + "/") or p.startswith(workdir.rstrip("/") + "/")
           for p in SYSTEM_PATHS):
        return f"the working directory {workdir} is (or holds, or is inside) a system folder"
    return None


def _extract(client: docker.DockerClient, image_id: str, workdir: str, dest: Path) -> list[str]:
    """The image's ``workdir`` content into ``dest`` (no ``.git``; safe names only); the notes it leaves."""
    notes = []
    with docker_errors():
        container = client.containers.create(image_id, command=["true"], network_disabled=True)
        try:
            stream, _ = container.get_archive(workdir)
            data = io.BytesIO()
            for chunk in stream:
                data.write(chunk)
                if data.tell() > MAX_REPO_BYTES:
                    raise TrialboxError(f"the working directory {workdir} holds more than "
                                        f"{MAX_REPO_BYTES >> 20} MB")
        finally:
            container.remove(force=True)
    data.seek(0)
    root = PurePosixPath(workdir).name
    dropped = set()
    copies: list[tuple[tarfile.TarInfo, tarfile.TarInfo]] = []
    with tarfile.open(fileobj=data) as tar:
        members = []
        by_name = {m.name: m for m in tar.getmembers()}  # before any is renamed
        for member in tar.getmembers():
            rel = PurePosixPath(member.name)
            if rel.parts and rel.parts[0] == root:
                rel = PurePosixPath(*rel.parts[1:]) if len(rel.parts) > 1 else PurePosixPath(".")
            if str(rel) == "." or rel.parts[0] == ".git":
                if str(rel) != ".":
                    dropped.add(".git")
                continue
            if member.isdev() or member.isfifo():
                dropped.add(str(rel))
                continue
            if member.islnk():  # a hard link becomes a copy of its target (git keeps no hard links)
                target = by_name.get(member.linkname)
                if target is None or not target.isreg():
                    dropped.add(str(rel))
                    continue
                copy = tarfile.TarInfo(str(rel))
                copy.size, copy.mode, copy.mtime = target.size, target.mode, target.mtime
                copies.append((copy, target))
                continue
            member.name = str(rel)
            members.append(member)
        dest.mkdir(parents=True, exist_ok=True)
        # symbolic links are kept as they are (data in the repository); every name stays inside dest
        tar.extractall(dest, members=members, filter=workspace_filter)
        for copy, target in copies:
            fh = tar.extractfile(target)
            if fh is not None:
                out = dest / copy.name
                workspace_filter(copy, str(dest))  # raises when its place is outside dest
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(fh.read())
                out.chmod(copy.mode & 0o755 | 0o600)
    if dropped:
        notes.append(f"left out of the workspace: {sorted(dropped)[:10]} (history, devices and pipes are never "
                     f"part of a task's initial state)")
    if copies:
        notes.append(f"{len(copies)} hard link(s) became copies of their targets (a repository holds no hard links)")
    return notes


def _task_yaml(task_id: str, h: HarborTask, workdir: str, digest: str, source: Path) -> dict[str, Any]:
    difficulty = str(h.metadata.get("difficulty", "")).lower()
    requires: dict[str, Any] = {k: v for k, v in (("cpus", h.cpus), ("memory_mb", h.memory_mb),
                                                  ("storage_mb", h.storage_mb)) if v is not None}
    if h.network == "none":
        requires["network"] = "none"
    doc: dict[str, Any] = {
        "id": task_id, "instruction": "instruction.md", "repo": {"dir": "repo"}, "image": "./environment",
        "difficulty": difficulty if difficulty in ("easy", "medium", "hard") else "medium",
        "workdir": workdir, "requires": requires, "env": h.env,
        "origin": {"format": "harbor", "name": str(h.metadata.get("task.name") or h.name), "digest": digest,
                   "schema_version": h.schema_version, "source": str(source),
                   "metadata": json.loads(json.dumps(h.metadata, default=str))}}
    if h.agent_timeout_s is not None:
        doc["deadline_seconds"] = h.agent_timeout_s
    return doc


VERIFIER = "verifier"
"""The grader folder's recipe of a separate verifier image (``GraderConfig.image``)."""


def _verifier_image(source: Path, h: HarborTask, result: Imported, base_images: dict[str, str],
                    resolve: Callable[[str], str | None], recipe_id: Callable[[str], str]
                    ) -> tuple[str, str | None, bool] | None:
    """A separate verifier's image as Harbor resolves it: ``[verifier.environment] docker_image``, else one built
    from ``tests/`` (its ``Dockerfile``, ``tests/`` the build context), else a copy of the task's environment
    (trialbox's grader is that already: None). Its ``FROM`` is pinned as the environment's is. Returns the pinned
    Dockerfile, the recipe it builds on, and whether ``tests/`` is its context."""
    own = source / "tests" / "Dockerfile"
    if not h.verifier_separate:
        if own.is_file():
            result.notes.append("tests/Dockerfile: not used, the verifier is not separate (Harbor builds it only for "
                                "environment_mode = \"separate\"); trialbox grades in a container of the task's "
                                "environment")
        return None
    if h.verifier_image is None and not own.is_file():
        result.notes.append("verifier: separate, from a copy of the task's environment: trialbox's grader is a "
                            "separate container of the task's environment")
        return None
    text = f"FROM {h.verifier_image}\n" if h.verifier_image is not None else own.read_text(errors="replace")
    where = "verifier.environment.docker_image" if h.verifier_image is not None else "tests/Dockerfile"
    pinned, parent = _pin_from(text, base_images, resolve, recipe_id,
                               lambda f, why: result.refuse(h.name, where, why))
    result.notes.append(f"verifier: separate, in its own image ({where}), built from the grader folder "
                        f"({VERIFIER}/) and pinned in the lock; the agent never sees it")
    return pinned, parent, h.verifier_image is None


def _write_verifier(source: Path, out_grader: Path, dockerfile: str, parent: str | None, context: bool) -> None:
    folder = out_grader / VERIFIER
    if context:  # Harbor's build context for tests/Dockerfile is tests/
        shutil.copytree(source / "tests", folder, symlinks=True)
    else:
        folder.mkdir()
    (folder / "Dockerfile").write_text(dockerfile)
    (folder / "environment.yaml").write_text(yaml.safe_dump({"from": parent or NO_PARENT}))


def _kept_acceptance(grader_yaml: Path) -> str | None:
    """The acceptance of an earlier import's (or a person's) ``grader.yaml``, as ``--acceptance`` text; None when
    there is none or it does not read as one (the import then writes the default, and ``tasks check`` tells)."""
    try:
        doc = yaml.safe_load(grader_yaml.read_text(encoding="utf-8"))
        return Acceptance.model_validate(doc["acceptance"]).text() if isinstance(doc, dict) and doc.get("acceptance") \
            else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError):
        return None


def _grader_yaml(h: HarborTask, has_solution: bool, verifier: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {"kind": "script", "tests": "tests", "script": "test.sh", "tests_mount": "/tests",
                           "reward_dir": "/logs/verifier", "solution": "solution" if has_solution else None,
                           "env": h.verifier_env, "solution_env": h.solution_env}
    if h.acceptance:
        doc["acceptance"] = h.acceptance
    if verifier:
        doc["image"] = VERIFIER
    if h.verifier_timeout_s is not None:
        doc["timeout_seconds"] = h.verifier_timeout_s
    return doc


def _folder_refusals(source: Path, h: HarborTask, result: Imported, force: bool, out: tuple[Path, Path]) -> None:
    """What of the folder itself cannot be honoured (before any engine is asked), and the notes on its scripts."""
    for problem in _links_out(source):
        result.refuse(h.name, *problem)
    env_dir = source / "environment"
    compose = (env_dir / "docker-compose.yaml").is_file() or (env_dir / "docker-compose.yml").is_file()
    if compose:
        result.refuse(h.name, "environment/docker-compose.yaml", "a multi-service compose environment cannot be "
                                                                 "honoured: a trial is one sandbox container (and a "
                                                                 "separate grader)")
    if not (source / "instruction.md").is_file():
        result.refuse(h.name, "instruction.md", "not found")
    if not (source / "tests" / "test.sh").is_file():
        result.refuse(h.name, "tests/test.sh", "not found: the task has no test script")
    if not (env_dir / "Dockerfile").is_file() and h.docker_image is None and not compose:
        result.refuse(h.name, "environment/Dockerfile", "not found, and task.toml names no docker_image")
    for name in ("tests/test.sh", "solution/solve.sh"):
        if (source / name).is_file() and (lines := fetches((source / name).read_text(errors="replace"))):
            result.notes.append(f"{name} seems to download ({lines[0][:120]!r}): the grader and the sandbox have no "
                                f"network; `tasks check` shows whether it still works")
    for folder in out:
        if folder.exists() and not force:
            result.refuse(h.name, "", f"{folder} exists (--force replaces it)")


def import_task(source: Path, tasks_dir: Path, graders_dir: Path, images_dir: Path, client: docker.DockerClient,
                settings: Settings, base_images: dict[str, str], force: bool = False,
                say: Callable[[str], None] | None = None, acceptance: str | None = None) -> Imported:
    """Import one Harbor task folder (see the module docstring). ``acceptance`` (``"correctness>=1,…"``) is
    written into the grader; without it, a re-import keeps the acceptance of the grader folder it replaces (a
    declaration made once, at an earlier import or by hand, survives)."""
    h = read_task_toml(source)
    task_id = TASK_ID.sub("-", source.name).strip("-.") or "task"
    result = Imported(task_id, source, notes=h.notes, refusals=h.refusals, tasks_dir=tasks_dir)
    out_task, out_grader = tasks_dir / task_id, graders_dir / task_id
    _folder_refusals(source, h, result, force, (out_task, out_grader))
    if result.refusals:
        return result
    if acceptance is None and (kept := _kept_acceptance(out_grader / "grader.yaml")) is not None:
        acceptance = kept
        result.notes.append(f"acceptance {kept!r} kept from the grader folder this import replaces")
    h.acceptance = acceptance

    def resolve(image: str) -> str | None:
        with docker_errors():
            try:
                return client.images.get(image).id
            except docker.errors.ImageNotFound:
                return None

    def recipe_id(name: str) -> str:
        return build_recipe(client, images_dir, load_recipe(name, images_dir / name), settings, say).image_id

    env_dir = source / "environment"
    has_dockerfile = (env_dir / "Dockerfile").is_file()
    text = (env_dir / "Dockerfile").read_text() if has_dockerfile else f"FROM {h.docker_image}\n"
    if has_dockerfile and h.docker_image is not None:
        result.notes.append("environment.docker_image: not used, the environment's Dockerfile is built (as Harbor "
                            "does for the local engine)")
    pinned, parent = _pin_from(text, base_images, resolve, recipe_id, lambda f, why: result.refuse(h.name, f, why))
    verifier = _verifier_image(source, h, result, base_images, resolve, recipe_id)
    if result.refusals:
        return result
    for folder in (out_task, out_grader):
        shutil.rmtree(folder, ignore_errors=True)
    try:
        _write(source, out_task, out_grader, pinned, parent, env_dir if has_dockerfile else None)
        if verifier is not None:
            _write_verifier(source, out_grader, *verifier)
        _build_and_take(source, h, result, client, settings, images_dir, graders_dir, say)
    except (_Refused, ImageBuildError, tarfile.TarError, TrialboxError) as exc:
        if isinstance(exc, ImageBuildError):
            result.refuse(h.name, "environment/Dockerfile", f"the environment does not build: {exc.message}")
        elif isinstance(exc, tarfile.TarError):
            result.refuse(h.name, "environment/Dockerfile", f"the working directory {result.workdir} cannot be taken "
                                                            f"as the task's repository: {exc}")
        elif isinstance(exc, TrialboxError):
            result.refuse(h.name, "environment/Dockerfile", exc.message)
        for folder in (out_task, out_grader):
            shutil.rmtree(folder, ignore_errors=True)
    return result


def _build_and_take(source: Path, h: HarborTask, result: Imported, client: docker.DockerClient, settings: Settings,
                    images_dir: Path, graders_dir: Path, say: Callable[[str], None] | None) -> None:
    """Build the written environment, take its working directory as the repository, write the two YAML files
    and load the task back; ``_Refused`` (after recording why) when any of it cannot be honoured."""
    out_task, out_grader = result.tasks_dir / result.task_id, graders_dir / result.task_id
    record = build_recipe(client, images_dir, load_recipe(f"{result.task_id}:environment", out_task / "environment"),
                          settings, say)
    with docker_errors():
        workdir = h.workdir or str(client.images.get(record.image_id).attrs.get("Config", {}).get("WorkingDir") or "")
    why = _workdir_problem(workdir)
    if why:
        result.refuse(h.name, "environment/Dockerfile", why)
        raise _Refused()
    result.workdir = workdir
    result.notes += _extract(client, record.image_id, workdir, out_task / "repo")
    outside = absent_from_image(client, record.image_id, paths_outside(source / "tests", workdir))
    if outside:
        result.notes.append(f"the tests refer to {', '.join(outside[:4])}{' …' if len(outside) > 4 else ''}, "
                            f"outside the workspace ({workdir}): only the workspace reaches trialbox's separate "
                            f"grader, so what an agent leaves elsewhere is not graded (`tasks check` shows "
                            f"whether the oracle still passes)")
    digest = "sha256:" + tree_sha256(source)
    (out_task / "task.yaml").write_text(yaml.safe_dump(_task_yaml(result.task_id, h, workdir, digest, source),
                                                       sort_keys=False, allow_unicode=True))
    has_solution = (source / "solution" / "solve.sh").is_file()
    verifier = (out_grader / VERIFIER / "Dockerfile").is_file()
    (out_grader / "grader.yaml").write_text(yaml.safe_dump(_grader_yaml(h, has_solution, verifier), sort_keys=False))
    _, problems = load_task(out_task, graders_dir, images_dir)
    for p in problems:
        result.refuse(h.name, p.field, f"the imported task does not load: {p.message}")
    if problems:
        raise _Refused()


class _Refused(Exception):
    """A refusal found after writing began: the partial folders are removed."""


def _write(source: Path, out_task: Path, out_grader: Path, dockerfile: str, parent: str | None,
           context: Path | None) -> None:
    out_task.mkdir(parents=True)
    out_grader.mkdir(parents=True)
    shutil.copyfile(source / "instruction.md", out_task / "instruction.md")
    env = out_task / "environment"
    if context is not None:
        shutil.copytree(context, env, symlinks=True)
    else:
        env.mkdir()
    (env / "Dockerfile").write_text(dockerfile)
    # the recipe it builds on: the mapped trialbox recipe, or none (every FROM is pinned by image ID)
    (env / "environment.yaml").write_text(yaml.safe_dump({"from": parent or NO_PARENT}))
    shutil.copytree(source / "tests", out_grader / "tests", symlinks=True)
    if (source / "solution" / "solve.sh").is_file():
        shutil.copytree(source / "solution", out_grader / "solution", symlinks=True)
