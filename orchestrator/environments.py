"""What a task's repository needs at run time, applied identically in the agent's sandbox and the grader.

A task runs in an *environment*: an image recipe (``images/<name>/`` of the task
set, or a folder of the task's own) and the run-time settings declared with
it. Settings come from two places, merged in this order (later extends
earlier):

1. the recipe chain's ``environment.yaml`` files, parent first
   (``from``: the recipe it builds on; ``env``, ``python_path``, ``install``,
   ``pytest_plugins``);
2. the task's own ``task.yaml`` (the same four fields);
3. the grader's ``command``, parsed here: ``[VAR=value …] python3 -m pytest
   [options]`` or ``pytest [options]``. Its variables join ``env`` (a
   ``PYTHONPATH`` becomes ``python_path`` entries), so the agent running the
   tests sees what the grader will see.

A command trialbox cannot honour exactly (another runner, test paths given in
the command, options that would change what trialbox controls: the
configuration file, the root folder, result files, plugin loading,
deselection) is a validation error naming the field, never silently replaced.

``Runtime`` is the resolved result; the sandbox's environment variables come
from ``Runtime.sandbox_env`` and the grader's run configuration from
``Runtime.grader_config``.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from .errors import ValidationFailed
from .manifest import Model
from .loading import parse_model

WORKSPACE = "/workspace"
VAR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
PYTHON = re.compile(r"^(?:/[^\s]*/)?python(?:\d+(?:\.\d+)?)?$")
RESERVED_VARS = re.compile(r"^(TRIALBOX_.*|PYTEST_DISABLE_PLUGIN_AUTOLOAD|PYTEST_PLUGINS|HOME|PATH)$")
PLUGIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
# Options trialbox sets itself, or that would stop a requested test from running or being reported.
REFUSED_OPTIONS = {
    "-c": "trialbox passes the repository's own configuration file from the trusted initial commit",
    "--config-file": "trialbox passes the repository's own configuration file from the trusted initial commit",
    "--rootdir": "the root folder is the workspace",
    "--junitxml": "trialbox writes its own result files outside the workspace",
    "--junit-xml": "trialbox writes its own result files outside the workspace",
    "-p": "declare plugins in pytest_plugins (loaded explicitly, never by entry point)",
    "-k": "every requested test must run: no deselection",
    "-m": "every requested test must run: no deselection",
    "--deselect": "every requested test must run: no deselection",
    "--ignore": "every requested test must run: no deselection",
    "--ignore-glob": "every requested test must run: no deselection",
    "-x": "every requested test must run: no stopping early",
    "--exitfirst": "every requested test must run: no stopping early",
    "--maxfail": "every requested test must run: no stopping early",
    "--lf": "every requested test must run", "--last-failed": "every requested test must run",
    "--ff": "every requested test must run", "--failed-first": "every requested test must run",
    "--sw": "every requested test must run", "--stepwise": "every requested test must run",
    "--co": "the tests must run", "--collect-only": "the tests must run",
    "--noconftest": "the repository's conftest.py files are part of its test set-up",
    "--confcutdir": "the repository's conftest.py files are part of its test set-up",
    "--pyargs": "tests are named by node id",
    "--timeout": "trialbox sets the per-test timeout",
}


class EnvironmentSettings(Model):
    """``environment.yaml`` beside a recipe's Dockerfile or recipe.yaml (every field optional)."""

    from_: str | None = Field(default=None, alias="from")
    """The recipe this one builds on (its image ID is the build argument ``BASE``); default ``base``;
    ``none``: the Dockerfile's own FROM names its base by image ID (an imported Harbor environment)."""
    env: dict[str, str] = {}
    """Environment variables of every sandbox and grader run in this environment."""
    python_path: list[str] = []
    """Entries put in front of Python's path (relative to the workspace, or absolute outside it)."""
    install: str | None = None
    """A shell command run in the workspace on the trusted initial commit, before the agent starts and again in
    the grader (e.g. ``pip install --user --no-deps --no-build-isolation --no-index -e .``)."""
    pytest_plugins: list[str] = []
    """pytest plugins by module name (the target of their ``pytest11`` entry point), loaded explicitly."""


@dataclass(frozen=True)
class TestCommand:
    """The grader ``command``, parsed."""

    __test__ = False

    interpreter: str = "python3"
    """The Python that runs pytest (``python3``, ``python3.12``, ``/opt/venv/bin/python``…)."""
    module: bool = True
    """``python -m pytest``: the workspace is first on the path (as Python puts the working folder there)."""
    args: tuple[str, ...] = ()
    """Extra pytest options."""
    env: tuple[tuple[str, str], ...] = ()
    """Variables set in front of the command."""


