"""Presets: the command-line agents people evaluate, set up the way trialbox needs them.

A preset (``presets/<name>/``) is an agent layer (its ``Dockerfile``, built on each task's environment: see
``agentlayers``) and a ``preset.yaml``:

* ``version``: the agent's pinned version (its layer pins the download by hash: pip ``--require-hashes``, npm
  integrity);
* ``command``: its command line (``$TRIALBOX_MODEL`` and ``$TRIALBOX_INSTRUCTION_FILE`` are set);
* ``env``: what keeps it quiet and on the proxy only (no update checks, telemetry, cost-map fetches, first-run
  prompts);
* ``owned_paths``: workspace paths it keeps for itself, excluded from the diff, the scope and the grader;
* ``summary``: where its submit summary comes from (``last_line``, ``none``, ``file:<path>`` or
  ``json:<path>:<key>``);
* ``tool_map``: its model-reported tool names in the contract's terms (over ``toolnames.DEFAULT_TOOL_MAP``);
* ``text_edits``: ``search_replace`` when it edits by blocks in its answers' text (aider), else ``none``.

A candidate names one with ``preset:``; every field it sets itself overrides the preset's. The preset folder is
the layer's recipe, so its content (``preset.yaml`` included) is in the layer's hash and in the lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError

PRESETS = Path(__file__).with_name("presets")
FIELDS = ("command", "api", "env", "owned_paths", "summary", "tool_map", "text_edits")


def preset_folder(name: str) -> Path:
    folder = PRESETS / name
    if not (folder / "preset.yaml").is_file():
        known = sorted(p.name for p in PRESETS.iterdir() if (p / "preset.yaml").is_file())
        raise ConfigError(f"preset: expected one of {known}, got {name!r}")
    return folder


def load_preset(name: str) -> dict[str, Any]:
    """A preset's settings, with ``agent_image`` (its folder) and ``version``."""
    folder = preset_folder(name)
    data = yaml.safe_load((folder / "preset.yaml").read_text()) or {}
    return {**{k: data[k] for k in FIELDS if k in data}, "agent_image": folder, "version": str(data.get("version"))}


def with_preset(candidate: Any) -> Any:
    """``candidate`` (a ``CommandCandidate``) with its preset's settings wherever it set none itself."""
    if getattr(candidate, "preset", None) is None:
        return candidate
    preset = load_preset(candidate.preset)
    given = candidate.model_fields_set
    update: dict[str, Any] = {k: v for k, v in preset.items() if k in FIELDS + ("agent_image",) and k not in given}
    if "env" in given:
        update["env"] = {**preset.get("env", {}), **candidate.env}
    if "tool_map" in given:
        update["tool_map"] = {**preset.get("tool_map", {}), **candidate.tool_map}
    return candidate.model_validate({**candidate.model_dump(), **update})
