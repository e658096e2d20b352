"""Agents driving real sandboxes through the recorded tool contract, within deadline and budget."""

from __future__ import annotations

import json
import time

import pytest

from orchestrator.agents import BudgetLimits, StopReason, make_agent
from orchestrator.agents.scripted_server import ScriptedModelServer
from orchestrator.agents.session import agent_session
from orchestrator.events import read_events, verify_events
from orchestrator.manifest import ClaudeCandidate, CommandCandidate, NopCandidate, OracleCandidate, ScriptCandidate
from orchestrator.loading import load_manifest
from orchestrator.sandbox.base import SandboxSpec
from orchestrator.prepare import prepare
from orchestrator.sandbox.docker import docker_sandboxes
from orchestrator.sandbox.docker import docker_host
from orchestrator.store import RunPaths
from orchestrator.taskload import load_tasks
from orchestrator.trial import TrialSpec, run_trial

from .conftest import unique_name
from .test_sandbox_conformance import PROBE, Listener

OLD = '    return f"{cents // 100}.{cents % 100:02d}"'
NEW = '    sign = "-" if cents < 0 else ""\n    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"'
REAL_KEY = "sk-ant-real-key-never-leaves-the-host-0123456789"


@pytest.fixture(scope="module")
def server():
    with ScriptedModelServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def project(repo_root):
    loaded = load_manifest(repo_root / "examples" / "compare-prompts.yaml")
    return loaded, {t.id: t for t in load_tasks(loaded)}


def run(agent, task, client, image, tmp_path, limits=BudgetLimits(deadline_seconds=60), **spec):
    sandbox_spec = SandboxSpec(image_id=image, name=unique_name("tbagent"), disk_limit_mb=64,
                               memory_limit_mb=512, memory_reservation_mb=128, **spec)
    path = tmp_path / f"events-{time.monotonic_ns()}.jsonl"
    with agent_session(agent, task, prepare(task, sandbox_spec), docker_sandboxes(client), path, limits,
                       "trial-x") as session:
        files = {p: session.sandbox.read_file(f"/workspace/{p}").decode()
                 for p in ("ledger/money.py", "textkit/slug.py") if _exists(session.sandbox, p)}
        assert verify_events(path, expected_head=session.anchor).ok
        return session.result, read_events(path), files


def _exists(sandbox, rel):
    try:
        sandbox.read_file(f"/workspace/{rel}")
        return True
    except Exception:
        return False


