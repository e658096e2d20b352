"""The experiment manifest as frozen typed pydantic models, one per section.

Every field is documented below its declaration. A manifest is YAML parsed
once, by ``loading.load_manifest``, which also checks what the types cannot
and lists every problem. Relative paths are resolved against the manifest's
folder (``LoadedManifest.resolve``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from .errors import ConfigError

REQUIRED_LITERAL = "REQUIRED"


class Model(BaseModel):
    """Base of every config model: unknown fields are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


# --------------------------------------------------------------------------- experiment
class ExperimentConfig(Model):
    name: str = Field(min_length=1)
    """Name of the experiment; shown in reports."""
    task_split: Literal["public", "held_out"] = "public"
    """Only tasks whose ``split`` equals this run."""
    seed: int = 0
    """Drives trial order and bootstrap resampling; recorded."""
    dataset_revision: str | None = None
    """Content hash of the selected tasks; when given, checked against what the lock resolves."""
    harness_commit: str | None = None
    """trialbox version+commit; when given, checked."""
    grader_commit: str | None = None
    """Content hash of the selected grader folders; when given, checked."""
    tool_contract_revision: Literal["v1"] = "v1"
    """Revision of the tool contract the agents see."""


# --------------------------------------------------------------------------- candidates
class ThinkingConfig(Model):
    enabled: bool = False
    """Extended thinking on or off."""
    budget_tokens: int = Field(default=1024, ge=1024)
    """Thinking budget when enabled."""


class _CandidateBase(Model):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    """Unique name of the design; letters, digits, ``_ . -``."""
    ablation_of: str | None = None
    """The candidate this one is, without one component (``without``): the report shows how much of that full
    design's improvement over the baseline persists without the component."""
    without: str | None = Field(default=None, min_length=1)
    """The component an ablation leaves out (memory, delegation, extra recovery...); with ``ablation_of``."""


class ClaudeCandidate(_CandidateBase):
    agent: Literal["claude"]
    """The built-in agent on the Anthropic Messages API."""
    model_snapshot: str = Field(min_length=1)
    """A dated model snapshot, never an alias that can move."""
    model_aliases: list[str] = []
    """Other names the provider may answer with for ``model_snapshot`` (an answer naming any other model stops the
    run as a configuration error); the result records both the pinned and the served name, priced as pinned."""
    system_prompt: Path | None = None
    """File holding the system prompt (relative to the manifest)."""
    system_prompt_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    """When given, the prompt file's sha256 must equal it."""
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    """Sampling temperature; sent only when set (the SDK has no parameter for it: it goes in the body)."""
    max_tokens: int = Field(default=4096, ge=1)
    """Output tokens per model call."""
    thinking: ThinkingConfig = ThinkingConfig()
    """Extended thinking settings."""


class ToolMapping(Model):
    tool: Literal["bash", "read_file", "write_file", "edit_file", "ask_user", "patch", "editor"]
    """The contract's tool a model-reported call of this name counts as (``patch``: its argument is an
    ``apply_patch`` envelope, whose files are edits and writes; ``editor``: a text editor tool whose ``command``
    argument, ``view``, ``create``, ``str_replace`` or ``insert``, says which)."""
    arguments: dict[str, str | list[str]] = {}
    """Contract argument → the reported argument's name (or names, the first present wins)."""


PRESET_NAMES = ("mini-swe-agent", "claude-code", "codex", "aider")


