"""The one place trialbox connects to the Docker engine and translates its errors.

Only docker-py is used (never the docker CLI). ``docker_errors()`` maps
docker-py and requests exceptions to trialbox's tree, with ``raise … from``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import docker
import docker.errors
import requests.exceptions

from .errors import EngineUnavailable, ImageNotFound, SandboxError

LABEL_PREFIX = "org.trialbox"
MANAGED_LABEL = f"{LABEL_PREFIX}.managed"
RUN_LABEL = f"{LABEL_PREFIX}.run"
"""The run a container belongs to (its run key): cleaning up a run removes exactly these."""
TRIAL_LABEL = f"{LABEL_PREFIX}.trial"
ATTEMPT_LABEL = f"{LABEL_PREFIX}.attempt"
ROLE_LABEL = f"{LABEL_PREFIX}.role"
"""``grader`` on grader containers."""


@contextlib.contextmanager
def docker_errors(container: str | None = None) -> Iterator[None]:
    """Translate docker-py errors raised inside the block into trialbox errors."""
    try:
        yield
    except docker.errors.ImageNotFound as exc:
        raise ImageNotFound(f"image not found on the engine: {exc.explanation}", image=str(exc.explanation)) from exc
    except docker.errors.NotFound as exc:
        raise SandboxError(f"not found on the engine: {exc.explanation}", container=container) from exc
    except docker.errors.APIError as exc:
        raise SandboxError(f"engine refused: {exc.explanation or exc}", container=container) from exc
    except (requests.exceptions.ConnectionError, ConnectionError, FileNotFoundError) as exc:
        raise EngineUnavailable("no Docker engine answers (is dockerd running? `make setup` starts one)") from exc
    except docker.errors.DockerException as exc:
        raise SandboxError(f"docker error: {exc}", container=container) from exc


def connect(timeout: int = 120) -> docker.DockerClient:
    """A client for the engine named by DOCKER_HOST (or the local socket), checked with a ping."""
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except docker.errors.DockerException as exc:
        raise EngineUnavailable(f"no Docker engine answers (is dockerd running? `make setup` starts one): {exc}") from exc
    except requests.exceptions.RequestException as exc:
        raise EngineUnavailable(f"no Docker engine answers: {exc}") from exc
    return client


def engine_version(client: docker.DockerClient) -> dict[str, str]:
    """The engine's version and API version."""
    with docker_errors():
        v = client.version()
    return {"version": v.get("Version", ""), "api_version": v.get("ApiVersion", "")}
