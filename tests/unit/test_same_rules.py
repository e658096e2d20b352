"""Every agent is judged by the same rules (issue 24, item 4): the same behaviour (read the file, edit it, run
the tests), expressed the way each agent expresses it, gets the same trajectory verdict; a constraint on a tool an
agent cannot express is not applicable for that agent alone; a call to a tool it did not offer ran nothing."""

from __future__ import annotations

import pytest

from orchestrator.grading.criteria import trajectory
from orchestrator.loading import load_manifest
from orchestrator.tasks import ConstraintsConfig
from orchestrator.taskload import load_tasks
from orchestrator.toolnames import patch_actions, shell_actions, text_edit_actions

PATCH = ("*** Begin Patch\n*** Update File: textkit/slug.py\n@@\n-import re\n+import re\n+import unicodedata\n"
         "*** End Patch\n")
AIDER = ("I will import unicodedata.\n\ntextkit/slug.py\n```python\n<<<<<<< SEARCH\nimport re\n=======\nimport re\n"
         "import unicodedata\n>>>>>>> REPLACE\n```\n")
CLAUDE_CODE = ["Bash", "Edit", "Glob", "Grep", "MultiEdit", "Read", "TodoWrite", "Write"]
CODEX = ["apply_patch", "exec_command", "update_plan", "view_image", "write_stdin"]


def reported(offered, *calls, text=""):
    events = [{"kind": "model_call", "seq": 1, "tools_offered": offered, "content": [{"type": "text", "text": text}]}]
    for i, (name, args) in enumerate(calls):
        events.append({"kind": "model_call", "seq": 10 * (i + 1), "tools_offered": offered, "content": []})
        events.append({"kind": "model_tool_use", "source": "model_reported", "tool": name, "arguments": args,
                       "seq": 10 * (i + 1) + 1})
    return events


def harness(*calls):
    return [{"kind": "tool", "source": "harness", "tool": name, "arguments": args, "seq": i + 1}
            for i, (name, args) in enumerate(calls)]


# the same behaviour, in each agent's own words: read textkit/slug.py, edit it, run the tests
READ_EDIT_TEST = {
    "builtin": ("claude", harness(("read_file", {"path": "textkit/slug.py"}),
                                  ("edit_file", {"path": "textkit/slug.py", "old": "a", "new": "b"}),
                                  ("bash", {"command": "python -m pytest -q"}))),
    "claude-code": ("command", reported(CLAUDE_CODE, ("Read", {"file_path": "/workspace/textkit/slug.py"}),
                                        ("Edit", {"file_path": "/workspace/textkit/slug.py", "old_string": "a",
                                                  "new_string": "b"}),
                                        ("Bash", {"command": "python -m pytest -q"}))),
    "codex": ("command", reported(CODEX, ("exec_command", {"cmd": "sed -n '1,80p' textkit/slug.py"}),
                                  ("apply_patch", {"_unparsed": PATCH}),
                                  ("exec_command", {"cmd": ["bash", "-lc", "python -m pytest -q"]}))),
    "codex-shell-patch": ("command", reported(["shell"], ("shell", {"command": ["bash", "-lc", "cat textkit/slug.py"]}),
                                              ("shell", {"command": ["apply_patch", PATCH]}),
                                              ("shell", {"command": ["bash", "-lc", "python -m pytest -q"]}))),
    "mini-swe-agent": ("command", reported(["bash"], ("bash", {"command": "cat textkit/slug.py | head -n 40"}),
                                           ("bash", {"command": "sed -i 's/a/b/' textkit/slug.py"}),
                                           ("bash", {"command": "cd /workspace && python -m pytest -q"}))),
}
EDIT_THEN_READ = {
    "builtin": ("claude", harness(("edit_file", {"path": "textkit/slug.py", "old": "a", "new": "b"}),
                                  ("read_file", {"path": "textkit/slug.py"}))),
    "claude-code": ("command", reported(CLAUDE_CODE, ("Edit", {"file_path": "textkit/slug.py", "old_string": "a",
                                                               "new_string": "b"}),
                                        ("Read", {"file_path": "textkit/slug.py"}))),
    "codex": ("command", reported(CODEX, ("apply_patch", {"_unparsed": PATCH}),
                                  ("exec_command", {"cmd": "nl -ba textkit/slug.py"}))),
    "codex-shell-patch": ("command", reported(["shell"], ("shell", {"command": ["apply_patch", PATCH]}),
                                              ("shell", {"command": ["bash", "-lc", "head -n 20 textkit/slug.py"]}))),
    "mini-swe-agent": ("command", reported(["bash"], ("bash", {"command": "perl -pi -e 's/a/b/' textkit/slug.py"}),
                                           ("bash", {"command": "cat textkit/slug.py"}))),
}


