"""Fixtures for tests against the real Docker engine.

Nothing here skips: without an engine every Docker test *fails* with the
reason, so a suite that could not run its Docker tests never looks green.
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
import uuid

import pytest

from orchestrator.engine import connect
from orchestrator.errors import EngineUnavailable
from orchestrator.images import build_images
from orchestrator.sandbox.base import SandboxSpec
from orchestrator.sandbox.docker import DockerSandbox
from orchestrator.sandbox.memory import MemorySandbox
from orchestrator.settings import load_settings

RUNTIMES = ["runc", "runsc"]
_counter = itertools.count()


@pytest.fixture(scope="session")
def client():
    try:
        return connect()
    except EngineUnavailable as exc:
        pytest.fail(f"the Docker tests need a Docker engine (run `make setup`): {exc.message}", pytrace=False)


@pytest.fixture(scope="session")
def images(client, repo_root):
    """Every image under images/ (built once by `make setup`; a no-op here when cached)."""
    return build_images(client, repo_root / "images", load_settings())


@pytest.fixture(scope="session")
def python_image(images) -> str:
    return images["python"].image_id


@pytest.fixture(scope="module")
def project(tmp_path_factory, repo_root, images):
    """A copy of the examples and task set, so locks written by a test never land in the repository."""
    root = tmp_path_factory.mktemp("project")
    for folder in ("tasks", "graders", "images", "examples"):
        shutil.copytree(repo_root / folder, root / folder, symlinks=True)
    for lock in (root / "examples").glob("*.lock.json"):
        lock.unlink()
    return root


def unique_name(prefix: str = "tbtest") -> str:
    return f"{prefix}-{os.getpid()}-{next(_counter)}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def make_sandbox(client, python_image):
    """Start sandboxes from the python image; every one is removed after the test."""
    made: list[DockerSandbox] = []

    def make(**overrides) -> DockerSandbox:
        fields = dict(image_id=python_image, name=unique_name(), cpu_limit=1.0, cpu_reservation=0.5,
                      memory_limit_mb=512, memory_reservation_mb=256, pids_limit=128, disk_limit_mb=64,
                      labels={"org.trialbox.run": "tests"})
        fields.update(overrides)
        sb = DockerSandbox(SandboxSpec(**fields), client)
        made.append(sb)
        sb.start()
        return sb

    yield make
    for sb in made:
        sb.remove()


@pytest.fixture(params=RUNTIMES)
def runtime(request) -> str:
    return request.param


@pytest.fixture(params=["memory", *RUNTIMES])
def contract_sandbox(request):
    """A started sandbox of every implementation, for the contract's file and exec parts: the in-memory one
    (no engine) and Docker's under each runtime."""
    if request.param == "memory":
        sb = MemorySandbox(SandboxSpec(image_id="memory", name=unique_name()))
        sb.start()
        yield sb
        sb.remove()
        return
    yield request.getfixturevalue("make_sandbox")(runtime=request.param)


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
