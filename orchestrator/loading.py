"""Loading a manifest: YAML read once, parsed into the models of ``manifest``, and checked beyond the types.

``load_manifest`` raises ``ValidationFailed`` listing *every* problem (file, field path, what was expected); it
never stops at the first one. Checks beyond the types: the literal ``REQUIRED`` anywhere, unknown fields, every
``analysis.k`` ≤ ``trials_per_task``, reservations ≤ limits, unique candidate names, adoption naming existing
candidates, ablations naming their full design, ``network_allowlist`` only with ``allowlist``, costs that are
prices, and files the manifest names existing. ``parse_model`` and ``pydantic_problems`` serve the other YAML
files (tasks, environments, imports) the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .errors import ConfigError, Problem, ValidationFailed
from .manifest import REQUIRED_LITERAL, LoadedManifest, Manifest
from .stops import OUTCOMES


CRITERIA = {"fail_to_pass", "pass_to_pass", "grader_integrity", "scope", "trajectory", "secrets", "secret_read",
            "forbidden_effects", "budget", "abstention", "submitted", "evaluator_tampering_attempts", "export",
            "semantic_judge", "agent_owned_paths", "near_identical_to_reference"}


OUTCOME_KINDS = OUTCOMES


# --------------------------------------------------------------------------- loading
def read_yaml(path: Path) -> tuple[Any, list[Problem]]:
    """Parse a YAML file; a read or syntax error becomes one problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, [Problem(str(path), "", "file not found")]
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem(str(path), "", f"cannot read: {exc}")]
    try:
        return yaml.safe_load(text), []
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return None, [Problem(str(path), where, f"not valid YAML: {getattr(exc, 'problem', exc)}")]