@pytest.fixture(scope="module")
def task(repo_root):
    loaded = load_manifest(repo_root / "examples" / "compare-prompts.yaml")
    base = {t.id: t for t in load_tasks(loaded)}["textkit-slug-unicode"]
    rules = ConstraintsConfig(required_tools=["read_file", "edit_file"], order=[["read_file", "edit_file"]],
                              forbidden_commands=["pip install"], max_steps=20)
    return base.model_copy(update={"config": base.config.model_copy(update={"constraints": rules})})


@pytest.mark.parametrize("agent", sorted(READ_EDIT_TEST))
def test_reading_editing_and_testing_passes_for_every_agent(task, agent):
    kind, events = READ_EDIT_TEST[agent]
    c = trajectory(task, events, kind)
    assert c.passed, (agent, c.evidence)
    assert {"read_file", "edit_file", "bash"} <= set(c.evidence["tools_used"]) and not c.evidence["not_applicable"]


@pytest.mark.parametrize("agent", sorted(EDIT_THEN_READ))
def test_editing_before_reading_is_rejected_for_every_agent(task, agent):
    kind, events = EDIT_THEN_READ[agent]
    c = trajectory(task, events, kind)
    assert not c.passed and c.evidence["problems"] == ["'edit_file' happened before 'read_file'"], (agent, c.evidence)


def test_aiders_edit_blocks_are_edits_and_what_it_cannot_express_is_not_applicable_for_it_alone(task):
    events = reported([], text=AIDER)
    c = trajectory(task, events, "command", text_edits="search_replace")
    assert c.passed and c.evidence["tools_used"] == ["edit_file"]
    assert c.evidence["expressible"] == ["edit_file", "write_file"]
    assert [n.split(":")[0] for n in c.evidence["not_applicable"]] == [
        "required tool 'read_file'", "forbidden command /pip install/ needs 'bash'", "order 'read_file'"]
    without = trajectory(task, events, "command")  # not declared: its text is no edit, and nothing is expressible
    assert without.passed and without.evidence["tools_used"] == [] and len(without.evidence["not_applicable"]) == 4
    forbidden = task.model_copy(update={"config": task.config.model_copy(update={
        "constraints": ConstraintsConfig(forbidden_tools=["edit_file"])})})
    assert not trajectory(forbidden, events, "command", text_edits="search_replace").passed  # its edits are seen


def test_a_call_to_a_tool_the_agent_did_not_offer_ran_nothing_and_is_counted_apart(task):
    events = reported(["bash"], ("Read", {"file_path": "textkit/slug.py"}), ("bash", {"command": "pytest"}))
    c = trajectory(task, events, "command")
    assert "required tool 'read_file' never used" in c.evidence["problems"]  # the Read that never ran is no read
    assert c.evidence["not_offered"] == {"calls": 1, "first": [{"seq": 11, "tool": "Read"}]}
    builtin = trajectory(task, harness(("Read", {"path": "x"})) + [
        {"kind": "tool", "source": "harness", "tool": "nope", "arguments": {}, "seq": 9, "error_kind": "unknown_tool"}],
        "claude")
    assert builtin.evidence["not_offered"]["calls"] == 1 and builtin.evidence["steps"] == 2


def test_a_constraint_on_a_tool_no_offered_tool_expresses_names_the_agents_tools(task):
    only_read = reported(["Read"], ("Read", {"file_path": "textkit/slug.py"}))
    c = trajectory(task, only_read, "command")
    assert c.passed and any("none of the tools it offered its model (Read) can express 'edit_file'" in n
                            for n in c.evidence["not_applicable"])