class CommandCandidate(_CandidateBase):
    agent: Literal["command"]
    """A command-line agent installed in the task image (or in its ``agent_image``), run inside the container."""
    preset: Literal["mini-swe-agent", "claude-code", "codex", "aider"] | None = None
    """An agent people use, set up by trialbox (``agents/presets``): its pinned installation as an agent layer,
    its command line, the environment that keeps it quiet and on the proxy, the paths it owns, where its summary
    comes from and its tool names. Any field given here overrides the preset's."""
    command: str = Field(default="", min_length=0)
    """The command run inside the container (required without a preset)."""
    api: Literal["anthropic", "openai"] = "anthropic"
    """The model API the agent speaks (the proxy relays that API only): ``anthropic`` (Messages; the agent gets
    ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``) or ``openai`` (Chat Completions and Responses;
    ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``; trialbox's upstream from ``OPENAI_BASE_URL`` and
    ``OPENAI_API_KEY``)."""
    env: dict[str, str] = {}
    """Environment variables of the command (over the preset's)."""
    owned_paths: list[str] = []
    """Workspace paths the agent's program keeps for itself (globs, e.g. ``.aider*``): excluded from the diff, the
    scope and the grader's workspace, and listed in the verdict; a path the repository has keeps its original."""
    summary: str = "last_line"
    """Where the submit summary comes from: ``last_line`` of its output, ``none``, or ``file:<path>`` in the
    sandbox."""
    model_snapshot: str | None = None
    """The model the command agent is told to use, when it uses one."""
    model_aliases: list[str] = []
    """Other names the provider may answer with for ``model_snapshot`` (an answer naming any other model stops the
    run as a configuration error); the result records both the pinned and the served name, priced as pinned."""
    agent_image: Path | None = None
    """The agent's installation: a recipe folder (a Dockerfile, ``ARG BASE`` / ``FROM ${BASE}``) built on top of
    each task's environment (``agentlayers``); the grader runs from the environment without it. Without it, the
    agent must be in the task's image."""
    tool_map: dict[str, ToolMapping] = {}
    """Model-reported tool name → the contract tool it counts as, for the task's trajectory constraints; over
    ``toolnames.DEFAULT_TOOL_MAP`` (Claude Code's, Codex's and OpenHands' tool names are there already)."""
    text_edits: Literal["none", "search_replace"] = "none"
    """How the agent edits through its answers' text: ``search_replace`` (aider's SEARCH/REPLACE blocks) makes
    each block an ``edit_file`` of the file it names, for the trajectory constraints (``toolnames``)."""


class ScriptCandidate(_CandidateBase):
    agent: Literal["script"]
    """Runs a YAML file of tool-contract steps."""
    script: Path
    """The steps file (relative to the manifest)."""


class OracleCandidate(_CandidateBase):
    agent: Literal["oracle"]
    """Applies the grader folder's reference solution."""


class NopCandidate(_CandidateBase):
    agent: Literal["nop"]
    """Submits at once without doing anything."""


Candidate = Annotated[
    Union[ClaudeCandidate, CommandCandidate, ScriptCandidate, OracleCandidate, NopCandidate],
    Field(discriminator="agent"),
]


# --------------------------------------------------------------------------- environment
class EnvironmentConfig(Model):
    cpu_limit: float = Field(default=1.0, gt=0)
    """Hard CPU ceiling (CPUs)."""
    cpu_reservation: float = Field(default=1.0, gt=0)
    """What admission control reserves; ≤ cpu_limit."""
    memory_limit_mb: int = Field(default=2048, ge=64)
    """Hard kill threshold in MiB; swap equals memory (no swap)."""
    memory_reservation_mb: int = Field(default=1024, ge=16)
    """Soft reservation in MiB; ≤ memory_limit_mb."""
    pids_limit: int = Field(default=512, ge=16)
    """Maximum processes and threads in the container."""
    disk_limit_mb: int = Field(default=2048, ge=16)
    """Size of the workspace disk; every writable path the agent has is bounded."""
    network_policy: Literal["none", "model-api-only", "allowlist"] = "none"
    """``none``: loopback only. ``model-api-only``: loopback plus trialbox's model proxy."""
    network_allowlist: list[str] = []
    """Hosts or CIDRs, only with ``allowlist``."""
    dependency_cache_policy: Literal["offline", "readonly-cache", "online"] = "offline"
    """Whether dependencies may be fetched during a trial."""
    runtime: Literal["runc", "runsc"] = "runc"
    """Container runtime; ``runsc`` is gVisor."""


