"""Manifest models: defaults, and one clear problem per mistake."""

from __future__ import annotations

import copy

import pytest

from orchestrator.errors import ValidationFailed
from orchestrator.manifest import Manifest
from orchestrator.loading import load_manifest, parse_manifest

from .conftest import MANIFEST


def problems_of(project, data) -> list[str]:
    project.set_manifest(data)
    _, problems = parse_manifest(project.manifest)
    return [f"{p.field}: {p.message}" for p in problems]


def test_defaults_follow_the_design():
    m = Manifest.model_validate({"experiment": {"name": "x"}, "candidates": [{"name": "n", "agent": "nop"}]})
    assert m.experiment.task_split == "public" and m.experiment.seed == 0
    assert m.experiment.tool_contract_revision == "v1"
    env = m.environment
    assert (env.cpu_limit, env.cpu_reservation, env.memory_limit_mb, env.memory_reservation_mb) == (1.0, 1.0, 2048, 1024)
    assert (env.pids_limit, env.disk_limit_mb, env.network_policy, env.runtime) == (512, 2048, "none", "runc")
    assert env.dependency_cache_policy == "offline" and env.network_allowlist == []
    ex = m.execution
    assert (ex.trials_per_task, ex.deadline_seconds, ex.max_total_tokens, ex.max_tool_calls) == (5, 1800, 1_000_000, 200)
    assert (ex.max_cost_usd, ex.max_run_cost_usd, ex.concurrency, ex.order) == (10.0, None, "auto", "counterbalanced")
    assert m.judge is None and m.tasks.select == ["*"]
    an = m.analysis
    assert (an.k, an.confidence, an.primary_metric, an.cluster_by) == ([1], 0.95, "pass_hat_k", "cluster")
    assert an.exclusions == [] and an.min_effect is None and an.adoption is None


def test_every_field_is_documented():
    from orchestrator import manifest as mod

    for model in (mod.ExperimentConfig, mod.EnvironmentConfig, mod.ExecutionConfig, mod.TasksConfig,
                  mod.AnalysisConfig, mod.AdoptionConfig, mod.ClaudeCandidate, mod.CommandCandidate,
                  mod.ScriptCandidate, mod.Manifest):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no docstring"


def test_valid_manifest_loads(project):
    loaded = load_manifest(project.manifest)
    assert [c.name for c in loaded.manifest.candidates] == ["a", "b"]
    assert loaded.resolve(loaded.manifest.tasks.path) == project.root / "tasks"


def test_required_placeholder_is_named(project):
    data = copy.deepcopy(MANIFEST)
    data["experiment"]["name"] = "REQUIRED"
    data["candidates"][0]["name"] = "REQUIRED"
    out = problems_of(project, data)
    assert "experiment.name: the placeholder REQUIRED must be replaced by a value" in out
    assert "candidates[0].name: the placeholder REQUIRED must be replaced by a value" in out


def test_missing_required_field(project):
    data = copy.deepcopy(MANIFEST)
    del data["experiment"]["name"]
    assert problems_of(project, data) == ["experiment.name: required field is missing"]


def test_unknown_field_anywhere(project):
    data = copy.deepcopy(MANIFEST)
    data["environment"] = {"cpu_limt": 2}
    data["candidates"][1]["temprature"] = 0.2
    out = problems_of(project, data)
    assert "environment.cpu_limt: unknown field" in out
    assert "candidates[1].temprature: unknown field" in out


def test_k_above_trials_per_task(project):
    data = copy.deepcopy(MANIFEST)
    data["analysis"]["k"] = [1, 4]
    assert problems_of(project, data) == ["analysis.k[1]: expected 1 ≤ k ≤ execution.trials_per_task (3), got 4"]


def test_reservations_above_limits(project):
    data = copy.deepcopy(MANIFEST)
    data["environment"] = {"cpu_limit": 1, "cpu_reservation": 2, "memory_limit_mb": 512, "memory_reservation_mb": 1024}
    out = problems_of(project, data)
    assert "environment.cpu_reservation: expected ≤ environment.cpu_limit (1), got 2" in out
    assert "environment.memory_reservation_mb: expected ≤ environment.memory_limit_mb (512), got 1024" in out


