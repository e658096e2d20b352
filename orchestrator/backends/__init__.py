"""Where trials run: the interface the run loop drives (``base``), this machine (``local``), a Ray cluster
(``ray``, imported only when chosen: Ray is an optional dependency).

A backend is chosen through a typed choice, never a string switch: ``choose`` turns the manifest's
``execution.backend`` (or the command line's ``--backend``) into a ``LocalChoice`` or ``RayChoice``, and
``open_backend`` opens the one it is given. Neither is part of the lock: where trials run does not shape
their results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import CapacityError, ConfigError
from .base import Admission, Backend, Finished, fit, remove_run_containers
from .local import LocalBackend


@dataclass(frozen=True)
class LocalChoice:
    """Trials on this machine's engine, admitted by its share of CPUs and memory."""

    kind: str = "local"


@dataclass(frozen=True)
class RayChoice:
    """Trials on a Ray cluster at ``address`` (None: ``RAY_ADDRESS``)."""

    address: str | None = None
    kind: str = "ray"


BackendChoice = LocalChoice | RayChoice


def choose(execution: Any, backend: str | None = None, ray_address: str | None = None) -> BackendChoice:
    """The backend ``execution`` names, or the one the command line overrides it with."""
    kind = backend or execution.backend
    if kind == "ray":
        return RayChoice(ray_address or execution.ray_address)
    if kind == "local":
        return LocalChoice()
    raise ConfigError(f"unknown backend {kind!r}: expected local or ray")


def open_backend(choice: BackendChoice, loaded, tasks, lock: dict[str, Any], paths, judge, client,
                 say: Callable[[str], None]) -> Backend:
    """Open the chosen backend (for the local one: after removing leftovers of dead processes)."""
    if isinstance(choice, RayChoice):
        try:
            from .ray import RayBackend
        except ImportError as exc:
            raise ConfigError(f"the ray backend needs Ray on this machine and every node: "
                              f"pip install 'trialbox[ray]' ({exc})") from exc
        return RayBackend.connect(choice.address, loaded, tasks, lock, paths, judge, say)
    from ..sandbox.gc import collect_garbage
    from ..settings import load_settings

    collect_garbage(client, load_settings())
    admission = Admission.for_manifest(loaded.manifest)
    if admission.slots < 1:
        raise CapacityError(f"one trial reserves {admission.per_trial_cpu} CPUs and {admission.per_trial_memory_mb} "
                            f"MiB; this host offers {admission.cpus:.1f} CPUs and {admission.memory_mb:.0f} MiB")
    return LocalBackend(admission, loaded, client, paths, judge)


__all__ = ["Admission", "Backend", "BackendChoice", "Finished", "LocalBackend", "LocalChoice", "RayChoice", "choose",
           "fit", "open_backend", "remove_run_containers"]
