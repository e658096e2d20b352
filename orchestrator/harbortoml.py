"""Reading a Harbor task folder's ``task.toml``: what trialbox can honour, and a reason for everything else.

Both schemas found in published tasks are read: the current one (``schema_version``, a ``[task]`` table,
``memory_mb``/``storage_mb``, ``network_mode``) and the older one (``version = "1.0"``, author fields in
``[metadata]``, ``memory = "2G"``, ``storage = "10G"``, ``allow_internet``). Every key ends in exactly one
of three places, so nothing is dropped silently:

* **mapped** to a trialbox field (``HarborTask``): the timeouts to the task's deadline and the grader's time
  limit, the resources to the task's requirements, the network mode to a requirement, the variables to the
  task's, the grader's and the solution's environments;
* **kept** as data in the task's ``origin`` (metadata, names, authors, keywords) or **noted** with the reason
  it has no effect here (``build_timeout_sec``: builds are cached by content; ``[verifier]
  environment_mode``: trialbox's grader is always a separate container);
* **refused**, with the reason (``Refusal``): anything that cannot be honoured here (GPUs, TPUs, an
  allowlist, multi-step tasks, MCP servers, another OS, a separate verifier image, a user to run as) and
  every key trialbox does not know. A task with a refusal is not imported.
"""

from __future__ import annotations

import posixpath
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.I)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TEMPLATE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}")
TOP_KEYS = {"version", "schema_version", "source", "task", "metadata", "verifier", "agent", "environment",
            "solution"}


@dataclass(frozen=True)
class Refusal:
    """One thing of a Harbor task that cannot be honoured: where, and why."""

    task: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.task}: {self.field}: {self.reason}" if self.field else f"{self.task}: {self.reason}"


@dataclass
class HarborTask:
    """What a Harbor task's ``task.toml`` maps to (see the module docstring)."""

    name: str
    schema_version: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    agent_timeout_s: float | None = None
    verifier_timeout_s: float | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    network: str = "any"
    """``none`` (the task declares no network) or ``any`` (public: trialbox runs stricter, as its manifest says)."""
    acceptance: str | None = None
    """Not of ``task.toml``: the ``--acceptance`` the import was given or kept (``tasks.Acceptance``)."""
    verifier_separate: bool = False
    """``[verifier] environment_mode = "separate"`` (or a ``[verifier.environment]`` table): the verifier runs in an
    image of its own, ``verifier_image`` or, without it, one built from ``tests/`` (its ``Dockerfile``)."""
    verifier_image: str | None = None
    """``[verifier.environment] docker_image``."""
    docker_image: str | None = None
    workdir: str | None = None
    """``[environment] workdir``: where the task's files are (else the image's WORKDIR)."""
    env: dict[str, str] = field(default_factory=dict)
    verifier_env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)


