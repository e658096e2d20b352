"""The SWE-bench importer: task and grader folders from instances, one clear line per bad instance."""

from __future__ import annotations

import json

import pytest
import yaml

from orchestrator.errors import ValidationFailed
from orchestrator.importers import import_swebench


def test_samples_become_valid_folders(repo_root, tmp_path):
    sw = repo_root / "examples/swebench"
    result = import_swebench(sw / "instances.jsonl", sw / "repos", sw / "specs.yaml", tmp_path / "tasks", tmp_path / "graders")
    ids = result.written
    assert ids == ["trialbox-samples__ledger-1", "trialbox-samples__ledger-2"]
    task = yaml.safe_load((tmp_path / "tasks" / ids[0] / "task.yaml").read_text())
    grader = yaml.safe_load((tmp_path / "graders" / ids[0] / "grader.yaml").read_text())
    assert task["repo"]["commit"] == "3c7af0dde7eaee7c608a3654af0ea4b26ede397f" and task["difficulty"] == "easy"
    assert task["repo"]["git"].endswith("ledger.bundle") and task["scope"] == {"allowed": ["ledger/**"]}
    assert grader["fail_to_pass"] == ["tests/test_money_negative.py::test_format_negative"]
    assert (tmp_path / "graders" / ids[0] / "test.patch").read_text().startswith("diff --git a/tests/test_money_negative.py")


def test_bad_instances_each_named(repo_root, tmp_path):
    sw = repo_root / "examples/swebench"
    good = json.loads((sw / "instances.jsonl").read_text().splitlines()[0])
    lines = ["{not json", json.dumps({"instance_id": "x"}), json.dumps(dict(good, repo="someone/else")),
             json.dumps(good)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    specs = tmp_path / "specs.yaml"
    specs.write_text(yaml.safe_dump({"trialbox-samples/ledger": {"image": "python"}, "someone/else": {"image": "python"}}))
    with pytest.raises(ValidationFailed) as info:
        import_swebench(bad, sw / "repos", specs, tmp_path / "t", tmp_path / "g")
    messages = [str(p) for p in info.value.problems]
    assert len(messages) == 3
    assert messages[0].startswith(f"{bad}: line 1: not JSON")
    assert "line 2: missing ['repo', 'base_commit'" in messages[1]
    assert messages[2].endswith(f"line 3.repo: someone/else not found under {sw / 'repos'}")
    assert not (tmp_path / "t").exists()  # nothing written when any instance is bad