@pytest.mark.parametrize("command, actions", [
    ("cat a.py", [("read_file", "a.py")]),
    ("cat -n a.py b.py", [("read_file", "a.py"), ("read_file", "b.py")]),
    ("head -n 30 src/x.py && tail -5 src/x.py", [("read_file", "src/x.py"), ("read_file", "src/x.py")]),
    ("sed -n '10,20p' a.py", [("read_file", "a.py")]),
    ("sed -i.bak -e 's/a/b/' a.py", [("edit_file", "a.py")]),
    ("sed 's/a/b/' a.py > b.py", [("read_file", "a.py"), ("write_file", "b.py")]),
    ("cat > new.py <<'EOF'\nprint('cat old.py')\nEOF\n", [("write_file", "new.py")]),
    ("echo x >> log.txt", [("edit_file", "log.txt")]),
    ("python -m pytest -q 2>&1 | tail -n 20", []),
    ("grep -rn slug textkit/", []),
    ("ls > /dev/null", []),
    ("python -m pytest -q > /tmp/out.txt; cat /tmp/out.txt", []),
    ("cat /workspace/a.py > /workspace/b.py", [("read_file", "/workspace/a.py"), ("write_file", "/workspace/b.py")]),
    ("cat a.py 2>/dev/null", [("read_file", "a.py")]),
    ("python -m pytest -q 2>&1 > out.txt", [("write_file", "out.txt")]),
    ("FOO=1 cat a.py", [("read_file", "a.py")]),
    ("bash -lc 'nl -ba a.py'", [("read_file", "a.py")]),
    ("echo 'unclosed", []),
    ("grep x <<< \"$v\"\ncat a.py", [("read_file", "a.py")]),
    ("bash -lc 'cd /workspace\ncat > t.py <<EOF\nx\nEOF\nsed -n 1,5p t.py'", [("write_file", "t.py"), ("read_file", "t.py")]),
])
def test_what_a_shell_command_does_to_files(command, actions):
    from orchestrator.toolnames import in_workspace

    assert [(t, a["path"]) for t, a in shell_actions(command) if in_workspace(a["path"])] == actions


def test_patch_envelopes_and_edit_blocks():
    assert patch_actions(PATCH + "*** Begin Patch\n*** Add File: new.py\n+x\n*** End Patch") == [
        ("edit_file", {"path": "textkit/slug.py"}), ("write_file", {"path": "new.py"})]
    new_file = "new.py\n```python\n<<<<<<< SEARCH\n=======\nprint(1)\n>>>>>>> REPLACE\n```"
    assert text_edit_actions(AIDER + new_file) == [("edit_file", {"path": "textkit/slug.py"}),
                                                   ("write_file", {"path": "new.py"})]
    assert text_edit_actions("no blocks here") == []


def test_asking_the_user_is_seen_in_each_agents_own_tool(task):
    rules = task.model_copy(update={"config": task.config.model_copy(update={
        "constraints": ConstraintsConfig(forbidden_tools=["ask_user"])})})
    asked = trajectory(rules, reported(CODEX + ["request_user_input"], ("request_user_input", {"questions": []})), "command")
    assert not asked.passed and asked.evidence["problems"] == ["forbidden tool 'ask_user' used"]
    claude_code = trajectory(rules, reported(CLAUDE_CODE, ("Read", {"file_path": "a.py"})), "command")
    assert claude_code.passed and claude_code.evidence["not_applicable"]  # it offers no way to ask here


def test_a_text_editor_tools_command_says_what_it_did(task):
    editor = ["bash", "str_replace_based_edit_tool"]
    good = reported(editor, ("str_replace_based_edit_tool", {"command": "view", "path": "/workspace/textkit/slug.py"}),
                    ("str_replace_based_edit_tool", {"command": "str_replace", "path": "/workspace/textkit/slug.py",
                                                     "old_str": "a", "new_str": "b"}))
    c = trajectory(task, good, "command")
    assert c.passed and c.evidence["tools_used"] == ["edit_file", "read_file"], c.evidence
    bad = reported(editor, ("str_replace_based_edit_tool", {"command": "create", "path": "textkit/new.py"}),
                   ("str_replace_based_edit_tool", {"command": "str_replace", "path": "textkit/slug.py"}))
    assert not trajectory(task, bad, "command").passed  # never read