def size_mb(value: Any) -> int | None:
    """``"2G"``, ``"512M"``, ``"10GB"``, ``2048`` (MB) → megabytes; None when it is not a size."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if value > 0 else None
    m = SIZE.match(str(value))
    if not m:
        return None
    number, unit = float(m.group(1)), m.group(2).upper()
    mb = number * {"": 1 / (1 << 20), "K": 1 / 1024, "M": 1, "G": 1024, "T": 1 << 20}[unit] if unit else number
    return max(1, int(round(mb))) if mb > 0 else None


class _Reader:
    """Takes keys out of one table, so what is left at the end is what trialbox does not know."""

    def __init__(self, task: HarborTask, where: str, table: Any) -> None:
        self.task, self.where = task, where
        if not isinstance(table, dict):
            self.refuse("", f"expected a table, got {type(table).__name__}")
            table = {}
        self.table = dict(table)

    def name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def refuse(self, key: str, reason: str) -> None:
        self.task.refusals.append(Refusal(self.task.name, self.name(key) if key else self.where, reason))

    def note(self, key: str, reason: str) -> None:
        self.task.notes.append(f"{self.name(key)}: {reason}")

    def pop(self, key: str, default: Any = None) -> Any:
        return self.table.pop(key, default)

    def number(self, key: str) -> float | None:
        value = self.pop(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            self.refuse(key, f"expected a positive number, got {value!r}")
            return None
        return float(value)

    def env(self, key: str) -> dict[str, str]:
        value = self.pop(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.refuse(key, f"expected a table of variables, got {value!r}")
            return {}
        out = {}
        for k, v in value.items():
            if not ENV_NAME.match(str(k)) or isinstance(v, (dict, list)):
                self.refuse(f"{key}.{k}", f"expected NAME = value, got {k!r} = {v!r}")
            elif isinstance(v, str) and TEMPLATE.search(v):
                self.refuse(f"{key}.{k}", f"{v!r} takes its value from the host's environment: trialbox never passes "
                                          "the host's variables into a sandbox or a grader")
            else:
                out[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
        return out

    def rest(self) -> None:
        for key in self.table:
            self.refuse(key, "not a field trialbox knows: it cannot say that honouring the task ignores nothing")


def _network(r: _Reader, task: HarborTask, phase: str) -> None:
    mode = r.pop("network_mode")
    hosts = r.pop("allowed_hosts")
    if mode is None and hosts is None:
        return
    if mode == "allowlist" or hosts:
        r.refuse("network_mode" if mode else "allowed_hosts",
                 "an allowlist cannot be honoured: trialbox has no allowlist network policy (none or model-api-only)")
    elif mode == "no-network":
        if phase == "environment":
            task.network = "none"
    elif mode == "public":
        if phase == "verifier":
            r.refuse("network_mode", "the grader never has network: a test script that needs it cannot run here")
        elif phase == "environment":
            r.note("network_mode", "public: trials run with the manifest's network policy (none or model-api-only), "
                                   "stricter than the task allows")
        else:
            r.refuse("network_mode", "a network mode per phase needs switching the sandbox's network while it runs")
    else:
        r.refuse("network_mode", f"expected public, no-network or allowlist, got {mode!r}")


def _no_user(r: _Reader) -> None:
    user = r.pop("user")
    if user is not None:
        r.refuse("user", f"{user!r}: trialbox runs every agent and grader as its unprivileged sandbox user "
                         "(uid 1000, no capabilities); another user cannot be honoured")


def _environment(task: HarborTask, table: Any) -> None:
    r = _Reader(task, "environment", table)
    bt = r.pop("build_timeout_sec")
    if bt is not None:
        r.note("build_timeout_sec", "not applied: environments are built once, cached by content")
    task.cpus = r.number("cpus")
    for new, old in (("memory_mb", "memory"), ("storage_mb", "storage")):
        value = given = key = None
        if new in r.table:  # megabytes, a number
            key, given = new, r.pop(new)
            value = size_mb(given) if isinstance(given, (int, float)) else None
        if old in r.table:  # the older spelling, a size ("2G")
            key, given = old, r.pop(old)
            value = size_mb(given)
        if key is not None and value is None:
            r.refuse(key, f"expected a size, got {given!r}")
        setattr(task, new, value)
    gpus = r.pop("gpus")
    gpu_types = r.pop("gpu_types")
    if gpus:
        r.refuse("gpus", f"{gpus}: trialbox's sandboxes have no GPU")
    elif gpu_types:
        r.note("gpu_types", "no GPU is requested: nothing to apply")
    if r.pop("tpu"):
        r.refuse("tpu", "trialbox's sandboxes have no TPU")
    allow = r.pop("allow_internet")
    if allow is not None:
        if allow is False:
            task.network = "none"
        else:
            r.note("allow_internet", "true: trials run with the manifest's network policy (none or model-api-only)")
    _network(r, task, "environment")
    task.env = r.env("env")
    for name in ("PATH", "HOME", "PYTHONPATH"):
        if name in task.env:
            r.refuse(f"env.{name}", "set by trialbox (the image's PATH is kept; HOME is the sandbox's)")
    workdir = r.pop("workdir")
    if workdir is not None:
        if isinstance(workdir, str) and workdir.startswith("/") and posixpath.normpath(workdir) == workdir.rstrip("/"):
            task.workdir = workdir.rstrip("/") or "/"
        else:
            r.refuse("workdir", f"expected a normalised absolute path, got {workdir!r}")
    image = r.pop("docker_image")
    if image is not None:
        task.docker_image = str(image)
    if r.pop("docker_image_url") is not None:
        r.refuse("docker_image_url", "trialbox never downloads an image: load it into the engine and name it in "
                                     "docker_image")
    os_name = r.pop("os")
    if os_name not in (None, "linux"):
        r.refuse("os", f"{os_name!r}: trialbox runs Linux containers")
    for key, why in (("healthcheck", "trialbox starts a single container and waits for no service"),
                     ("mcp_servers", "trialbox offers the agent no MCP server (its tools are the tool contract)"),
                     ("skills_dir", "trialbox gives the agent nothing beyond the instruction and the workspace")):
        if r.pop(key):  # an empty list or table asks for nothing
            r.refuse(key, why)
    r.rest()


def _verifier(task: HarborTask, table: Any) -> None:
    r = _Reader(task, "verifier", table)
    task.verifier_timeout_s = r.number("timeout_sec")
    task.verifier_env = r.env("env")
    _no_user(r)
    mode = r.pop("environment_mode")
    table = r.pop("environment")
    if mode not in (None, "shared", "separate"):
        r.refuse("environment_mode", f"expected shared or separate, got {mode!r}")
    elif mode == "shared" and table is not None:
        r.refuse("environment", "a verifier environment with environment_mode = \"shared\" (Harbor refuses it too)")
    elif mode == "shared":
        r.note("environment_mode", "shared: trialbox always grades in a separate container, from the task's "
                                   "environment, with the final workspace handed over")
    task.verifier_separate = mode == "separate" or (mode is None and table is not None)
    if table is not None:
        v = _Reader(task, "verifier.environment", table)
        image = v.pop("docker_image")
        if image is not None:
            task.verifier_image = str(image)
        for key in list(v.table):
            v.refuse(key, "only docker_image of a separate verifier's environment can be honoured (the grader's "
                          "limits and network are trialbox's)")
    if r.pop("collect"):  # `collect = []`, as `harbor init` writes it, asks for nothing
        r.refuse("collect", "collecting files of the grader into the run folder is not built: trialbox keeps the "
                            "grader's output and the reward only")
    _network(r, task, "verifier")
    r.rest()


def _agent(task: HarborTask, table: Any) -> None:
    r = _Reader(task, "agent", table)
    task.agent_timeout_s = r.number("timeout_sec")
    _no_user(r)
    _network(r, task, "agent")
    r.rest()


def read_task_toml(folder: Path) -> HarborTask:
    """The task of ``folder`` (its ``task.toml``), with its notes and refusals; the task is named by the folder."""
    task = HarborTask(name=folder.name)
    path = folder / "task.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        task.refusals.append(Refusal(task.name, "task.toml", f"not found in {folder}"))
        return task
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        task.refusals.append(Refusal(task.name, "task.toml", f"not valid TOML: {exc}"))
        return task
    task.schema_version = str(data.get("schema_version") or data.get("version") or "")
    if "steps" in data:
        task.refusals.append(Refusal(task.name, "steps", "a multi-step task cannot be honoured: a trialbox trial "
                                                         "is one instruction and one grading"))
    if data.get("artifacts"):  # `artifacts = []`, as `harbor init` writes it, asks for nothing
        task.refusals.append(Refusal(task.name, "artifacts", "collecting files of the sandbox into the run folder is "
                                                             "not built: trialbox keeps the workspace's diff only"))
    meta = data.get("metadata") or {}
    task.metadata = dict(meta) if isinstance(meta, dict) else {"metadata": meta}
    info = data.get("task") or {}
    if isinstance(info, dict):
        task.metadata.update({f"task.{k}": v for k, v in info.items()})
    if data.get("source") is not None:
        task.metadata["source"] = data["source"]
    _verifier(task, data.get("verifier") or {})
    _agent(task, data.get("agent") or {})
    _environment(task, data.get("environment") or {})
    solution = _Reader(task, "solution", data.get("solution") or {})
    task.solution_env = solution.env("env")
    solution.rest()
    for key in data:
        if key not in TOP_KEYS | {"steps", "artifacts"}:
            task.refusals.append(Refusal(task.name, key, "not a field trialbox knows: it cannot say that honouring "
                                                         "the task ignores nothing"))
    return task


NETWORK_FETCH = re.compile(r"\b(curl|wget)\b|\b(pip3?|uv\s+pip)\s+install\b|\buvx?\s+(tool\s+install|run\s+--with)\b"
                           r"|\bapt(-get)?\s+(-\S+\s+)*install\b|\bnpm\s+(install|i)\b|\bastral\.sh\b|\buvx\b")


def fetches(script: str) -> list[str]:
    """Lines of a test or solution script that look like downloads (the grader has no network)."""
    return [line.strip() for line in script.splitlines()
            if NETWORK_FETCH.search(line) and not line.lstrip().startswith("#")][:5]
