"""Images built without a registry, cached by content, known by image ID.

A *recipe* is a folder holding one of:

* ``recipe.yaml`` — a root image made from Debian packages by ``mmdebstrap``
  and imported into the engine (``suite``, ``variant``, ``packages``, ``env``);
  another Debian suite gives another interpreter (``suite: trixie``);
* ``Dockerfile`` — built on another recipe: the build argument ``BASE``
  carries the parent's image ID (``ARG BASE`` / ``FROM ${BASE}``). The parent
  is named by ``from:`` in the folder's ``environment.yaml`` (default
  ``base``), so recipes chain (``base`` → ``python`` → ``mylib-env``).

Recipes live in a task set's ``images/`` folder (known by their folder name)
or in a task's own folder (``image: ./environment`` in task.yaml: known as
``<task id>:<path>``). A recipe's hash covers its folder's content and the
parent's image ID. The image is tagged ``trialbox/<name>:<hash[:16]>`` (a
task's own recipe: ``trialbox/env:<hash[:16]>``, so tasks whose recipe folders
are identical share one image) and labelled with the full hash; a build
whose tag exists builds nothing. The lock records the image ID (the engine's
content digest) and, for images that came from a registry, the repository
digests too.

Builds that need pip or apt inside trust the host's CA bundle (TLS-intercepting
proxy) through a file ``trialbox-build-ca.crt`` placed in the build context only;
a Dockerfile uses it in a build stage that the final image does not copy from,
so the CA is never baked into an agent image.

A failed build raises ``ImageBuildError`` naming the recipe, the tasks that
need it, the step that failed and the tail of the build log.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import docker
import yaml

from .engine import LABEL_PREFIX, docker_errors
from .environments import EnvironmentSettings, read_settings
from .errors import ConfigError, ImageBuildError, ImageError, ImageNotFound
from .hashing import combine, tree_sha256
from .log import get_logger
from .settings import Settings
from .textsafe import printable

BASE = "base"
NO_PARENT = "none"
"""``from: none``: a Dockerfile that pins its own base image by image ID (an imported Harbor environment)."""
CA_FILE = "trialbox-build-ca.crt"
log = get_logger("images")


@dataclass(frozen=True)
class ImageRecord:
    """An image as the lock records it."""

    name: str
    tag: str
    image_id: str
    recipe_sha256: str
    repo_digests: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Recipe:
    """One recipe folder, with the recipe it builds on."""

    key: str
    """``<name>`` for ``images/<name>``; ``<task id>:<path>`` for a task's own recipe."""
    folder: Path
    parent: str | None
    """Key of the recipe it builds on (None for a root image)."""
    settings: EnvironmentSettings

    @property
    def root(self) -> bool:
        return (self.folder / "recipe.yaml").is_file()

    @property
    def self_pinned(self) -> bool:
        """A Dockerfile built on no recipe: its FROM names an image by ID."""
        return self.parent is None and not self.root


def is_recipe(folder: Path) -> bool:
    return (folder / "recipe.yaml").is_file() or (folder / "Dockerfile").is_file()


def recipe_names(images_dir: Path) -> list[str]:
    """Names of the recipes under ``images_dir``, the base first."""
    names = sorted(p.name for p in images_dir.iterdir() if is_recipe(p)) if images_dir.is_dir() else []
    return sorted(names, key=lambda n: n != BASE)


def load_recipe(key: str, folder: Path) -> Recipe:
    """The recipe in ``folder``; ``ConfigError`` when it is not one or its ``environment.yaml`` is invalid."""
    if not is_recipe(folder):
        raise ConfigError(f"{folder}: expected a recipe folder (a Dockerfile or a recipe.yaml)")
    settings = read_settings(folder) or EnvironmentSettings()
    if (folder / "recipe.yaml").is_file():
        if settings.from_ is not None:
            raise ConfigError(f"{folder / 'environment.yaml'}: from: a recipe.yaml image is a root image, built on nothing")
        return Recipe(key, folder, None, settings)
    return Recipe(key, folder, None if settings.from_ == NO_PARENT else settings.from_ or BASE, settings)


def recipe_chain(images_dir: Path, recipe: Recipe) -> list[Recipe]:
    """The recipe and every recipe it builds on, root first; ``ConfigError`` on a missing parent or a cycle."""
    chain = [recipe]
    while chain[-1].parent is not None:
        parent = chain[-1].parent
        if any(r.key == parent for r in chain):
            raise ConfigError(f"{chain[-1].folder}: from: {parent!r} makes a cycle "
                              f"({' -> '.join(r.key for r in chain)} -> {parent})")
        if not is_recipe(images_dir / parent):
            known = recipe_names(images_dir)
            raise ConfigError(f"{chain[-1].folder}: from: expected a recipe under {images_dir} {known}, got {parent!r}")
        chain.append(load_recipe(parent, images_dir / parent))
    return chain[::-1]