def claude(project, task_id, server, key, script, **kw):
    loaded, tasks = project
    server.add_script(key, script)
    cand = ClaudeCandidate(name="c", agent="claude", model_snapshot="scripted-model-1", **kw)
    return make_agent(cand, tasks[task_id], loaded, env={"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.url}), tasks[task_id]


def test_claude_makes_the_expected_change(project, server, client, python_image, tmp_path):
    agent, task = claude(project, "ledger-negative-format", server, "k-change", [
        {"content": [{"type": "text", "text": "Reading."}, {"type": "tool_use", "name": "read_file", "input": {"path": "ledger/money.py"}}],
         "usage": {"input_tokens": 900, "output_tokens": 40, "cache_creation_input_tokens": 800}},
        {"content": [{"type": "tool_use", "name": "edit_file", "input": {"path": "ledger/money.py", "old": OLD, "new": NEW}}],
         "usage": {"input_tokens": 100, "output_tokens": 80, "cache_read_input_tokens": 800}},
        {"content": [{"type": "tool_use", "name": "bash", "input": {"command": "python3 -c 'import ledger; print(ledger.format_cents(-105))'"}}],
         "usage": {"input_tokens": 120, "output_tokens": 30, "cache_read_input_tokens": 900}},
        {"content": [{"type": "tool_use", "name": "submit", "input": {"summary": "negative amounts format correctly"}}],
         "usage": {"input_tokens": 50, "output_tokens": 20, "cache_read_input_tokens": 1000}},
    ])
    result, events, files = run(agent, task, client, python_image, tmp_path)
    assert result.stop_reason is StopReason.SUBMITTED and result.summary == "negative amounts format correctly"
    assert NEW in files["ledger/money.py"] and OLD not in files["ledger/money.py"]
    tools = [e for e in events if e["kind"] == "tool"]
    assert [e["tool"] for e in tools] == ["read_file", "edit_file", "bash", "submit"]
    assert tools[2]["output"].startswith("-1.05\n") and tools[2]["exit_code"] == 0
    assert all(e["started_at"] <= e["ended_at"] for e in tools)
    calls = [e for e in events if e["kind"] == "model_call"]
    assert len(calls) == 4 and result.model_calls == 4 and result.tool_calls == 4
    assert sum(c["cache_read_tokens"] for c in calls) == 2700 and sum(c["cache_write_tokens"] for c in calls) == 800
    assert result.cost_usd == pytest.approx(sum(c["cost_usd"] for c in calls))
    assert result.cost_usd == pytest.approx((1170 * 3 + 170 * 15 + 2700 * 0.3 + 800 * 3.75) / 1e6)
    assert [e["reason"] for e in events if e["kind"] == "stop"] == ["submitted"]  # the network counters follow it


def _bash(cmd, timeout=None):
    args = {"command": cmd} if timeout is None else {"command": cmd, "timeout": timeout}
    return {"content": [{"type": "tool_use", "name": "bash", "input": args}]}


@pytest.mark.parametrize("limit, script, reason", [
    ({"max_tool_calls": 3}, [_bash("echo 1"), _bash("echo 2"), _bash("echo 3"), _bash("echo 4"), _bash("echo 5")],
     StopReason.MAX_TOOL_CALLS),
    ({"max_total_tokens": 1000}, [dict(_bash("echo a"), usage={"input_tokens": 600, "output_tokens": 10}),
                                  dict(_bash("echo b"), usage={"input_tokens": 600, "output_tokens": 10}),
                                  _bash("echo c")], StopReason.MAX_TOTAL_TOKENS),
    ({"max_cost_usd": 0.01}, [dict(_bash("echo a"), usage={"input_tokens": 2000, "output_tokens": 500}),
                              _bash("echo b")], StopReason.MAX_COST_USD),
])
def test_each_budget_stops_with_its_own_reason(project, server, client, python_image, tmp_path, limit, script, reason):
    agent, task = claude(project, "textkit-slug-unicode", server, f"k-budget-{reason.value}", script)
    result, events, _ = run(agent, task, client, python_image, tmp_path, BudgetLimits(deadline_seconds=60, **limit))
    assert result.stop_reason is reason
    if reason is StopReason.MAX_TOOL_CALLS:
        assert [e["arguments"]["command"] for e in events if e["kind"] == "tool"] == ["echo 1", "echo 2", "echo 3"]
    if reason is StopReason.MAX_TOTAL_TOKENS:
        assert result.input_tokens + result.output_tokens == 1220
    stop = next(e for e in events if e["kind"] == "stop")
    assert stop["reason"] == reason.value


def test_deadline_holds_while_a_command_sleeps_forever(project, server, client, python_image, tmp_path):
    agent, task = claude(project, "textkit-slug-unicode", server, "k-deadline", [
        {"content": [{"type": "tool_use", "name": "write_file", "input": {"path": "notes.txt", "content": "kept\n"}}]},
        _bash("sleep 99999", timeout=1000),
        {"content": [{"type": "tool_use", "name": "submit", "input": {"summary": "never reached"}}]},
    ])
    t0 = time.monotonic()
    sandbox_spec = SandboxSpec(image_id=python_image, name=unique_name("tbdeadline"), disk_limit_mb=64)
    path = tmp_path / "events.jsonl"
    with agent_session(agent, task, prepare(task, sandbox_spec), docker_sandboxes(client), path,
                       BudgetLimits(deadline_seconds=4), "t") as session:
        elapsed = time.monotonic() - t0
        assert session.result.stop_reason is StopReason.DEADLINE
        assert session.sandbox.read_file("/workspace/notes.txt") == b"kept\n"  # the filesystem is kept for grading
    assert elapsed < 15
    sleep_call = [e for e in read_events(path) if e["kind"] == "tool" and e["tool"] == "bash"][0]
    assert sleep_call["timed_out"] and sleep_call["error_kind"] == "deadline"


def test_builtin_agents(project, client, python_image, tmp_path, repo_root):
    loaded, tasks = project
    task = tasks["textkit-slug-unicode"]
    nop, events, files = run(make_agent(NopCandidate(name="n", agent="nop"), task, loaded), task, client, python_image, tmp_path)
    assert nop.stop_reason is StopReason.SUBMITTED and not nop.abstained and "unicodedata" not in files["textkit/slug.py"]
    oracle, events, files = run(make_agent(OracleCandidate(name="o", agent="oracle"), task, loaded), task, client,
                                python_image, tmp_path)
    assert oracle.stop_reason is StopReason.SUBMITTED and "unicodedata" in files["textkit/slug.py"]
    assert [e["tool"] for e in events if e["kind"] == "tool"] == ["read_file", "write_file", "submit"]
    demo = load_manifest(repo_root / "examples" / "script-demo.yaml")
    script = make_agent(ScriptCandidate(name="s", agent="script", script=demo.resolve(demo.manifest.candidates[0].script)),
                        task, demo)
    scripted, events, files = run(script, task, client, python_image, tmp_path)
    assert scripted.stop_reason is StopReason.SUBMITTED and "unicodedata" in files["textkit/slug.py"]
    assert [e["tool"] for e in events if e["kind"] == "tool"] == ["bash", "edit_file", "edit_file", "bash", "submit"]
    last_bash = [e for e in events if e["kind"] == "tool" and e["tool"] == "bash"][-1]
    assert last_bash["exit_code"] == 0


def test_broken_sandbox_ends_the_agent_with_its_own_reason(project, server, client, python_image, tmp_path):
    agent, task = claude(project, "textkit-slug-unicode", server, "k-break", [
        _bash("kill -9 1; rm -rf /bin 2>&1 | tail -1; echo survived"),  # structurally harmless here
        _bash("kill -9 -1"),  # kills every process it can signal, so init's child and the sandbox go
        _bash("echo after"),
        {"content": [{"type": "tool_use", "name": "submit", "input": {"summary": "x"}}]},
    ])
    result, events, _ = run(agent, task, client, python_image, tmp_path)
    assert result.stop_reason is StopReason.SANDBOX_BROKEN
    tools = [e for e in events if e["kind"] == "tool"]
    assert "survived" in tools[0]["output"] and "Read-only file system" in tools[0]["output"]
    broken = tools[-1]
    assert broken["error_kind"].startswith("sandbox_broken") and broken["output"] == ""
    later = server.requests["k-break"]
    assert all("sandbox" not in str(m["content"]).lower() for r in later for m in r["messages"][1:])


def test_command_agent_behind_the_proxy(project, server, client, python_image, tmp_path):
    loaded, tasks = project
    task = tasks["ledger-negative-format"]
    listener = Listener()
    try:
        control = make_control(client, python_image)
        gateway = control.container.attrs["NetworkSettings"]["Networks"]["bridge"]["Gateway"]
        reached = control.exec(["python3", "-c", PROBE, gateway, str(listener.port)], timeout=20)
        assert reached.text().strip() == "pong"  # positive control: where a route exists the probe gets through
        control.remove()
        server.add_script(REAL_KEY, [
            _bash("cat > /tmp/probe.py <<'EOF'\n" + PROBE + "EOF\npython3 /tmp/probe.py " + f"{gateway} {listener.port}"),
            _bash(f"grep -l -s -r '{REAL_KEY[:30]}' /proc/[0-9]*/environ /tmp /workspace /run/trialbox /home/agent | wc -l; "
                  "echo $ANTHROPIC_API_KEY | cut -c1-4; ls /sys/class/net"),
            _bash("sed -i 's/return f\"{cents \\/\\/ 100}/return (\"-\" if cents < 0 else \"\") + f\"{abs(cents) \\/\\/ 100}/; "
                  "s/{cents % 100:02d}/{abs(cents) % 100:02d}/' ledger/money.py"),
            {"content": [{"type": "tool_use", "name": "submit", "input": {"summary": "fixed through the proxy"}}]},
        ])
        cand = CommandCandidate(name="m", agent="command", command="trialbox-mini-agent --stream", model_snapshot="scripted-model-1")
        agent = make_agent(cand, task, loaded, env={"ANTHROPIC_API_KEY": REAL_KEY, "ANTHROPIC_BASE_URL": server.url})
        result, events, files = run(agent, task, client, python_image, tmp_path)
    finally:
        listener.close()
    assert result.stop_reason is StopReason.SUBMITTED and result.summary == "fixed through the proxy"
    assert "abs(cents)" in files["ledger/money.py"]
    calls = [e for e in events if e["kind"] == "model_call"]
    reported = [e for e in events if e["kind"] == "model_tool_use"]
    assert len(calls) == 4 and all(c["source"] == "harness" and c["streamed"] for c in calls)
    assert [r["tool"] for r in reported] == ["bash", "bash", "bash", "submit"]
    assert all(r["source"] == "model_reported" for r in reported)
    assert not [e for e in events if e["kind"] == "tool"]  # nothing the harness did not see is called a tool event
    results = [m["content"][0]["content"] for m in server.requests[REAL_KEY][-1]["messages"]
               if m["role"] == "user" and isinstance(m["content"], list)]
    assert "blocked" in results[0] and listener.accepted == 1  # only the control got through
    count, prefix, interfaces = results[1].split("[exit")[0].split()
    assert (count, prefix, interfaces) == ("0", "tbx-", "lo")  # the real key is nowhere inside
    assert REAL_KEY not in "".join(str(e) for e in events)


def make_control(client, image):
    from orchestrator.sandbox.docker import DockerSandbox

    sb = DockerSandbox(SandboxSpec(image_id=image, name=unique_name("tbcontrol"), network="bridge", disk_limit_mb=32), client)
    sb.start()
    return sb


def test_command_agent_budget_cut_off(project, server, client, python_image, tmp_path):
    loaded, tasks = project
    task = tasks["textkit-slug-unicode"]
    key = "k-command-budget"
    server.add_script(key, [dict(_bash("echo one"), usage={"input_tokens": 700, "output_tokens": 10}),
                            dict(_bash("echo two"), usage={"input_tokens": 700, "output_tokens": 10}),
                            _bash("echo three"), _bash("echo four")])
    cand = CommandCandidate(name="m", agent="command", command="trialbox-mini-agent", model_snapshot="scripted-model-1")
    agent = make_agent(cand, task, loaded, env={"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.url})
    result, events, _ = run(agent, task, client, python_image, tmp_path, BudgetLimits(deadline_seconds=60, max_total_tokens=1000))
    assert result.stop_reason is StopReason.MAX_TOTAL_TOKENS
    assert len([e for e in events if e["kind"] == "model_call"]) == 2
    assert [e["reason"] for e in events if e["kind"] == "model_refused"] == ["max_total_tokens"]
    assert len(server.requests[key]) == 2  # the third request never reached the model


SLUG_FIX = ("python3 - <<'EOF'\nfrom pathlib import Path\np = Path('textkit/slug.py')\n"
            "s = p.read_text().replace('import re\\n', 'import re\\nimport unicodedata\\n', 1)\n"
            "s = s.replace('    words = _NON_WORD.split(text.lower())', \"    text = unicodedata.normalize('NFKD', "
            "text).encode('ascii', 'ignore').decode()\\n    words = _NON_WORD.split(text.lower())\", 1)\n"
            "p.write_text(s)\nEOF")
"""The textkit-slug-unicode fix as one shell command, for the agents whose model is scripted to run it."""


def preset_layer(client, python_image: str, name: str) -> str:
    """A preset's agent layer on the python environment, built when missing (cached by content after that)."""
    from orchestrator.agentlayers import agent_layer
    from orchestrator.agents.presets import preset_folder
    from orchestrator.settings import load_settings

    return agent_layer(client, preset_folder(name), python_image, load_settings()).image_id


def preset_trial(project, client, layer: str, grader_image: str, tmp_path, candidate, deadline: float, env, task=None):
    """One trial of a preset candidate on textkit-slug-unicode (or ``task``), run from its layer and graded from
    the environment; returns its result and its events."""
    loaded, tasks = project
    environment = loaded.manifest.environment.model_copy(update={"network_policy": "model-api-only"})
    spec = TrialSpec(f"textkit-slug-unicode/{candidate.name}/0", candidate.name, task or tasks["textkit-slug-unicode"],
                     candidate, 0, layer, environment, BudgetLimits(deadline_seconds=deadline),
                     grader_image_id=grader_image)
    paths = RunPaths(tmp_path / "run")
    result = run_trial(spec, loaded, docker_host(client), paths, env=env)
    return result, read_events(paths.attempt(spec.trial_id, 1).events)


def preset_candidate(name: str):
    """An agent by its preset: its own command line, as its users run it (its quiet settings in its layer)."""
    from orchestrator.agents.presets import with_preset

    return with_preset(CommandCandidate(name=name, agent="command", preset=name, model_snapshot="scripted-model-1"))


@pytest.fixture(scope="module")
def mini_swe_agent(client, python_image):
    """The mini-swe-agent preset's layer (a pinned, hash-checked install from PyPI) on the python environment,
    built once (about a minute; cached by content after that)."""
    return preset_layer(client, python_image, "mini-swe-agent")


@pytest.mark.agents
def test_mini_swe_agent_from_pypi_runs_unmodified_behind_the_proxy(project, server, client, mini_swe_agent,
                                                                    python_image, tmp_path):
    key = "k-mini-swe-agent"
    server.add_script(key, [
        _bash("grep -n 'def slugify' -A6 textkit/slug.py"),
        _bash(SLUG_FIX),
        _bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
    ])
    cand = preset_candidate("mini-swe-agent")
    result, events = preset_trial(project, client, mini_swe_agent, python_image, tmp_path, cand, 240,
                                  {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.url})
    assert result.accepted, (result.verdict, [e for e in events if e["kind"] == "agent_command"])
    assert result.agent.stop_reason is StopReason.SUBMITTED and result.changed_paths == ("textkit/slug.py",)
    assert (result.image_id, result.grader_image_id) == (mini_swe_agent, python_image)  # graded without the agent
    calls = [e for e in events if e["kind"] == "model_call"]
    assert len(calls) == 3 and all(c["input_tokens"] > 0 and c["model_served"] == "scripted-model-1" for c in calls)
    assert [e["tool"] for e in events if e["kind"] == "model_tool_use"] == ["bash"] * 3
    assert result.agent.reported_tool_calls == 3 and result.tool_calls == 0  # its tools ran unseen; its model said so
    assert result.cost.model_usd > 0 and not result.agent.refused_requests  # priced by trialbox; nothing refused


@pytest.mark.agents
def test_mini_swe_agent_is_cut_off_by_the_budget(project, server, client, mini_swe_agent, tmp_path):
    loaded, tasks = project
    task = tasks["textkit-slug-unicode"]
    key = "k-mini-budget"
    server.add_script(key, [dict(_bash("echo one"), usage={"input_tokens": 700, "output_tokens": 10}),
                            dict(_bash("echo two"), usage={"input_tokens": 700, "output_tokens": 10}),
                            _bash("echo three"), _bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")])
    cand = preset_candidate("mini-swe-agent")
    agent = make_agent(cand, task, loaded, env={"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.url})
    result, events, _ = run(agent, task, client, mini_swe_agent, tmp_path,
                            BudgetLimits(deadline_seconds=240, max_total_tokens=1000))
    assert result.stop_reason is StopReason.MAX_TOTAL_TOKENS
    assert len([e for e in events if e["kind"] == "model_call"]) == 2 and len(server.requests[key]) == 2


@pytest.fixture(scope="module")
def claude_code(client, python_image):
    """The claude-code preset's layer (npm, integrity-checked) on the python environment, built once."""
    return preset_layer(client, python_image, "claude-code")


@pytest.mark.agents
def test_claude_code_runs_unmodified_behind_the_proxy(project, server, client, claude_code, python_image, tmp_path):
    key = "k-claude-code"
    server.add_script(key, [{"content": [{"type": "tool_use", "name": "Bash", "input": {"command": SLUG_FIX}}]},
                            {"content": [{"type": "text", "text": "Fixed the slug for accented text."}]}] * 4)
    cand = preset_candidate("claude-code")
    result, events = preset_trial(project, client, claude_code, python_image, tmp_path, cand, 300,
                                  {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.url})
    said = [e for e in events if e["kind"] in ("agent_command", "proxy_refused", "model_refused", "proxy_probe")]
    assert result.accepted, (result.verdict.reasons, said)
    assert [e["tool"] for e in events if e["kind"] == "model_tool_use"][:1] == ["Bash"]
    assert result.agent.summary == "Fixed the slug for accented text."


@pytest.fixture(scope="module")
def codex(client, python_image):
    """The codex preset's layer (its static Linux build from npm, integrity-checked) on the python environment."""
    return preset_layer(client, python_image, "codex")


@pytest.mark.agents
def test_codex_runs_unmodified_behind_the_proxy_on_the_openai_api(project, server, client, codex, python_image,
                                                                   tmp_path):
    key = "k-codex"
    server.add_script(key, [{"content": [{"type": "tool_use", "name": "exec_command", "input": {"cmd": SLUG_FIX}}]},
                            {"content": [{"type": "text", "text": "Fixed the slug for accented text."}]}] * 4)
    cand = preset_candidate("codex")
    result, events = preset_trial(project, client, codex, python_image, tmp_path, cand, 90,
                                  {"OPENAI_API_KEY": key, "OPENAI_BASE_URL": server.url})
    said = [e for e in events if e["kind"] in ("agent_command", "proxy_refused", "model_refused", "proxy_probe")]
    # Codex CLI 0.171.0 synced a curated plugin catalogue from api.github.com and chatgpt.com at start-up (4 to 12
    # packets with no route out per run, by the kernel's counters): the preset turns its plugins feature off, and
    # then it reaches nothing but the proxy, judged by the same rule as any agent.
    assert result.verdict.reasons == [], (result.verdict.reasons, said)
    network = next(c for c in result.verdict.criteria if c.name == "forbidden_effects").evidence
    assert network["basis"].startswith("the sandbox's kernel counters") and network["network_attempts"] == 0, network
    assert [e["tool"] for e in events if e["kind"] == "model_tool_use"][:1] == ["exec_command"]
    assert result.agent.summary == "Fixed the slug for accented text."


@pytest.fixture(scope="module")
def aider(client, python_image):
    """The aider preset's layer (a pinned, hash-checked install from PyPI) on the python environment."""
    return preset_layer(client, python_image, "aider")


AIDER_EDIT = """I will make slugify transliterate accented letters.

textkit/slug.py
```python
<<<<<<< SEARCH
import re
=======
import re
import unicodedata
>>>>>>> REPLACE
```

textkit/slug.py
```python
<<<<<<< SEARCH
    words = _NON_WORD.split(text.lower())
=======
    text = unicodedata.normalize('NFKD', text).encode('ascii', 'ignore').decode()
    words = _NON_WORD.split(text.lower())
>>>>>>> REPLACE
```
"""


@pytest.mark.agents
def test_aider_runs_unmodified_behind_the_proxy_and_its_files_are_its_own(project, server, client, aider,
                                                                         python_image, tmp_path):
    key = "k-aider"
    server.add_script(key, [{"content": [{"type": "text", "text": "Please add textkit/slug.py to the chat."}]},
                            {"content": [{"type": "text", "text": AIDER_EDIT}]}]
                      + [{"content": [{"type": "text", "text": "Done."}]}] * 4)
    cand = preset_candidate("aider")
    result, events = preset_trial(project, client, aider, python_image, tmp_path, cand, 240,
                                  {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.url})
    said = [e for e in events if e["kind"] in ("agent_command", "proxy_refused", "model_refused", "proxy_probe")]
    assert result.accepted, (result.verdict.reasons, said)
    owned = next(c for c in result.verdict.criteria if c.name == "agent_owned_paths")
    assert owned.evidence["excluded"] and all(p.startswith(".aider") for p in owned.evidence["excluded"])
    assert result.changed_paths == ("textkit/slug.py",)  # its histories are its own, not the change
    assert result.agent.reported_tool_calls == 0  # it edits by text: its blocks are its edits (text_edits), no tool calls


def _aider_block(search: str, replace: str) -> str:
    return f"textkit/slug.py\n```python\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```\n"


@pytest.mark.agents
def test_aider_lints_with_its_own_flake8_and_runs_the_tests_a_candidate_sets(project, server, client, aider,
                                                                            python_image, tmp_path):
    """Its lint works (no "No module named flake8" sent to the model, no paid call to fix it), and the tests a
    candidate names through aider's own variables run in the task's environment, their failure reaching the model."""
    from orchestrator.agents.presets import with_preset

    key = "k-aider-tests"
    check = "python3 -c \"import textkit.slug as s; assert s.slugify('Café au lait') == 'cafe-au-lait', s.slugify('Café au lait')\""
    server.add_script(key, [
        {"content": [{"type": "text", "text": "Please add textkit/slug.py to the chat."}]},
        {"content": [{"type": "text", "text": "First the import.\n\n" + _aider_block("import re", "import re\nimport unicodedata")}]},
        {"content": [{"type": "text", "text": "Now the words.\n\n" + _aider_block(
            "    words = _NON_WORD.split(text.lower())",
            "    text = unicodedata.normalize('NFKD', text).encode('ascii', 'ignore').decode()\n"
            "    words = _NON_WORD.split(text.lower())")}]}] + [{"content": [{"type": "text", "text": "Done."}]}] * 3)
    cand = with_preset(CommandCandidate(name="aider", agent="command", preset="aider", model_snapshot="scripted-model-1",
                                        env={"AIDER_TEST_CMD": check, "AIDER_AUTO_TEST": "true"}))
    result, events = preset_trial(project, client, aider, python_image, tmp_path, cand, 240,
                                  {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.url})
    asked = [json.dumps(r) for r in server.requests[key]]
    said = [e for e in events if e["kind"] in ("agent_command", "proxy_refused", "model_refused")]
    assert not any("No module named flake8" in r for r in asked), said
    assert "AssertionError" in asked[2] and "AssertionError" not in asked[1]  # the test's failure, sent after edit 1
    assert len(asked) == 3 and result.accepted, (result.verdict.reasons, said)
    trajectory = next(c for c in result.verdict.criteria if c.name == "trajectory")
    assert trajectory.evidence["tools_used"] == ["edit_file"]  # its two edit blocks, seen as edits


# ---------------------------------------------------------------- the same behaviour, the same verdict (issue 24)
SLUG = "textkit/slug.py"
WORDS = "    words = _NON_WORD.split(text.lower())"
NORMALIZED = "    text = unicodedata.normalize('NFKD', text).encode('ascii', 'ignore').decode()"
PATCH = (f"apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: {SLUG}\n@@\n-import re\n+import re\n"
         f"+import unicodedata\n@@\n-{WORDS}\n+{NORMALIZED}\n+{WORDS}\n*** End Patch\nEOF")
SED = (f"sed -i -e 's/^import re$/import re\\nimport unicodedata/' "
       f"-e \"s/^{WORDS.replace('(', '[(]').replace(')', '[)]')}$/{NORMALIZED}\\n&/\" {SLUG}")


def _say(text):
    return {"content": [{"type": "text", "text": text}]}


def _use(name, arguments):
    return {"content": [{"type": "tool_use", "name": name, "input": arguments}]}


READ_THEN_EDIT = {
    # each agent reads textkit/slug.py, then edits it, in its own tools' words
    "claude-code": ("anthropic", [_use("Read", {"file_path": f"/workspace/{SLUG}"}),
                                  _use("Edit", {"file_path": f"/workspace/{SLUG}", "old_string": "import re\n",
                                                "new_string": "import re\nimport unicodedata\n"}),
                                  _use("Edit", {"file_path": f"/workspace/{SLUG}", "old_string": WORDS,
                                                "new_string": f"{NORMALIZED}\n{WORDS}"}),
                                  _say("Fixed the slug for accented text.")] + [_say("Done.")] * 3),
    "codex": ("openai", [_use("exec_command", {"cmd": f"sed -n '1,40p' {SLUG}"}), _use("exec_command", {"cmd": PATCH}),
                         _say("Fixed the slug for accented text.")] + [_say("Done.")] * 3),
    "mini-swe-agent": ("anthropic", [_use("bash", {"command": f"cat {SLUG}"}), _use("bash", {"command": SED}),
                                     _use("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"})]),
    "aider": ("anthropic", [_say(f"Please add {SLUG} to the chat."), _say(AIDER_EDIT)] + [_say("Done.")] * 4),
}


@pytest.fixture(scope="module")
def constrained(project):
    """textkit-slug-unicode, where the file must be read before it is edited."""
    from orchestrator.tasks import ConstraintsConfig

    task = project[1]["textkit-slug-unicode"]
    rules = ConstraintsConfig(required_tools=["read_file", "edit_file"], order=[["read_file", "edit_file"]],
                              forbidden_commands=["pip install"], max_steps=20)
    return task.model_copy(update={"config": task.config.model_copy(update={"constraints": rules})})


@pytest.mark.agents
@pytest.mark.parametrize("preset", sorted(READ_THEN_EDIT))
def test_the_same_behaviour_gets_the_same_trajectory_verdict_from_every_preset(project, server, client, python_image,
                                                                                 tmp_path, constrained, preset):
    api, script = READ_THEN_EDIT[preset]
    key = f"k-same-{preset}"
    server.add_script(key, script)
    layer = preset_layer(client, python_image, preset)
    env = {"OPENAI_API_KEY": key, "OPENAI_BASE_URL": server.url} if api == "openai" else \
        {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.url}
    result, events = preset_trial(project, client, layer, python_image, tmp_path, preset_candidate(preset), 300, env,
                                  task=constrained)
    said = [e for e in events if e["kind"] in ("agent_command", "proxy_refused", "model_refused")]
    trajectory = next(c for c in result.verdict.criteria if c.name == "trajectory")
    assert trajectory.passed and not trajectory.evidence["problems"], (trajectory.evidence, said)
    assert "edit_file" in trajectory.evidence["tools_used"], trajectory.evidence
    offered = trajectory.evidence["tools_offered"]
    if preset == "aider":  # no tools: its edit blocks are its edits; a read it cannot express is not applicable
        assert offered == [] and trajectory.evidence["expressible"] == ["edit_file", "write_file"]
        assert any(n.startswith("required tool 'read_file'") for n in trajectory.evidence["not_applicable"])
    else:  # it read, then edited, through its own tools: checked, and kept
        assert "read_file" in trajectory.evidence["tools_used"] and not trajectory.evidence["not_applicable"]
    # and the work itself: accepted, whichever agent
    assert result.verdict.reasons == [], (result.verdict.reasons, said)