class ExecutionConfig(Model):
    trials_per_task: int = Field(default=5, ge=1)
    """Replicates per (task, candidate)."""
    deadline_seconds: float = Field(default=1800, gt=0)
    """Per trial, on the host clock, model time included."""
    max_total_tokens: int = Field(default=1_000_000, ge=1)
    """Per trial."""
    max_tool_calls: int = Field(default=200, ge=1)
    """Per trial, enforced live."""
    max_cost_usd: float = Field(default=10.0, ge=0)
    """Per trial."""
    max_run_cost_usd: float | None = Field(default=None, ge=0)
    """Whole run; no trial is admitted once reached."""
    concurrency: int | Literal["auto"] = "auto"
    """Trials at once; ``auto`` derives it from the host and the reservations."""
    order: Literal["counterbalanced", "sequential"] = "counterbalanced"
    """Trial order within blocks of task × period."""
    backend: Literal["local", "ray"] = "local"
    """Where trials run: ``local`` (this machine's engine) or ``ray`` (a Ray cluster; every node with the
    ``docker`` resource runs its trials on its own engine). Does not shape results: the lock leaves it out,
    and ``trialbox run --backend`` overrides it."""
    ray_address: str | None = None
    """The Ray cluster's address (``host:port``) with ``backend: ray``; default ``RAY_ADDRESS``."""
    engine_outage_wait_s: float = Field(default=600.0, gt=0, le=7 * 24 * 3600)
    """How long the run waits for a Docker engine that stopped answering (local backend): no trial starts and no
    retry is spent meanwhile; past it the run stops (exit 75) and ``trialbox run`` on its folder finishes it.
    Not in the lock: it does not shape results."""
    max_infra_errors: int = Field(default=0, ge=0)
    """How many trials a finished run may record as infrastructure errors (after their retries) and still exit 0;
    more exit 4, everything recorded. Not in the lock: it does not shape results."""


class JudgeConfig(Model):
    model_snapshot: str = Field(min_length=1)
    """Model behind the semantic judge."""
    rubric_policy: Literal["per_task"] = "per_task"
    """Rubrics come from each grader folder's ``rubric.md`` (tasks without one are not judged)."""
    critical: bool = False
    """Whether a ``fail`` from the judge rejects the trial (calibrate it first: ``trialbox calibrate``)."""


class TasksConfig(Model):
    path: Path = Path("tasks")
    """Folder of task folders (relative to the manifest)."""
    graders: Path = Path("graders")
    """Folder of held-out grader folders, one per task id."""
    images: Path = Path("images")
    """Folder of image recipes the tasks' ``image`` names refer to."""
    select: list[str] = ["*"]
    """Task ids or globs."""


class AdoptionConfig(Model):
    baseline: str
    """Candidate name of the baseline."""
    candidate: str
    """Candidate name of the design under decision."""
    min_delta: float = 0.0
    """Required improvement of the primary metric over the baseline."""
    max_cost_per_accepted_usd: float | None = Field(default=None, gt=0)
    """Upper bound on the candidate's cost per accepted run."""
    blocking_criteria: list[str] = []
    """Criteria whose failure in any trial blocks adoption."""
    min_grader_strength: float | None = Field(default=None, ge=0, le=1)
    """Count only tasks whose grader rejected at least this share of the reference solution's mutants (``tasks check
    --mutants``, as the run's lock recorded it); tasks never measured are left out too. Declared before the run."""


