"""The lock: every identifier that shaped a result, resolved and hashed.

``resolve_lock`` computes, for a manifest: the manifest's own hash, the
trialbox version and commit, the Docker engine version, each image's ID (and
repository digests) for its current recipe, each task's folder hash and the
commit of its history-free repository, each grader folder's hash, the dataset
revision and grader commit (hashes over those), prompt and script sha256s, the
tool contract revision, the model price table's version and the resource
limits and budgets. ``write_lock``
saves it beside the manifest as ``<name>.lock.json``; ``check_lock`` lists
every identifier that no longer matches, by name, with both values.

Identifiers the manifest states itself (``dataset_revision``,
``harness_commit``, ``grader_commit``, ``system_prompt_sha256``) are checked
against what was resolved, and a mismatch is refused by name.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path
from typing import Any

import docker

from .agentlayers import agent_images_section, layered
from . import __version__
from .engine import engine_version
from .errors import DriftError, ImageNotFound, LockError, Problem, ValidationFailed
from .hashing import combine, sha256_file, tree_sha256
from .agents.prices import load_prices
from .images import resolve_recipe
from .manifest import LoadedManifest
from .repos import materialize, source_identity
from .settings import Settings
from .tasks import Task, git_env

LOCK_VERSION = 1
VOLATILE = {"created_at"}
RECORDS = ("task_checks", "grader_strength", "untouched_timeouts")
"""Sections a run adds to its lock that record facts about the run, not identifiers that shape results."""


def lock_path(manifest_path: Path) -> Path:
    """Where the lock of a manifest lives: beside it, ``<stem>.lock.json``."""
    return manifest_path.with_name(f"{manifest_path.stem}.lock.json")


def harness_identity() -> dict[str, str]:
    """trialbox's version and, from a git checkout of trialbox itself, its commit."""
    src = Path(__file__).resolve().parent.parent
    commit = "unknown"
    proc = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, env=git_env())
    if proc.returncode == 0:
        commit = proc.stdout.strip()
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no", "--",
                                "orchestrator", "pyproject.toml"], capture_output=True, text=True, env=git_env())
        if dirty.stdout.strip():
            commit += "+dirty"
    return {"version": __version__, "commit": commit}


def _candidate_files(loaded: LoadedManifest) -> tuple[dict[str, str], dict[str, str]]:
    prompts, scripts = {}, {}
    for c in loaded.manifest.candidates:
        if getattr(c, "system_prompt", None) is not None:
            prompts[c.name] = sha256_file(loaded.resolve(c.system_prompt))
        if getattr(c, "script", None) is not None:
            scripts[c.name] = sha256_file(loaded.resolve(c.script))
    return prompts, scripts


def _tasks_section(tasks: list[Task], settings: Settings) -> dict[str, Any]:
    out = {}
    for t in tasks:
        repo = materialize(t, settings.repos_dir)
        out[t.id] = {"task_sha256": tree_sha256(t.folder), "repo_source": source_identity(t),
                     "repo_commit": repo.commit, "image": t.image_key, "runtime": t.runtime.describe()}
        if t.config.origin is not None:  # an imported task: its source's own digest beside trialbox's hashes
            o = t.config.origin
            out[t.id]["origin"] = {"format": o.format, "name": o.name, "digest": o.digest,
                                   "schema_version": o.schema_version}
    return out