def recipe_hash(recipe: Recipe, parent_id: str | None) -> str:
    """Content hash of a recipe and of the image it builds on."""
    parts = {"folder": tree_sha256(recipe.folder)}
    if not recipe.root:
        parts["base"] = parent_id or ""
    return combine(parts)


def _tag(key: str, recipe: str) -> str:
    name = key if ":" not in key else "env"
    return f"trialbox/{name}:{recipe[:16]}"


def find_image(client: docker.DockerClient, tag: str) -> docker.models.images.Image | None:
    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def image_record(name: str, tag: str, recipe: str, image) -> ImageRecord:
    return ImageRecord(name, tag, image.id, recipe, list(image.attrs.get("RepoDigests") or []))


def build_layer(client: docker.DockerClient, recipe: Recipe, recipe_sha256: str, tag: str, base_id: str,
                settings: Settings, say: Callable[[str], None] | None = None) -> None:
    """Build a Dockerfile recipe on ``base_id`` under ``tag`` (an agent layer: its base is not a recipe)."""
    _build_dockerfile(client, recipe.folder, recipe.key, recipe_sha256, base_id, settings, say, tag)


def resolve_recipe(client: docker.DockerClient, images_dir: Path, recipe: Recipe) -> ImageRecord:
    """The built image for the current content of ``recipe`` (and its chain); never builds, never pulls."""
    parent_id = None
    for r in recipe_chain(images_dir, recipe):
        h = recipe_hash(r, parent_id)
        tag = _tag(r.key, h)
        with docker_errors():
            image = find_image(client, tag)
        if image is None:
            raise ImageNotFound(f"image {r.key!r} for its current recipe ({tag}) is not built: "
                                f"run `trialbox images build --manifest MANIFEST`", image=tag)
        parent_id = image.id
    return image_record(recipe.key, tag, h, image)


def resolve_image(client: docker.DockerClient, images_dir: Path, name: str) -> ImageRecord:
    """The built image of ``images/<name>``; never builds, never pulls."""
    return resolve_recipe(client, images_dir, load_recipe(name, images_dir / name))


def _build_root(client, folder: Path, name: str, recipe: str, settings: Settings):
    spec = yaml.safe_load((folder / "recipe.yaml").read_text()) or {}
    packages = ",".join(spec.get("packages", []))
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=settings.state_dir, prefix="rootfs-") as tmp:
        tar = Path(tmp) / "rootfs.tar"
        cmd = ["mmdebstrap", "--quiet", f"--variant={spec.get('variant', 'minbase')}"]
        if packages:
            cmd.append(f"--include={packages}")
        cmd += [spec.get("suite", "bookworm"), str(tar), spec.get("mirror", settings.debian_mirror)]
        log.info("building root image", image=name, command=" ".join(cmd))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except FileNotFoundError as exc:
            raise ImageBuildError("mmdebstrap is not installed (apt-get install mmdebstrap)", image=name) from exc
        if proc.returncode != 0:
            raise ImageBuildError(f"mmdebstrap failed for {name}", image=name, log_tail=proc.stderr[-3000:])
        changes = [f"LABEL {LABEL_PREFIX}.image={name} {LABEL_PREFIX}.recipe={recipe}"]
        changes += [f"ENV {k}={v}" for k, v in (spec.get("env") or {}).items()]
        changes.append('CMD ["/bin/bash"]')
        repo, tag = _tag(name, recipe).split(":")
        with docker_errors():
            client.api.import_image_from_file(str(tar), repository=repo, tag=tag, changes=changes)


STEP = re.compile(r"^Step \d+/\d+ : .*")


