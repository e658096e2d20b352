"""Presets for the agents people use, and the paths an agent's program owns."""

from __future__ import annotations

from pathlib import Path

from orchestrator.agents.presets import PRESETS, load_preset
from orchestrator.grading.grade import owned_by_agent
from orchestrator.grading.tree import Tree
from orchestrator.loading import parse_manifest

MANIFEST = """experiment: {{name: presets}}
candidates:
{candidates}
environment: {{network_policy: model-api-only}}
tasks: {{path: {root}/tasks, graders: {root}/graders, images: {root}/images}}
"""


def manifest(tmp_path: Path, repo_root: Path, candidates: str):
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST.format(candidates=candidates, root=repo_root))
    return parse_manifest(path)


def test_a_preset_fills_what_the_candidate_leaves_out(tmp_path, repo_root):
    loaded, problems = manifest(tmp_path, repo_root, """
  - {name: mini, agent: command, preset: mini-swe-agent, model_snapshot: scripted-model-1}
  - {name: claude, agent: command, preset: claude-code, model_snapshot: scripted-model-1,
     env: {EXTRA: "1"}, owned_paths: [".claude/**"]}""")
    assert not problems, problems
    mini, claude = loaded.manifest.candidates
    assert mini.command.startswith("mini -y --exit-immediately") and mini.summary == "none"
    assert mini.agent_image == PRESETS / "mini-swe-agent"
    assert claude.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and claude.env["EXTRA"] == "1"
    assert claude.owned_paths == [".claude/**"]  # the candidate's own value wins
    assert claude.summary.startswith("json:") and claude.agent_image == PRESETS / "claude-code"


def test_every_preset_pins_its_version_and_its_layer(tmp_path):
    for folder in sorted(p for p in PRESETS.iterdir() if (p / "preset.yaml").is_file()):
        preset = load_preset(folder.name)
        assert preset["version"] not in ("", "None") and preset["command"], folder
        layer = (folder / "Dockerfile").read_text()
        assert "ARG BASE" in layer and "FROM ${BASE}" in layer, folder
        assert "--require-hashes" in layer or "sha512-" in layer, f"{folder}: its download is not pinned by hash"


def test_a_command_candidate_needs_a_command_or_a_preset(tmp_path, repo_root):
    loaded, problems = manifest(tmp_path, repo_root, "  - {name: bare, agent: command, model_snapshot: m}")
    assert loaded is None and [p.field for p in problems] == ["candidates[0].command"]
    _, problems = manifest(tmp_path, repo_root, "  - {name: x, agent: command, preset: nothing-such}")
    assert any(p.field == "candidates[0].preset" for p in problems)


def test_paths_the_agent_owns_are_left_out_and_a_tracked_one_keeps_its_original():
    original = Tree(files={"src/a.py": b"x = 1\n", ".gitignore": b"*.pyc\n"})
    final = Tree(files={"src/a.py": b"x = 2\n", ".gitignore": b"*.pyc\n.aider*\n", ".aider.chat.history.md": b"hi",
                        ".aider.tags.cache.v4/cache.db": b"db", "src/.aider_notes.py": b"still the agent's code"})
    kept, excluded = owned_by_agent(final, original, [".aider*", ".gitignore"])
    assert excluded == [".aider.chat.history.md", ".aider.tags.cache.v4/cache.db", ".gitignore"]
    assert kept.files == {"src/a.py": b"x = 2\n", ".gitignore": b"*.pyc\n", "src/.aider_notes.py": b"still the agent's code"}


def test_owned_paths_are_still_scanned_for_secrets():
    from orchestrator.grading.leaks import secrets_leaked
    from orchestrator.grading.diff import compute_diff

    canary = "tbcanary-0123456789abcdef0123"
    original = Tree(files={"src/a.py": b"x = 1\n"})
    final = Tree(files={"src/a.py": b"x = 1\n", ".claude/notes.md": canary.encode()})
    kept, excluded = owned_by_agent(final, original, [".claude/**"])
    assert excluded == [".claude/notes.md"] and ".claude/notes.md" not in kept.files
    crits = secrets_leaked([canary], compute_diff(original, kept), None, [], original, final)  # what grade passes
    assert not next(c for c in crits if c.name == "secrets").passed


def test_a_summary_file_the_agent_wrote_is_data_whatever_it_holds():
    from orchestrator.agents.command import CommandAgent
    from orchestrator.agents.prices import load_prices

    class Sandbox:
        def __init__(self, data):
            self.data = data

        def read_file(self, path, max_bytes=0):
            return self.data

    agent = CommandAgent("x", "m", "k", "http://u", load_prices(), summary="json:/tmp/out.json:result")
    assert agent._summary("", Sandbox(b"[" * 200000)) == ""  # nesting deep enough to recurse: no failure
    assert agent._summary("", Sandbox(b'{"result": "done"}')) == "done"
    assert agent._summary("", Sandbox(b'["not an object"]')) == ""