def find_required_literals(data: Any, prefix: str = "") -> list[str]:
    """Field paths whose value is the literal ``REQUIRED`` (a placeholder left unfilled)."""
    found: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            found += find_required_literals(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += find_required_literals(value, f"{prefix}[{i}]")
    elif isinstance(data, str) and data.strip() == REQUIRED_LITERAL:
        found.append(prefix)
    return found


def _loc_to_path(loc: tuple[Any, ...], tags: set[str]) -> str:
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in tags and i > 0 and isinstance(loc[i - 1], int):
            continue  # discriminated-union tag pydantic inserts into the location
        else:
            out += f".{part}" if out else str(part)
    return out


def pydantic_problems(file: str, exc: ValidationError, skip: set[str] = frozenset(),
                      tags: set[str] = frozenset()) -> list[Problem]:
    """One ``Problem`` per pydantic error, with a message a person can act on."""
    problems = []
    for err in exc.errors(include_url=False):
        path = _loc_to_path(err["loc"], tags)
        if path in skip:
            continue
        kind = err["type"]
        if kind == "missing":
            msg = "required field is missing"
        elif kind == "extra_forbidden":
            msg = "unknown field"
        elif kind == "union_tag_invalid":
            path += f".{err['ctx']['discriminator'].strip(chr(39))}"
            msg = f"expected one of {err['ctx']['expected_tags']}, got {err['ctx']['tag']!r}"
        elif kind == "union_tag_not_found":
            msg = f"required field '{err['ctx']['discriminator'].strip(chr(39))}' is missing"
        else:
            msg = f"{err['msg']} (got {err['input']!r})" if not isinstance(err["input"], (dict, list)) else err["msg"]
        problems.append(Problem(file, path, msg))
    return problems


CANDIDATE_TAGS = {"claude", "command", "script", "oracle", "nop"}


def parse_model(path: Path, model: type[BaseModel], tags: set[str] = frozenset()
                ) -> tuple[BaseModel | None, Any, list[Problem]]:
    """Read one YAML file into ``model``: the instance (or None), the raw data, and every problem
    (unreadable file, bad YAML, not a mapping, ``REQUIRED`` placeholders, type errors)."""
    data, problems = read_yaml(path)
    if problems:
        return None, None, problems
    if not isinstance(data, dict):
        return None, None, [Problem(str(path), "", "expected a mapping at the top level")]
    required = find_required_literals(data)
    problems = [Problem(str(path), p, "the placeholder REQUIRED must be replaced by a value") for p in required]
    try:
        return model.model_validate(data), data, problems
    except ValidationError as exc:
        return None, data, problems + pydantic_problems(str(path), exc, skip=set(required), tags=tags)


def parse_manifest(path: Path) -> tuple[LoadedManifest | None, list[Problem]]:
    """Parse and type-check one manifest file; returns the model (or None) and every problem."""
    path = Path(path).absolute()
    manifest, data, problems = parse_model(path, Manifest, CANDIDATE_TAGS)
    if data is None:
        return None, problems
    problems += check_manifest(data, path)
    if manifest is not None:
        manifest, more = _with_presets(manifest, str(path))
        problems += more
    loaded = LoadedManifest(path=path, manifest=manifest) if manifest is not None else None
    return (loaded if not problems else None), problems


def _with_presets(manifest: Manifest, f: str) -> tuple[Manifest, list[Problem]]:
    """The manifest with every command candidate's preset applied (``agents.presets``); a command candidate
    with neither a preset nor a command is a problem."""
    from .agents.presets import with_preset

    candidates, problems = [], []
    for i, c in enumerate(manifest.candidates):
        if getattr(c, "agent", None) == "command":
            try:
                c = with_preset(c)
            except (ConfigError, ValidationError) as exc:
                problems.append(Problem(f, f"candidates[{i}].preset", str(exc)))
            if not c.command.strip():
                problems.append(Problem(f, f"candidates[{i}].command", "expected the command to run (or a preset)"))
        candidates.append(c)
    return manifest.model_copy(update={"candidates": candidates}), problems


def _get(data: Any, dotted: str, default: Any = None) -> Any:
    """A value of the raw YAML by dotted path, or ``default`` when absent or not a mapping on the way."""
    for key in dotted.split("."):
        if not isinstance(data, dict) or key not in data:
            return default
        data = data[key]
    return data


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def check_manifest(data: dict[str, Any], path: Path) -> list[Problem]:
    """Cross-field checks the types cannot express, run on the raw YAML so that they are
    reported together with type errors elsewhere (a value of the wrong type is skipped:
    its type error is already reported)."""
    f, root = str(path), path.parent
    resolve = lambda p: Path(p) if Path(p).is_absolute() else root / p  # noqa: E731
    out: list[Problem] = []
    trials = _num(_get(data, "execution.trials_per_task", 5))
    for i, k in enumerate(_get(data, "analysis.k", [1]) if isinstance(_get(data, "analysis.k", [1]), list) else []):
        if trials is not None and _num(k) is not None and not 1 <= k <= trials:
            out.append(Problem(f, f"analysis.k[{i}]", f"expected 1 ≤ k ≤ execution.trials_per_task ({int(trials)}), got {k}"))
    for res, lim, d_res, d_lim in (("cpu_reservation", "cpu_limit", 1.0, 1.0),
                                   ("memory_reservation_mb", "memory_limit_mb", 1024, 2048)):
        r, l_ = _num(_get(data, f"environment.{res}", d_res)), _num(_get(data, f"environment.{lim}", d_lim))
        if r is not None and l_ is not None and 0 < l_ < r:
            out.append(Problem(f, f"environment.{res}", f"expected ≤ environment.{lim} ({_get(data, f'environment.{lim}', d_lim)}), "
                                                        f"got {_get(data, f'environment.{res}', d_res)}"))
    policy = _get(data, "environment.network_policy", "none")
    if _get(data, "environment.network_allowlist") and policy != "allowlist":
        out.append(Problem(f, "environment.network_allowlist", "only allowed with network_policy: allowlist"))
    if policy == "allowlist":
        out.append(Problem(f, "environment.network_policy",
                           "allowlist is not supported by this version of trialbox (use none or model-api-only)"))
    candidates = _get(data, "candidates", [])
    candidates = [c for c in candidates if isinstance(c, dict)] if isinstance(candidates, list) else []
    names = [c.get("name") for c in candidates]
    for i, c in enumerate(candidates):
        if c.get("agent") == "command" and policy != "model-api-only":
            out.append(Problem(f, f"candidates[{i}].agent", "a command agent reaches its model only through "
                                                            "trialbox's proxy: set environment.network_policy: model-api-only"))
        if c.get("name") is not None and c.get("name") in names[:i]:
            out.append(Problem(f, f"candidates[{i}].name", f"duplicate candidate name {c.get('name')!r}"))
        for field in ("system_prompt", "script"):
            if isinstance(c.get(field), str) and not resolve(c[field]).is_file():
                out.append(Problem(f, f"candidates[{i}].{field}", f"file not found: {resolve(c[field])}"))
    out += _check_ablations(f, candidates, names, _get(data, "analysis.adoption"))
    out += _check_costs(f, _get(data, "costs"))
    adoption = _get(data, "analysis.adoption")
    if isinstance(adoption, dict):
        for field in ("baseline", "candidate"):
            if field in adoption and adoption[field] not in names:
                out.append(Problem(f, f"analysis.adoption.{field}", f"expected one of {names}, got {adoption[field]!r}"))
        if adoption.get("baseline") is not None and adoption.get("baseline") == adoption.get("candidate"):
            out.append(Problem(f, "analysis.adoption.candidate", "must differ from the baseline"))
        blocking = adoption.get("blocking_criteria") or []
        for i, name in enumerate(blocking if isinstance(blocking, list) else []):
            if name not in CRITERIA:
                out.append(Problem(f, f"analysis.adoption.blocking_criteria[{i}]",
                                   f"expected a criterion name {sorted(CRITERIA)}, got {name!r}"))
    if _get(data, "execution.ray_address") is not None and _get(data, "execution.backend", "local") == "local":
        out.append(Problem(f, "execution.ray_address", "only allowed with execution.backend: ray"))
    exclusions = _get(data, "analysis.exclusions", [])
    for i, kind in enumerate(exclusions if isinstance(exclusions, list) else []):
        if kind not in OUTCOME_KINDS:
            out.append(Problem(f, f"analysis.exclusions[{i}]", f"expected an outcome kind {sorted(OUTCOME_KINDS)}, got {kind!r}"))
    for field, default in (("path", "tasks"), ("graders", "graders"), ("images", "images")):
        value = _get(data, f"tasks.{field}", default)
        if isinstance(value, str) and not resolve(value).is_dir():
            out.append(Problem(f, f"tasks.{field}", f"folder not found: {resolve(value)}"))
    return out


def _check_ablations(f: str, candidates: list[dict], names: list[Any], adoption: Any) -> list[Problem]:
    """An ablation names another candidate as its full design and the component it leaves out; neither it nor
    its full design is the baseline (the share of the full design's improvement over the baseline needs both)."""
    out = []
    baseline = adoption.get("baseline") if isinstance(adoption, dict) else (names[0] if names else None)
    for i, c in enumerate(candidates):
        full, without = c.get("ablation_of"), c.get("without")
        if full is None:
            if without is not None:
                out.append(Problem(f, f"candidates[{i}].without", "only allowed with ablation_of"))
            continue
        if full not in names:
            out.append(Problem(f, f"candidates[{i}].ablation_of", f"expected one of {names}, got {full!r}"))
        elif full == c.get("name"):
            out.append(Problem(f, f"candidates[{i}].ablation_of", "a candidate cannot be an ablation of itself"))
        elif full == baseline:
            out.append(Problem(f, f"candidates[{i}].ablation_of",
                               f"the full design {full!r} is the baseline: an ablation measures what part of the "
                               "full design's improvement over the baseline persists"))
        if c.get("name") is not None and c.get("name") == baseline:
            out.append(Problem(f, f"candidates[{i}].ablation_of", f"{c.get('name')!r} is the baseline: the baseline "
                                                                  "cannot be an ablation"))
        if without is None:
            out.append(Problem(f, f"candidates[{i}].without", "required with ablation_of: name the component left out"))
    return out


def _check_costs(f: str, costs: Any) -> list[Problem]:
    if not isinstance(costs, dict):
        return []
    out = []
    priced = [k for k in ("cpu_hour_usd", "memory_gib_hour_usd", "human_hour_usd") if costs.get(k) is not None]
    if (priced or costs.get("tool_call_usd")) and not costs.get("version"):
        out.append(Problem(f, "costs.version", "required once a price is declared: name this set of prices"))
    from .agents.toolbox import TOOL_NAMES  # the tool contract's names (a price's type is pydantic's to check)

    tools = costs.get("tool_call_usd")
    for name in (tools if isinstance(tools, dict) else []):
        if name not in TOOL_NAMES:
            out.append(Problem(f, f"costs.tool_call_usd.{name}", f"expected a tool of the contract {sorted(TOOL_NAMES)}"))
    if costs.get("human_hour_usd") is not None and costs.get("minutes_per_intervention") is None:
        out.append(Problem(f, "costs.minutes_per_intervention",
                           "required with human_hour_usd: how many minutes of a person one intervention stands for"))
    return out


def load_manifest(path: Path) -> LoadedManifest:
    """Load a manifest or raise ``ValidationFailed`` with every problem in it."""
    loaded, problems = parse_manifest(path)
    if problems or loaded is None:
        raise ValidationFailed(problems)
    return loaded
