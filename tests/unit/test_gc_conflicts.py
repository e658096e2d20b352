"""Leftover removal when two clean-ups share one engine (two Ray nodes on one host, a node's clean-up beside the
driver's): a container the other is already removing is skipped, never a crash of the run."""

from __future__ import annotations

import docker.errors
import pytest
import requests

from orchestrator.sandbox.gc import remove_containers


def api_error(status: int, explanation: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError(f"{status} Client Error", response=response, explanation=explanation)


class Api:
    """The engine calls ``remove_containers`` makes, each removal answering as ``answers`` says."""

    def __init__(self, answers: dict[str, BaseException | None]) -> None:
        self.answers, self.removed = answers, []

    def containers(self, all: bool, filters: dict) -> list[dict]:  # noqa: A002 - the engine's own name
        return [{"Id": i, "Names": [f"/{i}"], "Labels": {}} for i in self.answers]

    def remove_container(self, cid: str, force: bool, v: bool) -> None:
        answer = self.answers[cid]
        if answer is not None:
            raise answer
        self.removed.append(cid)


class Client:
    def __init__(self, answers) -> None:
        self.api = Api(answers)


def test_a_removal_already_in_progress_is_skipped():
    client = Client({"a": None, "b": api_error(409, "removal of container b is already in progress"),
                     "c": docker.errors.NotFound("gone"), "d": None})
    assert remove_containers(client, {}) == ["a", "d"]  # the one another remover has is not counted as ours


def test_another_refusal_still_fails_unless_best_effort():
    refused = {"a": api_error(409, "cannot remove container a: container is paused"), "b": None}
    with pytest.raises(docker.errors.APIError):
        remove_containers(Client(dict(refused)), {})
    assert remove_containers(Client(dict(refused)), {}, best_effort=True) == ["b"]