def parse_test_command(command: str) -> tuple[TestCommand | None, str | None]:
    """The parsed command, or None and what was expected."""
    expected = ("expected `[VAR=value …] python3 -m pytest [options]` or `pytest [options]` (trialbox runs pytest "
                "itself, with its safeguards)")
    try:
        tokens = shlex.split(command)
    except ValueError as exc:
        return None, f"cannot be parsed as a shell command ({exc}); {expected}"
    env = []
    while tokens and VAR.match(tokens[0]):
        name, value = VAR.match(tokens.pop(0)).groups()  # type: ignore[union-attr]
        env.append((name, value))
    if not tokens:
        return None, expected
    if tokens[0] in ("pytest", "py.test"):
        interpreter, module, args = "python3", False, tokens[1:]
    elif PYTHON.match(tokens[0]) and tokens[1:3] == ["-m", "pytest"]:
        interpreter, module, args = tokens[0], True, tokens[3:]
    else:
        return None, f"got {tokens[0]!r}: {expected}"
    if interpreter.startswith(WORKSPACE + "/"):
        return None, "the interpreter must come from the environment, not from the workspace the agent writes"
    i = 0
    while i < len(args):
        arg, name = args[i], args[i].split("=", 1)[0]
        if arg == "-p" and i + 1 < len(args) and args[i + 1].startswith("no:"):  # disabling a plugin is harmless
            i += 2
            continue
        if arg.startswith("-pno:"):
            i += 1
            continue
        if name in REFUSED_OPTIONS or (name.startswith("-p") and len(name) > 2 and not name.startswith("--")):
            return None, f"option {name} cannot be honoured: {REFUSED_OPTIONS.get(name, REFUSED_OPTIONS['-p'])}"
        takes_value = i > 0 and args[i - 1].startswith("-") and "=" not in args[i - 1] \
            and not args[i - 1].startswith("-pno:")
        if not arg.startswith("-") and not takes_value:
            return None, f"test paths ({arg!r}) do not belong in the command: the grader's test ids say what runs"
        i += 1
    for name, _ in env:
        if RESERVED_VARS.match(name):
            return None, f"variable {name} is set by trialbox"
    return TestCommand(interpreter, module, tuple(args), tuple(env)), None


def check_settings(env: dict[str, str], python_path: list[str], plugins: list[str]) -> list[tuple[str, str]]:
    """(field, what was expected) for every value that cannot be honoured."""
    out = []
    for name in env:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            out.append((f"env.{name}", "expected a variable name"))
        elif RESERVED_VARS.match(name) or name == "PYTHONPATH":
            out.append((f"env.{name}", "set by trialbox (use python_path for PYTHONPATH)"))
    for i, entry in enumerate(python_path):
        p = absolute_path(entry)
        if not entry or ":" in entry or p.startswith("/..") or (not entry.startswith("/") and not p.startswith(WORKSPACE)):
            out.append((f"python_path[{i}]", f"expected a folder inside the workspace or an absolute path, got {entry!r}"))
    for i, plugin in enumerate(plugins):
        if not PLUGIN.match(plugin):
            out.append((f"pytest_plugins[{i}]", f"expected a module name, got {plugin!r}"))
    return out


@dataclass(frozen=True)
class Runtime:
    """Everything a task's environment applies at run time (resolved; identical for sandbox and grader)."""

    env: tuple[tuple[str, str], ...] = ()
    python_path: tuple[str, ...] = ()
    """Absolute entries, in order."""
    install: str | None = None
    pytest_plugins: tuple[str, ...] = ()
    command: TestCommand = field(default_factory=TestCommand)

    def sandbox_env(self) -> dict[str, str]:
        """Variables of the agent's sandbox and of the grader's test run."""
        env = dict(self.env)
        if self.python_path:
            env["PYTHONPATH"] = ":".join(self.python_path)
        return env

    def grader_config(self) -> dict:
        """What ``run_tests.py`` needs to run pytest as this environment declares."""
        path = ([WORKSPACE] if self.command.module else []) + list(self.python_path)
        return {"python_path": path, "plugins": list(self.pytest_plugins), "args": list(self.command.args),
                "user_site": self.install is not None}

    def describe(self) -> dict:
        return {"env": dict(self.env), "python_path": list(self.python_path), "install": self.install,
                "pytest_plugins": list(self.pytest_plugins), "interpreter": self.command.interpreter,
                "module": self.command.module, "args": list(self.command.args)}


def absolute_path(entry: str) -> str:
    return entry if entry.startswith("/") else posixpath.normpath(posixpath.join(WORKSPACE, entry))


def resolve_runtime(layers: list[EnvironmentSettings], command: TestCommand) -> Runtime:
    """Merge the recipe chain's settings (parent first), the task's, and the command's variables."""
    env: dict[str, str] = {}
    path: list[str] = []
    plugins: list[str] = []
    install = None
    for layer in layers:
        env.update(layer.env)
        path += [absolute_path(p) for p in layer.python_path]
        plugins += [p for p in layer.pytest_plugins if p not in plugins]
        install = layer.install if layer.install is not None else install
    for name, value in command.env:
        if name == "PYTHONPATH":
            path += [absolute_path(p) for p in value.split(":") if p]
        else:
            env[name] = value
    deduped = tuple(dict.fromkeys(path))
    return Runtime(tuple(sorted(env.items())), deduped, install, tuple(plugins), command)


def read_settings(folder: Path) -> EnvironmentSettings | None:
    """The recipe folder's ``environment.yaml`` (None when it has none); raises on invalid content."""
    path = folder / "environment.yaml"
    if not path.is_file():
        return None
    parsed, _, problems = parse_model(path, EnvironmentSettings)
    if problems:
        raise ValidationFailed(problems)
    return parsed  # type: ignore[return-value]