def _images_section(client: docker.DockerClient, images_dir: Path, tasks: list[Task]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    recipes = {t.image_key: t.recipe for t in tasks}
    recipes |= {t.grader_recipe.key: t.grader_recipe for t in tasks if t.grader_recipe is not None}  # graders' own
    for name in sorted(recipes):
        try:
            rec = resolve_recipe(client, images_dir, recipes[name])
            out[name] = {"image_id": rec.image_id, "tag": rec.tag, "recipe_sha256": rec.recipe_sha256,
                         "repo_digests": rec.repo_digests}
        except ImageNotFound as exc:
            out[name] = {"image_id": f"missing: {exc.message}"}
    return out


def resolve_lock(loaded: LoadedManifest, tasks: list[Task], client: docker.DockerClient,
                 settings: Settings) -> dict[str, Any]:
    """Resolve every identifier of the experiment (builds nothing; materialises repositories)."""
    m = loaded.manifest
    images_dir = loaded.resolve(m.tasks.images)
    graders = {t.id: tree_sha256(t.grader_folder) for t in tasks}
    task_section = _tasks_section(tasks, settings)
    prompts, scripts = _candidate_files(loaded)
    images = _images_section(client, images_dir, tasks)
    return {
        "lock_version": LOCK_VERSION,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "manifest_sha256": sha256_file(loaded.path),
        "trialbox": harness_identity(),
        "docker": engine_version(client),
        "tool_contract_revision": m.experiment.tool_contract_revision,
        "price_table_version": load_prices().version,
        "costs": m.costs.model_dump(mode="json"),  # the prices of what is not a model call, as declared
        "images": images,
        **({"agent_images": agent_images_section(client, loaded, tasks, images, settings)} if layered(loaded) else {}),
        "tasks": task_section,
        "graders": graders,
        "dataset_revision": combine({k: combine({"task": v["task_sha256"], "repo": v["repo_commit"]})
                                     for k, v in task_section.items()}),
        "grader_commit": combine(graders),
        "prompts": prompts,
        "scripts": scripts,
        "environment": m.environment.model_dump(mode="json"),
        # where trials run does not shape their results: a run and its reproduction may use either backend;
        # how long an engine outage is waited out and how many infrastructure errors pass do not either
        "execution": m.execution.model_dump(mode="json", exclude={"backend", "ray_address", "engine_outage_wait_s",
                                                                  "max_infra_errors"}),
    }


def stated_mismatches(loaded: LoadedManifest, lock: dict[str, Any]) -> list[Problem]:
    """Identifiers the manifest states that differ from what was resolved."""
    m, f = loaded.manifest, str(loaded.path)
    out = []
    harness = f"{lock['trialbox']['version']}+{lock['trialbox']['commit']}"
    for field, resolved in (("dataset_revision", lock["dataset_revision"]),
                            ("grader_commit", lock["grader_commit"]), ("harness_commit", harness)):
        stated = getattr(m.experiment, field)
        if stated is not None and stated != resolved:
            out.append(Problem(f, f"experiment.{field}", f"stated {stated}, resolved {resolved}"))
    for i, c in enumerate(m.candidates):
        stated = getattr(c, "system_prompt_sha256", None)
        if stated is not None and stated != lock["prompts"].get(c.name):
            out.append(Problem(f, f"candidates[{i}].system_prompt_sha256",
                               f"stated {stated}, the file's sha256 is {lock['prompts'].get(c.name)}"))
    for name, img in lock["images"].items():
        if str(img["image_id"]).startswith("missing"):
            out.append(Problem(f, f"images.{name}", img["image_id"].removeprefix("missing: ")))
    for cand, layers in (lock.get("agent_images") or {}).items():
        for name, img in layers.items():
            if str(img["image_id"]).startswith("missing"):
                out.append(Problem(f, f"agent_images.{cand}.{name}", img["image_id"].removeprefix("missing: ")))
    return out


def write_lock(loaded: LoadedManifest, lock: dict[str, Any]) -> Path:
    """Write the lock beside the manifest (refusing stated identifiers that do not match)."""
    problems = stated_mismatches(loaded, lock)
    if problems:
        raise ValidationFailed(problems)
    path = lock_path(loaded.path)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def read_lock(path: Path) -> dict[str, Any]:
    """Read a lock file, or raise ``LockError``."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise LockError(f"{path}: no lock file (run `trialbox lock` first)") from exc
    except (OSError, ValueError) as exc:
        raise LockError(f"{path}: unreadable lock: {exc}") from exc
    if not isinstance(data, dict) or data.get("lock_version") != LOCK_VERSION:
        raise LockError(f"{path}: expected lock_version {LOCK_VERSION}")
    return data


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def drift(locked: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Every identifier whose value differs, as ``name: locked X, now Y``."""
    keep = lambda k: k not in VOLATILE and k.split(".", 1)[0] not in RECORDS  # noqa: E731
    a = {k: v for k, v in _flatten(locked).items() if keep(k)}
    b = {k: v for k, v in _flatten(current).items() if keep(k)}
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key, "<absent>") != b.get(key, "<absent>"):
            out.append(f"{key}: locked {a.get(key, '<absent>')}, now {b.get(key, '<absent>')}")
    return out


def check_lock(loaded: LoadedManifest, current: dict[str, Any]) -> None:
    """Raise ``DriftError`` naming every identifier that differs from the lock beside the manifest."""
    drifted = drift(read_lock(lock_path(loaded.path)), current)
    if drifted:
        raise DriftError(drifted)
