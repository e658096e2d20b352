"""Agent layers: a command agent's installation built on top of each task's environment.

A command candidate names its agent's installation as a recipe folder (``agent_image:``, a ``Dockerfile`` with
``ARG BASE`` / ``FROM ${BASE}``, like any recipe that builds on another). trialbox builds it once per task
environment the candidate runs on, ``FROM`` that environment's image, and caches it by content: the layer's
folder and the environment's image ID, tagged ``trialbox/agent-<folder>:<hash[:16]>``. So:

* the task's identity does not change with the agent (the task folder, its recipe and its environment image are
  the same whichever agent runs on it);
* the agent's sandbox runs from the layer; the grader always from the task's environment, without the agent;
* the lock records each layer's image ID under ``agent_images.<candidate>.<environment>`` beside the
  environment's own, so a changed agent installation is drift and is named.

``trialbox images build --manifest`` builds the layers (after the environments); a run never builds: a layer not
built is refused by the lock, with the command that builds it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker

from .engine import docker_errors
from .environments import EnvironmentSettings
from .errors import ConfigError, ImageNotFound
from .images import ImageRecord, Recipe, build_layer, find_image, image_record, recipe_hash
from .manifest import CommandCandidate, LoadedManifest
from .settings import Settings
from .tasks import Task


def layered(loaded: LoadedManifest) -> dict[str, Path]:
    """The candidates that run on an agent layer, with its recipe folder."""
    return {c.name: loaded.resolve(c.agent_image) for c in loaded.manifest.candidates
            if isinstance(c, CommandCandidate) and c.agent_image is not None}


def _recipe(folder: Path) -> Recipe:
    if not (folder / "Dockerfile").is_file():
        raise ConfigError(f"{folder}: an agent layer is a folder with a Dockerfile (ARG BASE, FROM ${{BASE}})")
    name = re.sub(r"[^a-z0-9_.-]+", "-", folder.name.lower()).strip("-.") or "layer"
    return Recipe(f"agent-{name}", folder, "environment", EnvironmentSettings())


def agent_layer(client: docker.DockerClient, folder: Path, base_id: str, settings: Settings,
                say: Callable[[str], None] | None = None, build: bool = True) -> ImageRecord:
    """The layer of ``folder`` on the environment image ``base_id``: built when missing and ``build``, else
    ``ImageNotFound`` naming the command that builds it."""
    recipe = _recipe(folder)
    h = recipe_hash(recipe, base_id)
    tag = f"trialbox/{recipe.key}:{h[:16]}"
    with docker_errors():
        image = find_image(client, tag)
    if image is None:
        if not build:
            raise ImageNotFound(f"agent layer {folder} on {base_id[:19]} ({tag}) is not built: "
                                "run `trialbox images build --manifest MANIFEST`", image=tag)
        if say is not None:
            say(f"building agent layer {recipe.key} on {base_id[:19]} ({tag})")
        build_layer(client, recipe, h, tag, base_id, settings, say)
        with docker_errors():
            image = client.images.get(tag)
    return image_record(recipe.key, tag, h, image)


def agent_images_section(client: docker.DockerClient, loaded: LoadedManifest, tasks: list[Task],
                         environments: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The lock's ``agent_images``: for each layered candidate, its layer's record on each environment."""
    out: dict[str, Any] = {}
    for name, folder in sorted(layered(loaded).items()):
        out[name] = {}
        for key in sorted({t.image_key for t in tasks}):
            base = str(environments.get(key, {}).get("image_id", "missing"))
            if base.startswith("missing"):
                out[name][key] = {"image_id": "missing: its environment is not built"}
                continue
            try:
                rec = agent_layer(client, folder, base, settings, build=False)
                out[name][key] = {"image_id": rec.image_id, "tag": rec.tag, "recipe_sha256": rec.recipe_sha256}
            except ImageNotFound as exc:
                out[name][key] = {"image_id": f"missing: {exc.message}"}
    return out


def build_agent_layers(client: docker.DockerClient, loaded: LoadedManifest, tasks: list[Task],
                       environments: dict[str, str], settings: Settings,
                       say: Callable[[str], None] | None = None) -> dict[tuple[str, str], ImageRecord]:
    """Build every layered candidate's layer on every environment its tasks use (``environments``: environment
    key → image ID; tasks whose environment did not build are left out)."""
    out: dict[tuple[str, str], ImageRecord] = {}
    for name, folder in sorted(layered(loaded).items()):
        for key in sorted({t.image_key for t in tasks if t.image_key in environments}):
            out[(name, key)] = agent_layer(client, folder, environments[key], settings, say)
    return out
