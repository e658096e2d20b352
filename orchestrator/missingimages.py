"""An image removed from the engine mid-run: the trials that need it are refused by name, the others go on.

Every container is created from the image ID the run's lock pins, and nothing is ever pulled, so an image that
leaves the engine while a run goes on (``docker rmi``, ``docker image prune -a``, a clean-up script) cannot be
replaced: the cause stays present until someone restores that very image. The sandbox sees it when it creates or
starts a container (``sandbox.docker``: docker's ``ImageNotFound``, or an engine error saying "No such image"),
for the agent's sandbox and the grader's container alike, prepared ahead or not, and raises ``ImageNotFound``
naming the image ID. The trial then ends as ``infra_error(image_missing)`` (``refusal``), naming the image, its
pinned ID and whose container needed it, before its agent starts when it is the agent's image, never as the
agent's rejection when it is the grader's.

Such an attempt earns no retry in the run (``attempts.owes_retry``: the same trial would meet the same absence)
and counts against no trial's own retry; the run goes on with the trials whose images are there, and ends with
``ImagesMissing`` (exit 66, sysexits' EX_NOINPUT: an input of the run is absent), naming each missing image, its
pinned ID and tag, the trials refused for it, and how to restore it. ``trialbox run`` again on the run folder
runs those trials once the image is back (``attempts.rerun_recorded``); while it is still missing, the run's
lock check refuses to start and names it (as ``trialbox lock --check`` does).

Only the same image restores a run: a run folder pins its image IDs. ``trialbox images load`` of a copy saved
by ``trialbox images save`` (or ``docker save``/``docker load``) gives the same ID back; a rebuild
(``make images``, ``trialbox images build``) gives the same ID only when the build reproduces the image byte for
byte, and otherwise another ID, which ``trialbox lock --check`` reports as drift: then the run cannot be
finished, and a new run (a new lock) is the way on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .errors import TrialboxError

IMAGE_MISSING = "image_missing"
"""The ``infra_error`` kind of a trial refused because an image it needs is not on the engine."""

IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")

GONE_TEXT = ("no such image",)
"""What the engine says (lower case) when a container's image is not there, outside docker-py's ``ImageNotFound``
(a start of a container created before its image was removed)."""


class ImagesMissing(TrialboxError):
    """A run ended with trials refused because an image they need left the engine (everything else recorded).
    Exit 66 (EX_NOINPUT: an input is absent); ``trialbox run`` on the folder finishes once the image is back."""

    exit_code = 66

    def __init__(self, message: str, images: dict[str, list[str]]) -> None:
        super().__init__(message)
        self.images = images
        """Image ID → the trials refused for it."""


def says_gone(text: str | None) -> bool:
    """Whether an engine error's text says the image is not there."""
    low = (text or "").lower()
    return any(s in low for s in GONE_TEXT)


def image_name(spec: Any, image_id: str) -> str:
    """The image as the run's lock names it: ``images.<environment>`` for the task's environment (the agent's when
    it has no layer, the grader's unless it has its own), ``agent_images.<candidate>.<environment>`` for an agent's
    layer, ``images.<task>:grader:<folder>`` for a grader's own image; the ID alone when it is none of the trial's
    images."""
    key = spec.task.image_key
    if spec.grader_image_id is not None and image_id == spec.grader_image_id and image_id != spec.image_id:
        return f"images.{getattr(spec.task, 'grader_image_key', key)}"
    if image_id == spec.image_id:
        layered = spec.agent_layered if getattr(spec, "agent_layered", None) is not None else \
            spec.grader_image_id is not None and getattr(spec.task, "grader_recipe", None) is None
        return f"agent_images.{spec.candidate.name}.{key}" if layered else f"images.{key}"
    return image_id


def refusal(spec: Any, image_id: str, stage: str) -> str:
    """The evidence of ``infra_error(image_missing)``: the image, its pinned ID, whose container needed it
    (``stage``: the trial's stage when it was found missing) and what follows."""
    image_id = image_id if IMAGE_ID.fullmatch(image_id or "") else spec.image_id \
        if stage in ("sandbox", "export") else spec.grader_image
    name = image_name(spec, image_id)
    if stage == "sandbox":
        whose = "the agent's sandbox; the agent did not start"
    elif stage == "export":
        whose = "the agent's sandbox, started again to export its workspace; the agent's work was not graded"
    else:
        whose = f"the grader's container (at {stage}); the agent's work was not graded"
    return (f"image missing: {image_id} ({name}, pinned by the run's lock) is not on the engine, needed by {whose}. "
            "trialbox never pulls: restore that image (`trialbox images load` of a saved copy, or `make images` / "
            "`trialbox images build`), then `trialbox run` again on the run folder; this trial runs then")


def missing_of(result: Any) -> str | None:
    """The image ID a recorded trial was refused for, or None when it was not refused for an image."""
    if not (result.is_infra_error and result.verdict.kind == IMAGE_MISSING):
        return None
    found = IMAGE_ID.search(" ".join(str(r) for r in result.verdict.reasons))
    return found.group(0) if found else str(result.image_id)


def lock_names(lock: dict[str, Any], image_id: str) -> list[str]:
    """Every name the lock gives ``image_id``, with its tag: ``images.python (trialbox/python:…)``."""
    out = []
    for name, img in (lock.get("images") or {}).items():
        if isinstance(img, dict) and img.get("image_id") == image_id:
            out.append(f"images.{name}" + (f" ({img['tag']})" if img.get("tag") else ""))
    for cand, layers in (lock.get("agent_images") or {}).items():
        for name, img in (layers or {}).items():
            if isinstance(img, dict) and img.get("image_id") == image_id:
                out.append(f"agent_images.{cand}.{name}" + (f" ({img['tag']})" if img.get("tag") else ""))
    return out


def refused(results: Iterable[Any]) -> dict[str, list[str]]:
    """The recorded trials refused for a missing image, by image ID."""
    out: dict[str, list[str]] = {}
    for r in results:
        image = missing_of(r)
        if image is not None:
            out.setdefault(image, []).append(r.id)
    return out


def images_missing(results: Iterable[Any], lock: dict[str, Any], manifest: str, run_folder: str) -> ImagesMissing | None:
    """The error a run ends with when trials were refused for missing images (see the module docstring)."""
    by_image = refused(results)
    if not by_image:
        return None
    lines = []
    for image, ids in sorted(by_image.items()):
        names = ", ".join(lock_names(lock, image)) or "not in the run's lock"
        shown = ", ".join(sorted(ids)[:10]) + (" ..." if len(ids) > 10 else "")
        lines.append(f"  {image} ({names}): {len(ids)} trial(s) refused: {shown}")
    total = sum(len(v) for v in by_image.values())
    return ImagesMissing(
        f"{total} trial(s) refused: the engine no longer has {len(by_image)} image(s) the run's lock pins "
        f"(recorded as infra_error({IMAGE_MISSING}); the other trials are recorded):\n" + "\n".join(lines) + "\n"
        "Nothing is pulled. Restore the same image: `trialbox images load FILE` of a copy saved by `trialbox images "
        f"save`, or rebuild with `make images` / `trialbox images build --manifest {manifest}` (a rebuild that gives "
        f"another image ID is drift: `trialbox lock --check {manifest}` names it, and this run, pinned to the old "
        f"ID, cannot take it). Then the same `trialbox run` command on the run folder ({run_folder}) runs the refused "
        "trials.",
        {k: sorted(v) for k, v in by_image.items()})


__all__ = ["IMAGE_MISSING", "ImagesMissing", "image_name", "images_missing", "lock_names", "missing_of", "refusal",
           "refused", "says_gone"]
