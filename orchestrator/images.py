"""Images built without a registry, cached by content, known by image ID.

``images/<name>/`` holds one recipe each:

* ``recipe.yaml`` — a root image made from Debian packages by ``mmdebstrap``
  and imported into the engine (``suite``, ``variant``, ``packages``, ``env``);
* ``Dockerfile`` — built on top of the ``base`` image: the build argument
  ``BASE`` carries the base's image ID (``ARG BASE`` / ``FROM ${BASE}``).

A recipe's hash covers its folder's content (and, for a Dockerfile, the base
image ID it builds on). The image is tagged ``trialbox/<name>:<hash[:16]>`` and
labelled with the full hash, so a second build with an unchanged recipe finds
the tag and rebuilds nothing. The lock records the image ID (the engine's
content digest) and, for images that came from a registry, the repository
digests too.

Builds that need pip inside trust the host's CA bundle (TLS-intercepting proxy)
through a file ``trialbox-build-ca.crt`` placed in the build context only;
a Dockerfile uses it in a build stage that the final image does not copy from,
so the CA is never baked into an agent image.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import docker
import yaml

from .engine import LABEL_PREFIX, docker_errors
from .errors import ImageBuildError, ImageError, ImageNotFound
from .hashing import combine, tree_sha256
from .log import get_logger
from .settings import Settings

BASE = "base"
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


def recipe_names(images_dir: Path) -> list[str]:
    """Names of the recipes under ``images_dir``, the base first."""
    names = sorted(p.name for p in images_dir.iterdir()
                   if (p / "recipe.yaml").is_file() or (p / "Dockerfile").is_file())
    return sorted(names, key=lambda n: n != BASE)


def recipe_hash(images_dir: Path, name: str, base_id: str | None) -> str:
    """Content hash of a recipe (and of the base image it builds on)."""
    parts = {"folder": tree_sha256(images_dir / name)}
    if (images_dir / name / "Dockerfile").is_file():
        parts["base"] = base_id or ""
    return combine(parts)


def _tag(name: str, recipe: str) -> str:
    return f"trialbox/{name}:{recipe[:16]}"


def _find(client: docker.DockerClient, tag: str) -> docker.models.images.Image | None:
    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def _record(name: str, tag: str, recipe: str, image) -> ImageRecord:
    return ImageRecord(name, tag, image.id, recipe, list(image.attrs.get("RepoDigests") or []))


def resolve_image(client: docker.DockerClient, images_dir: Path, name: str) -> ImageRecord:
    """The built image for the current recipe of ``name``; never builds, never pulls."""
    base_id = None
    if name != BASE and (images_dir / name / "Dockerfile").is_file():
        base_id = resolve_image(client, images_dir, BASE).image_id
    recipe = recipe_hash(images_dir, name, base_id)
    tag = _tag(name, recipe)
    with docker_errors():
        image = _find(client, tag)
    if image is None:
        raise ImageNotFound(f"image {name!r} for its current recipe ({tag}) is not built: run `trialbox images build`", image=tag)
    return _record(name, tag, recipe, image)


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


def _build_dockerfile(client, folder: Path, name: str, recipe: str, base_id: str, settings: Settings):
    with tempfile.TemporaryDirectory(prefix=f"trialbox-ctx-{name}-") as tmp:
        ctx = Path(tmp) / "ctx"
        shutil.copytree(folder, ctx, symlinks=True)
        if settings.ca_bundle.is_file():
            shutil.copyfile(settings.ca_bundle, ctx / CA_FILE)
        else:
            (ctx / CA_FILE).write_text("")
        log.info("building image", image=name, base=base_id)
        lines: list[str] = []
        with docker_errors():
            for chunk in client.api.build(path=str(ctx), tag=_tag(name, recipe), buildargs={"BASE": base_id},
                                          labels={f"{LABEL_PREFIX}.image": name, f"{LABEL_PREFIX}.recipe": recipe},
                                          rm=True, forcerm=True, pull=False, decode=True):
                if "stream" in chunk:
                    lines.append(chunk["stream"])
                if "error" in chunk:
                    raise ImageBuildError(f"docker build failed for {name}: {chunk['error'].strip()}",
                                          image=name, log_tail="".join(lines)[-3000:])


def build_images(client: docker.DockerClient, images_dir: Path, settings: Settings,
                 names: list[str] | None = None) -> dict[str, ImageRecord]:
    """Build every recipe whose tag is missing; return the records of all of them."""
    wanted = names or recipe_names(images_dir)
    order = recipe_names(images_dir)
    records: dict[str, ImageRecord] = {}
    for name in [n for n in order if n in wanted or (n == BASE and wanted)]:
        folder = images_dir / name
        base_id = records[BASE].image_id if name != BASE and BASE in records else None
        if (folder / "Dockerfile").is_file() and base_id is None:
            raise ImageBuildError(f"{name} builds on '{BASE}', which has no recipe under {images_dir}", image=name)
        recipe = recipe_hash(images_dir, name, base_id)
        tag = _tag(name, recipe)
        with docker_errors():
            image = _find(client, tag)
        if image is None:
            if (folder / "recipe.yaml").is_file():
                _build_root(client, folder, name, recipe, settings)
            else:
                _build_dockerfile(client, folder, name, recipe, base_id or "", settings)
            with docker_errors():
                image = client.images.get(tag)
            log.info("built", image=name, tag=tag, image_id=image.id)
        else:
            log.info("up to date", image=name, tag=tag, image_id=image.id)
        records[name] = _record(name, tag, recipe, image)
    return records


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
