"""Task folders (what the agent may see) and grader folders (held out).

``tasks/<id>/task.yaml`` and ``graders/<id>/grader.yaml`` follow DESIGN.md; the
field names are the contract users write. ``taskload.load_tasks`` returns every
selected task with its grader, or raises ``ValidationFailed`` listing every
problem in every folder at once.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .environments import WORKSPACE, Runtime
from .errors import RepoError
from .images import Recipe
from .hashing import sha256_file
from .manifest import Model
from .settings import load_settings

SHA1 = re.compile(r"^[0-9a-f]{40}$")


class RepoConfig(Model):
    dir: Path | None = None
    """Plain files beside task.yaml; trialbox commits them deterministically."""
    git: str | None = None
    """A real repository (path relative to the task folder, or absolute) …"""
    commit: str | None = None
    """… at this full 40-hex commit, which becomes the initial commit."""

    @model_validator(mode="after")
    def _exactly_one(self) -> "RepoConfig":
        if (self.dir is None) == (self.git is None):
            raise ValueError("expected exactly one of 'dir' or 'git' (with 'commit')")
        if self.git is not None and (self.commit is None or not SHA1.match(self.commit)):
            raise ValueError("'git' needs 'commit': a full 40-hex commit id")
        if self.dir is not None and self.commit is not None:
            raise ValueError("'commit' goes with 'git', not with 'dir'")
        return self


class ScopeConfig(Model):
    allowed: list[str] = ["**"]
    """Glob patterns of authorized paths; everything else is out of scope."""


class ConstraintsConfig(Model):
    required_tools: list[str] = []
    """Tools that must be used at least once."""
    forbidden_tools: list[str] = []
    """Tools that must never be used."""
    forbidden_commands: list[str] = []
    """Regular expressions over bash commands."""
    order: list[list[str]] = []
    """Pairs [a, b]: a must happen before b; a tool name or ``bash:<regex>``."""
    max_steps: int = Field(default=40, ge=1)
    """Model turns allowed (a trajectory criterion)."""


class Requirements(Model):
    """What the task needs to be solvable (an imported Harbor task's declared resources). The manifest still
    sets every trial's limits, for comparability; ``validate`` refuses a manifest that gives less."""

    cpus: float | None = Field(default=None, gt=0)
    """CPUs (checked against ``environment.cpu_limit``)."""
    memory_mb: int | None = Field(default=None, gt=0)
    """Memory (checked against ``environment.memory_limit_mb``)."""
    storage_mb: int | None = Field(default=None, gt=0)
    """Disk (checked against ``environment.disk_limit_mb``, the workspace disk: the only writable disk a
    trial has besides its small /tmp and $HOME)."""
    network: Literal["none", "any"] = "any"
    """``none``: the task must run without network (Harbor's ``no-network``): only ``none`` or
    ``model-api-only`` (the agent's model, through trialbox's proxy) are accepted."""


class Origin(Model):
    """Where an imported task came from (recorded in the lock beside trialbox's own hashes)."""

    format: Literal["harbor"]
    name: str = ""
    """The task's own name (Harbor's ``[task] name``, or its folder name)."""
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    """Content digest of the source folder as imported (every file, names and bytes)."""
    schema_version: str = ""
    """The source's schema version (``schema_version`` or the older ``version``)."""
    source: str = ""
    """The folder it was imported from (informational)."""
    metadata: dict[str, Any] = {}
    """The source's metadata, kept as data (author, difficulty, category, tags…)."""


class TaskConfig(Model):
    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    """Equals the folder name."""
    instruction: Path = Path("instruction.md")
    """File beside task.yaml: the only text the agent is given."""
    repo: RepoConfig
    """The repository the agent starts from."""
    image: str = Field(min_length=1)
    """The environment's recipe: a name under the task set's images/, or a folder of this task's own
    (``./environment``); resolved to its image ID in the lock."""
    env: dict[str, str] = {}
    """Environment variables, set identically in the agent's sandbox and in the grader."""
    python_path: list[str] = []
    """Entries put in front of Python's path (relative to the workspace), in the sandbox and the grader."""
    install: str | None = None
    """A shell command run in the workspace on the trusted initial commit before the agent starts, and again in
    the grader (e.g. ``pip install --user --no-deps --no-build-isolation --no-index -e .``)."""
    pytest_plugins: list[str] = []
    """pytest plugins the tests need, by module name; loaded explicitly (never by entry point)."""
    difficulty: Literal["easy", "medium", "hard"]
    """Reports break results down by it."""
    split: Literal["public", "held_out"] = "public"
    """Only tasks of the manifest's ``task_split`` run."""
    cluster: str | None = None
    """Resampling unit for intervals (default: the repository)."""
    scope: ScopeConfig = ScopeConfig()
    """Authorized paths."""
    constraints: ConstraintsConfig = ConstraintsConfig()
    """Checked on the host-recorded events."""
    abstain_expected: bool = False
    """True when the correct answer is to abstain."""
    ask_user_reply: str | None = None
    """Canned answer to ``ask_user`` (counted as an intervention); none means the tool refuses."""
    workdir: str = Field(default=WORKSPACE, pattern=r"^/[A-Za-z0-9_.@+/-]*$")
    """Where the workspace is mounted, in the agent's sandbox and in the grader (an imported Harbor task: its
    environment's working directory, e.g. ``/app``). Anything other than ``/workspace`` needs a script grader."""
    deadline_seconds: float | None = Field(default=None, gt=0)
    """The task's own deadline (Harbor's ``[agent] timeout_sec``): a trial gets the smaller of it and the
    manifest's ``execution.deadline_seconds``."""
    requires: Requirements = Requirements()
    """What the task needs; checked against the manifest's environment by ``validate``."""
    origin: Origin | None = None
    """Set by an importer: the source format, name and content digest."""


ACCEPTANCE_PART = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*>=\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


def parse_acceptance(text: str) -> list[dict[str, Any]]:
    """``"correctness>=1,performance>=0.5"`` as conditions; ``ValueError`` naming the part that is not
    ``METRIC>=NUMBER`` or a metric named twice."""
    out: list[dict[str, Any]] = []
    for part in str(text).split(","):
        m = ACCEPTANCE_PART.match(part)
        if not m:
            raise ValueError(f"expected METRIC>=NUMBER[,METRIC>=NUMBER…], got {part.strip()!r}")
        if any(c["metric"] == m[1] for c in out):
            raise ValueError(f"metric {m[1]!r} named twice")
        out.append({"metric": m[1], "at_least": float(m[2])})
    return out


class Condition(Model):
    """One reward metric and the least value it must reach."""

    metric: str = Field(default="reward", pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    """The number read: ``reward.txt``'s (named ``reward``), or this key of ``reward.json``."""
    at_least: float = 1.0
    """Accepted only when the metric is at least this."""

    def __str__(self) -> str:
        return f"{self.metric} ≥ {self.at_least:g}"


class Acceptance(Model):
    """When a script grader's reward means accepted: every condition holds (a task with several rewards, such as
    ``correctness`` and ``performance``, declares each). Written in ``grader.yaml`` as one condition
    (``{metric: reward, at_least: 1}``), a list of them, or the text ``import-harbor --acceptance`` takes
    (``"correctness>=1,performance>=0.5"``)."""

    all_of: list[Condition] = Field(default_factory=lambda: [Condition()], min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _forms(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"all_of": parse_acceptance(value)}
        if isinstance(value, list):
            return {"all_of": value}
        if isinstance(value, dict) and "all_of" not in value:
            return {"all_of": [value]}
        return value

    @model_validator(mode="after")
    def _once_each(self) -> "Acceptance":
        names = [c.metric for c in self.all_of]
        if len(set(names)) != len(names):
            raise ValueError(f"a metric is named twice: {names}")
        return self

    @property
    def metrics(self) -> list[str]:
        return [c.metric for c in self.all_of]

    def missing(self, reward: dict[str, float] | None) -> list[str]:
        """The metrics the conditions name that ``reward`` lacks."""
        return [c.metric for c in self.all_of if c.metric not in (reward or {})]

    def holds(self, reward: dict[str, float] | None) -> bool:
        return reward is not None and all(reward.get(c.metric, float("-inf")) >= c.at_least for c in self.all_of)

    def text(self) -> str:
        """As ``--acceptance`` takes it (what an import keeps)."""
        return ",".join(f"{c.metric}>={c.at_least:g}" for c in self.all_of)

    def __str__(self) -> str:
        return " and ".join(str(c) for c in self.all_of)


class GraderConfig(Model):
    kind: Literal["pytest", "script"] = "pytest"
    """``pytest``: trialbox runs the named tests itself, with its safeguards. ``script``: the task's own test
    script runs in the grader container and writes a reward (Harbor's verifier contract)."""
    tests: Path | None = None
    """Files copied over the final workspace at grading (relative to the grader folder); or"""
    test_patch: Path | None = None
    """a patch applied to it."""
    fail_to_pass: list[str] = []
    """Test node ids that must fail before and pass after (at least one unless the task expects abstention)."""
    pass_to_pass: list[str] = []
    """Regressions: must keep passing."""
    command: str = "python3 -m pytest"
    """Test command: ``[VAR=value …] python3 -m pytest [options]`` or ``pytest [options]``; trialbox adds the
    repository's trusted configuration, node ids, result files and its safeguards. Anything else is refused."""
    solution: Path | None = Path("solution.patch")
    """What the oracle agent applies."""
    rubric: Path | None = None
    """Optional criteria for the semantic judge."""
    script: str = "test.sh"
    """``script`` kind: the test script inside ``tests`` (run with bash from ``tests_mount``)."""
    tests_mount: str = Field(default="/tests", pattern=r"^/[A-Za-z0-9_.@+/-]+$")
    """``script`` kind: where ``tests`` is copied in the grader container, at grading time only."""
    reward_dir: str = Field(default="/logs/verifier", pattern=r"^/[A-Za-z0-9_.@+/-]+$")
    """``script`` kind: the folder the script writes ``reward.txt`` or ``reward.json`` into: created empty in
    the grader, outside the workspace."""
    acceptance: Acceptance = Acceptance()
    """``script`` kind: which reward is accepted (default: ``reward`` at least 1; several metrics: all of them)."""
    timeout_seconds: float | None = Field(default=None, gt=0)
    """The test run's time limit (Harbor's ``[verifier] timeout_sec``); default trialbox's grader limit."""
    image: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.@+-]+$")
    """``script`` kind: a recipe folder of the grader folder (a ``Dockerfile``, its ``environment.yaml``) whose
    image the grader runs in, instead of the task's environment: Harbor's separate verifier image. Held out like
    the tests (it is built from the grader folder, never given to the agent); the final workspace is handed over
    at the task's workdir as always; the lock pins it beside the environment."""
    env: dict[str, str] = {}
    """``script`` kind: variables of the test script only (Harbor's ``[verifier] env``)."""
    solution_script: str = "solve.sh"
    """``script`` kind with a ``solution`` folder: the oracle runs this script of it, from ``solution_mount``."""
    solution_mount: str = Field(default="/solution", pattern=r"^/[A-Za-z0-9_.@+/-]+$")
    """Where the oracle's sandbox gets the ``solution`` folder (only the oracle's, only when it runs)."""
    solution_env: dict[str, str] = {}
    """Variables of the solution script (Harbor's ``[solution] env``)."""
    seal: bool = True
    """``pytest`` kind: seal the requested tests' plain comparisons with literals (``assert f(x) == "a"``): the
    literal stays on the host, which compares the value the test sent (``grading/seal.py``), so code under test
    cannot pass them by forging the test process's reports. ``false`` for a task whose code returns objects that
    equal a literal of another type and ``repr`` (``tasks check`` shows the oracle failing on them by name)."""

    @model_validator(mode="after")
    def _tests_or_patch(self) -> "GraderConfig":
        if self.kind == "script":
            if self.tests is None or self.test_patch is not None:
                raise ValueError("a script grader needs 'tests' (the folder holding its script), not 'test_patch'")
            if self.fail_to_pass or self.pass_to_pass:
                raise ValueError("a script grader's script decides; fail_to_pass and pass_to_pass are for kind: pytest")
            if self.command != "python3 -m pytest":
                raise ValueError("'command' is for kind: pytest; a script grader runs its 'script'")
            return self
        if (self.tests is None) == (self.test_patch is None):
            raise ValueError("expected exactly one of 'tests' or 'test_patch'")
        return self

    @property
    def solution_is_script(self) -> bool:
        return self.kind == "script" and self.solution is not None and not str(self.solution).endswith(".patch")


class Task(BaseModel):
    """A loaded task with its held-out grader; paths are absolute."""

    model_config = ConfigDict(frozen=True)
    config: TaskConfig
    folder: Path
    grader: GraderConfig
    grader_folder: Path
    recipe: Recipe
    """The environment's recipe (its chain resolves to the image the task runs in)."""
    runtime: Runtime
    """Variables, Python path, install step, plugins and test command, for the sandbox and the grader."""
    grader_recipe: Recipe | None = None
    """The grader's own image (``GraderConfig.image``); None: the grader runs in the task's environment."""
    untouched_times_out: bool = False
    """Learnt, never declared: the task's last passed ``tasks check`` saw its script grader time out on the untouched
    environment (its tests wait for what the change makes) while the oracle passed in time. A trial whose grading
    times out is then the agent's failure (reward 0), at the cost of one timeout, not a broken grader checked
    against the untouched environment (``grading.grade``). Set from the run's lock (``with_check_facts``)."""

    @property
    def image_key(self) -> str:
        """The key of the task's image in the lock's ``images`` section."""
        return self.recipe.key

    @property
    def grader_image_key(self) -> str:
        """The key of the grader's image in the lock's ``images`` section (the environment's unless the grader
        names its own)."""
        return self.grader_recipe.key if self.grader_recipe is not None else self.recipe.key

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def cluster(self) -> str:
        return self.config.cluster or self.repo_identity

    @property
    def repo_identity(self) -> str:
        r = self.config.repo
        return f"dir:{self.id}" if r.dir is not None else f"git:{r.git}"

    def repo_source(self) -> Path:
        r = self.config.repo
        p = Path(r.dir if r.dir is not None else r.git)
        return p if p.is_absolute() else self.folder / p

    def grader_path(self, p: Path) -> Path:
        return p if p.is_absolute() else self.grader_folder / p


def trusted_git_dir(src: Path) -> Path:
    """The task author's repository; a ``.bundle`` file is cloned (once, cached) to read it."""
    if not (src.is_file() and src.suffix == ".bundle"):
        return src
    cache = load_settings().repos_dir / "bundles" / f"{sha256_file(src)[:24]}.git"
    if not cache.is_dir():
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(cache.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        proc = subprocess.run(["git", "clone", "--quiet", "--mirror", str(src), str(tmp)],
                              capture_output=True, text=True, env=git_env())
        if proc.returncode != 0:
            raise RepoError(f"cannot read bundle {src}: {proc.stderr.strip()}")
        try:
            os.replace(tmp, cache)
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    return cache


def git_commit_exists(repo: Path, commit: str) -> bool:
    """Ask git (on the task author's trusted repository) whether ``commit`` is there."""
    try:
        repo = trusted_git_dir(repo)
    except RepoError:
        return False
    proc = subprocess.run(["git", "-C", str(repo), "-c", "core.hooksPath=/dev/null", "cat-file", "-e",
                           f"{commit}^{{commit}}"], capture_output=True, env=git_env())
    return proc.returncode == 0


def git_env() -> dict[str, str]:
    """An environment for host git that ignores the user's and system's configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_SYSTEM="/dev/null", GIT_TERMINAL_PROMPT="0")
    return env