def _build_dockerfile(client, folder: Path, name: str, recipe: str, base_id: str, settings: Settings,
                      say: Callable[[str], None] | None = None, tag: str | None = None):
    with tempfile.TemporaryDirectory(prefix="trialbox-ctx-") as tmp:
        ctx = Path(tmp) / "ctx"
        shutil.copytree(folder, ctx, symlinks=True)
        if settings.ca_bundle.is_file():
            shutil.copyfile(settings.ca_bundle, ctx / CA_FILE)
        else:
            (ctx / CA_FILE).write_text("")
        log.info("building image", image=name, base=base_id)
        lines: list[str] = []
        step = ""
        with docker_errors():
            for chunk in client.api.build(path=str(ctx), tag=tag or _tag(name, recipe), buildargs={"BASE": base_id},
                                          labels={f"{LABEL_PREFIX}.image": name, f"{LABEL_PREFIX}.recipe": recipe},
                                          rm=True, forcerm=True, pull=False, decode=True):
                if "stream" in chunk:
                    lines.append(chunk["stream"])
                    for line in chunk["stream"].splitlines():
                        if STEP.match(line):
                            step = line
                            if say is not None:
                                say(f"  {name}: {printable(line)}")
                if "error" in chunk:
                    raise ImageBuildError(f"docker build of {name} failed at {step or 'its first step'}: "
                                          f"{chunk['error'].strip()}", image=name, log_tail="".join(lines)[-3000:])


def build_recipe(client: docker.DockerClient, images_dir: Path, recipe: Recipe, settings: Settings,
                 say: Callable[[str], None] | None = None, built: dict[str, ImageRecord] | None = None) -> ImageRecord:
    """Build ``recipe`` and every recipe it builds on whose tag is missing; return its record.

    ``built`` caches records by key across calls (one resolution per recipe in a set)."""
    built = {} if built is None else built
    parent_id = None
    record = None
    for r in recipe_chain(images_dir, recipe):
        if r.key in built:
            record = built[r.key]
            parent_id = record.image_id
            continue
        if not r.root and parent_id is None and not r.self_pinned:
            raise ImageBuildError(f"{r.key} builds on nothing that could be built", image=r.key)
        h = recipe_hash(r, parent_id)
        tag = _tag(r.key, h)
        with docker_errors():
            image = find_image(client, tag)
        if image is None:
            if say is not None:
                say(f"building {r.key} ({tag})")
            if r.root:
                _build_root(client, r.folder, r.key, h, settings)
            else:
                _build_dockerfile(client, r.folder, r.key, h, parent_id or "", settings, say)
            with docker_errors():
                image = client.images.get(tag)
            log.info("built", image=r.key, tag=tag, image_id=image.id)
        else:
            log.info("up to date", image=r.key, tag=tag, image_id=image.id)
        record = built[r.key] = image_record(r.key, tag, h, image)
        parent_id = image.id
    assert record is not None
    return record


def build_images(client: docker.DockerClient, images_dir: Path, settings: Settings,
                 names: list[str] | None = None, say: Callable[[str], None] | None = None) -> dict[str, ImageRecord]:
    """Build every recipe under ``images_dir`` (or those named) whose tag is missing; return their records."""
    wanted = names or recipe_names(images_dir)
    missing = [n for n in wanted if not is_recipe(images_dir / n)]
    if missing:
        raise ConfigError(f"no recipe under {images_dir} named {missing} (known: {recipe_names(images_dir)})")
    built: dict[str, ImageRecord] = {}
    for name in [n for n in recipe_names(images_dir) if n in wanted]:
        build_recipe(client, images_dir, load_recipe(name, images_dir / name), settings, say, built)
    return built


def save_image(client: docker.DockerClient, images_dir: Path, name: str, out: Path) -> dict[str, str]:
    """Write the built image ``name`` (by tag) into a tar, with its ID in ``<out>.json``."""
    record = resolve_image(client, images_dir, name)
    with docker_errors():
        stream = client.images.get(record.tag).save(named=True)
        tmp = out.with_suffix(out.suffix + ".tmp")
        with open(tmp, "wb") as fh:
            for chunk in stream:
                fh.write(chunk)
        tmp.replace(out)
    ids = {name: record.image_id}
    out.with_suffix(out.suffix + ".json").write_text(json.dumps({"images": ids}, indent=2) + "\n")
    return ids


def load_images(client: docker.DockerClient, tar: Path) -> dict[str, str]:
    """Load images saved by ``save_images`` and check that each one's ID is the recorded one.

    Image IDs are content digests: an image that loads under another ID is not the same image, and
    ``ImageError`` names it (a trial never runs on a look-alike)."""
    expected = json.loads(tar.with_suffix(tar.suffix + ".json").read_text())["images"]
    with docker_errors(), open(tar, "rb") as fh:
        client.images.load(fh.read())
    bad = []
    for name, image_id in expected.items():
        try:
            client.images.get(image_id)
        except docker.errors.ImageNotFound:
            bad.append(f"{name}: {image_id} is not on this engine after loading {tar}")
    if bad:
        raise ImageError("images do not match what was saved:\n  " + "\n  ".join(bad))
    return expected
