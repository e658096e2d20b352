"""Agents, the tool contract, budgets, the model proxy and the scripted model server.

``make_agent`` builds the agent a manifest candidate names, checking everything
it needs *before* any container starts: the API key in the environment, the
system prompt's sha256, the model's price in the versioned price table.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import ConfigError
from ..hashing import sha256_bytes
from ..manifest import LoadedManifest
from ..tasks import Task
from .base import Agent, AgentContext, AgentResult, run_agent
from .budget import AgentStop, Budget, BudgetLimits, StopReason
from .builtin import NopAgent, OracleAgent, ScriptAgent, SolutionScriptAgent, load_steps
from .prices import load_prices
from .toolbox import ToolBox

__all__ = ["Agent", "AgentContext", "AgentResult", "AgentStop", "Budget", "BudgetLimits", "StopReason", "ToolBox",
           "make_agent", "preflight", "run_agent", "api_key_from"]


def _key_from(env: Mapping[str, str], api: str, who: str) -> str:
    """The real API key of ``api`` (``ANTHROPIC`` or ``OPENAI``) from ``env``; ``ConfigError`` when unset."""
    key = env.get(f"{api}_API_KEY", "").strip()
    if not key:
        raise ConfigError(f"{api}_API_KEY is not set: {who} need it (for the offline demo, point {api}_BASE_URL "
                          "at `trialbox model-server`)")
    return key


def api_key_from(env: Mapping[str, str]) -> str:
    return _key_from(env, "ANTHROPIC", "the claude and command agents")


def openai_key_from(env: Mapping[str, str]) -> str:
    return _key_from(env, "OPENAI", "command agents with api: openai")


def make_agent(candidate, task: Task, loaded: LoadedManifest, env: Mapping[str, str] | None = None) -> Agent:
    """The agent for ``candidate`` on ``task``; ``ConfigError`` for anything missing, before any container."""
    env = os.environ if env is None else env
    kind = candidate.agent
    if kind == "nop":
        return NopAgent()
    if kind == "oracle":
        sol = task.grader.solution
        if task.grader.solution_is_script and sol is not None:
            g = task.grader
            return SolutionScriptAgent(g.solution_script, g.solution_mount, g.solution_env)
        return OracleAgent(task.grader_path(sol) if sol is not None else None)
    if kind == "script":
        return ScriptAgent(load_steps(loaded.resolve(candidate.script)))
    if kind == "claude":
        from .claude import DEFAULT_SYSTEM_PROMPT, ClaudeAgent, ClaudeSettings

        prompt = DEFAULT_SYSTEM_PROMPT.replace("/workspace", task.config.workdir)
        if candidate.system_prompt is not None:
            data = loaded.resolve(candidate.system_prompt).read_bytes()
            if candidate.system_prompt_sha256 and sha256_bytes(data) != candidate.system_prompt_sha256:
                raise ConfigError(f"{candidate.system_prompt}: sha256 {sha256_bytes(data)} differs from the "
                                  f"manifest's system_prompt_sha256 {candidate.system_prompt_sha256}")
            prompt = data.decode()
        return ClaudeAgent(ClaudeSettings(
            model=candidate.model_snapshot, system_prompt=prompt, temperature=candidate.temperature,
            max_tokens=candidate.max_tokens,
            thinking_budget=candidate.thinking.budget_tokens if candidate.thinking.enabled else None,
            api_key=api_key_from(env), base_url=env.get("ANTHROPIC_BASE_URL") or None,
            price=load_prices().price(candidate.model_snapshot), workdir=task.config.workdir,
            aliases=tuple(candidate.model_aliases)))
    if kind == "command":
        from .command import CommandAgent

        if not candidate.model_snapshot:
            raise ConfigError(f"candidate {candidate.name!r}: a command agent needs model_snapshot (its calls are "
                              "priced by it and the proxy relays only that model)")
        load_prices().price(candidate.model_snapshot)  # an unpriced model is an error before anything runs
        if candidate.api == "openai":
            key, upstream = openai_key_from(env), env.get("OPENAI_BASE_URL") or "https://api.openai.com"
        else:
            key, upstream = api_key_from(env), env.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
        return CommandAgent(candidate.command, candidate.model_snapshot, key, upstream, load_prices(),
                            dict(candidate.env), candidate.summary, candidate.api, tuple(candidate.model_aliases))
    raise ConfigError(f"unknown agent {kind!r}")


def preflight(loaded: LoadedManifest, tasks: list[Task], env: Mapping[str, str] | None = None) -> None:
    """Everything each candidate's agent needs, checked before any container starts (its API key, prompt hash,
    price): the agent is made for the candidate's first task and let go; ``ConfigError`` naming the candidate."""
    if not tasks:
        return
    for candidate in loaded.manifest.candidates:
        try:
            agent = make_agent(candidate, tasks[0], loaded, env)
        except ConfigError as exc:
            raise ConfigError(f"candidate {candidate.name!r}: {exc.message}") from None
        if hasattr(agent, "close"):
            agent.close()