def test_all_problems_reported_at_once(project):
    data = copy.deepcopy(MANIFEST)
    data["candidates"] = [{"name": "a", "agent": "nop"}, {"name": "a", "agent": "nop"},
                          {"name": "c", "agent": "gpt"}, {"name": "d", "agent": "claude"}]
    data["environment"] = {"network_policy": "wide-open", "cpu_limit": -1}
    data["analysis"] = {"k": [1], "primary_metric": "vibes"}
    out = problems_of(project, data)
    assert "candidates[2].agent: expected one of 'claude', 'command', 'script', 'oracle', 'nop', got 'gpt'" in out
    assert "candidates[3].model_snapshot: required field is missing" in out
    assert any(o.startswith("environment.network_policy:") for o in out)
    assert any(o.startswith("environment.cpu_limit:") for o in out)
    assert any(o.startswith("analysis.primary_metric:") for o in out)
    assert "candidates[1].name: duplicate candidate name 'a'" in out
    assert len(out) == 6


def test_cross_field_problems_reported_together(project):
    data = copy.deepcopy(MANIFEST)
    data["candidates"] = [{"name": "a", "agent": "nop"}, {"name": "a", "agent": "script", "script": "nope.yaml"}]
    data["analysis"]["adoption"] = {"baseline": "a", "candidate": "zzz"}
    data["analysis"]["exclusions"] = ["infra_error", "bad_luck"]
    data["environment"] = {"network_allowlist": ["example.org"]}
    out = problems_of(project, data)
    assert "candidates[1].name: duplicate candidate name 'a'" in out
    assert any(o.startswith("candidates[1].script: file not found") for o in out)
    assert "analysis.adoption.candidate: expected one of ['a', 'a'], got 'zzz'" in out
    assert any(o.startswith("analysis.exclusions[1]: expected an outcome kind") for o in out)
    assert "environment.network_allowlist: only allowed with network_policy: allowlist" in out


def test_bad_yaml_and_wrong_shapes(project):
    project.write("m.yaml", "experiment: [unclosed\n")
    _, problems = parse_manifest(project.manifest)
    assert len(problems) == 1 and "not valid YAML" in problems[0].message and problems[0].field.startswith("line ")
    project.write("m.yaml", "- just a list\n")
    _, problems = parse_manifest(project.manifest)
    assert [p.message for p in problems] == ["expected a mapping at the top level"]
    _, problems = parse_manifest(project.root / "absent.yaml")
    assert [p.message for p in problems] == ["file not found"]


def test_load_raises_with_every_problem(project):
    data = copy.deepcopy(MANIFEST)
    data["analysis"]["k"] = [9]
    data["environment"] = {"pids_limit": 1}
    project.set_manifest(data)
    with pytest.raises(ValidationFailed) as info:
        load_manifest(project.manifest)
    assert len(info.value.problems) == 2
    assert all(str(project.manifest) in str(p) for p in info.value.problems)


@pytest.mark.parametrize("name", ["smoke.yaml", "script-demo.yaml", "compare-prompts.yaml", "offline-demo.yaml"])
def test_examples_validate(repo_root, name):
    loaded = load_manifest(repo_root / "examples" / name)
    assert loaded.manifest.experiment.name


def test_command_agent_needs_the_model_proxy(project):
    data = copy.deepcopy(MANIFEST)
    data["candidates"] = [{"name": "cli", "agent": "command", "command": "trialbox-mini-agent"}]
    assert problems_of(project, data) == [
        "candidates[0].agent: a command agent reaches its model only through trialbox's proxy: "
        "set environment.network_policy: model-api-only"]
    data["environment"] = {"network_policy": "model-api-only"}
    assert problems_of(project, data) == []


def test_blocking_criteria_must_name_criteria(project):
    data = copy.deepcopy(MANIFEST)
    data["analysis"]["adoption"] = {"baseline": "a", "candidate": "b", "blocking_criteria": ["secrets", "secret"]}
    out = problems_of(project, data)
    assert len(out) == 1 and out[0].startswith("analysis.adoption.blocking_criteria[1]: expected a criterion name")


def test_backend_and_ray_address(project):
    data = copy.deepcopy(MANIFEST)
    data.setdefault("execution", {})["ray_address"] = "10.0.0.1:6379"
    assert problems_of(project, data) == ["execution.ray_address: only allowed with execution.backend: ray"]
    data["execution"]["backend"] = "ray"
    assert problems_of(project, data) == []
    data["execution"]["backend"] = "k8s"
    assert len(problems_of(project, data)) == 1 and problems_of(project, data)[0].startswith("execution.backend")