class AnalysisConfig(Model):
    k: list[int] = [1]
    """Every k ≤ trials_per_task."""
    confidence: float = Field(default=0.95, gt=0, lt=1)
    """Confidence level of every interval."""
    primary_metric: Literal["pass_at_k", "pass_hat_k", "acceptance_rate"] = "pass_hat_k"
    """Metric at ``k[0]`` the adoption rule uses."""
    exclusions: list[str] = []
    """Outcome kinds left out of the primary denominator."""
    cluster_by: Literal["task", "cluster"] = "cluster"
    """The unit intervals treat as independent: ``cluster`` (the default), each task's declared ``cluster``, its
    repository where it names none (a task whose repository is its own folder is its own cluster); ``task``, each
    task on its own (too narrow where tasks of one repository share its difficulty)."""
    exclude_suspect_tasks: bool = False
    """Leave *suspect* tasks out of every figure: tasks on which no candidate but ``oracle`` and ``nop`` had an
    accepted trial (their grader may reject correct work; the report lists them either way). Only as declared
    before the run: leaving out what nobody solved after seeing it would raise every rate."""
    suspect_evidence: list[str] = []
    """Earlier run folders (relative to the manifest) whose solves clear a task of suspicion: a task a candidate
    other than ``oracle`` and ``nop`` solved there, with the same task and grader folders (their hashes in both
    locks), is not suspect here (``suspects``). Declared before the run, like ``exclude_suspect_tasks``."""
    min_effect: float | None = None
    """Smallest difference worth detecting (sample-size hint)."""
    adoption: AdoptionConfig | None = None
    """Adoption rule declared before the run."""


class CostsConfig(Model):
    """Prices of what is not a model call (model tokens are priced by the versioned table ``prices.yaml``).

    Every price is optional, and one left undeclared counts as zero *by name*: the report lists what was
    used without a price (CPU-hours, GiB-hours, tool calls, interventions). The whole section is recorded in the
    lock, so a run's costs trace to the prices they came from."""

    version: str | None = Field(default=None, min_length=1)
    """Names this set of prices (``infra-2026-11``); required once any price is declared."""
    cpu_hour_usd: float | None = Field(default=None, ge=0)
    """USD per CPU-hour of the sandbox and grader containers."""
    memory_gib_hour_usd: float | None = Field(default=None, ge=0)
    """USD per GiB-hour of memory of the sandbox and grader containers."""
    basis: Literal["measured", "reserved"] = "measured"
    """``measured``: the CPU time and memory-time the containers' cgroups counted. ``reserved``: the
    containers' reservations times their wall time (what a dedicated machine is paid for, used or not)."""
    tool_call_usd: dict[str, Annotated[float, Field(ge=0)]] = {}
    """USD per call of a tool of the tool contract (``bash``, ``read_file``...), for tools that carry a price."""
    human_hour_usd: float | None = Field(default=None, ge=0)
    """USD per hour of the person who answers ``ask_user``."""
    minutes_per_intervention: float | None = Field(default=None, ge=0)
    """Minutes of a person's time one intervention stands for (``ask_user`` is answered by the task's canned
    reply: the time a person would have spent is declared, not measured)."""


class Manifest(Model):
    """An experiment manifest, as a person writes it."""

    experiment: ExperimentConfig
    """What the experiment is."""
    candidates: list[Candidate] = Field(min_length=1)
    """One or more designs; comparisons are between these."""
    environment: EnvironmentConfig = EnvironmentConfig()
    """Resources and isolation, identical for every candidate."""
    execution: ExecutionConfig = ExecutionConfig()
    """Replicates, deadline and budgets."""
    judge: JudgeConfig | None = None
    """Optional semantic judge."""
    tasks: TasksConfig = TasksConfig()
    """Where the tasks, graders and images are."""
    analysis: AnalysisConfig = AnalysisConfig()
    """Statistics and the adoption rule."""
    costs: CostsConfig = CostsConfig()
    """Prices of the infrastructure, priced tools and human time (the numerator of cost per accepted run)."""

    @property
    def baseline(self) -> str:
        """The candidate every comparison is against: the adoption rule's baseline, else the first candidate."""
        return self.analysis.adoption.baseline if self.analysis.adoption else self.candidates[0].name


class LoadedManifest(BaseModel):
    """A manifest with the file it came from; paths in it resolve against ``root``."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    path: Path
    manifest: Manifest

    @property
    def root(self) -> Path:
        return self.path.parent

    def resolve(self, p: Path) -> Path:
        """A path of the manifest, made absolute against its folder."""
        return p if p.is_absolute() else (self.root / p)


__all__ = ["Manifest", "LoadedManifest", "ConfigError"]
