"""Inside the grader container: run the named tests with trialbox's safeguards.

Started as ``PYTHON -s -E -B /opt/trialbox-grader/run_tests.py OUT NODE...``
(PYTHON: the interpreter of the task's test command): ``-s``/``-E`` ignore the
user site and PYTHON* variables, and sys.path[0] is this folder (read-only,
mounted from the host), not the workspace, so a ``sitecustomize.py`` or
``.pth`` file the agent planted there is never loaded at start-up.

This process is the *parent*: it never imports anything of the workspace.
It reads its configuration (``$TRIALBOX_GRADER_CONFIG``, written by the host)
once, and runs each test file's group in a *child* process of its own (the
same interpreter and flags), with the group's tripwire test in the same
session, so code under test imported in one group can neither outlive it
nor see another group run. Before each child and after the last, the trusted
configuration copy is compared with the bytes it had at the start and put
back if changed; each child's result files are read as soon as it exits and
written back at the end, so a later group cannot rewrite an earlier group's
results. What was changed is reported (``tampering``).

A child: the configuration names the repository's own pytest configuration
file, copied from the trusted initial commit (``config``); the Python path
entries the task declares (``python_path``, the workspace first for ``python
-m pytest``); the plugins the environment declares (``plugins``); extra
options of the test command (``args``); whether the trusted install step's
user site is added (``user_site``). Every plugin (trialbox's, pytest-timeout,
the declared ones) is imported *before* any workspace folder is on the path,
so no file of the workspace can stand in for one, and handed to pytest as a
module; auto-loading by entry point is off. Results go to OUT, outside the
workspace, twice: JUnit XML and this folder's plugin, cross-checked on the
host with the exit codes.
"""

import importlib
import json
import os
import site
import subprocess
import sys

os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def groups(nodes):
    """Node ids grouped by test file, in a stable order: one pytest session per file, so a
    module that fails to import cannot keep the other files' tests from running."""
    by_file = {}
    for node in nodes:
        by_file.setdefault(node.split("::", 1)[0], []).append(node)
    return [by_file[f] for f in sorted(by_file)]


def load_plugins(names):
    """Import every plugin while only the image's folders are on the path; exit 4 naming one that is missing.

    They are handed to pytest as module objects (``pytest.main(plugins=…)``), not as ``-p`` names: pytest
    would warn that an imported module cannot be rewritten, an error under ``filterwarnings = error``."""
    loaded = []
    for name in names:
        try:
            loaded.append(importlib.import_module(name))
        except Exception as exc:  # noqa: BLE001 - reported as the run's usage error
            print(f"ERROR: the declared pytest plugin {name!r} cannot be imported in this environment: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)
            sys.exit(4)
    return loaded


def child(out, index, nodes, cfg):
    """One group's pytest session (this process may run code under test)."""
    import pytest

    import trialbox_grader_plugin

    plugins = [trialbox_grader_plugin, *load_plugins(cfg.get("plugins", []))]
    options = []
    try:
        import pytest_timeout

        plugins.append(pytest_timeout)
        options.append(f"--timeout={os.environ.get('TRIALBOX_TEST_TIMEOUT', '60')}")
    except ImportError:  # the whole run's timeout still holds
        print("note: pytest-timeout is not in this environment: no per-test timeout", file=sys.stderr)
    if cfg.get("user_site"):
        site.addsitedir(site.getusersitepackages())
    sys.path[0:0] = cfg.get("python_path", [])
    args = ["-c", cfg["config"], "--rootdir", "/workspace", *options, "-p", "no:cacheprovider",
            "--continue-on-collection-errors", f"--junitxml={os.path.join(out, f'junit-{index}.xml')}", "-q", "-rA",
            *cfg.get("args", []), *nodes]
    code = int(pytest.main(args, plugins=plugins))
    trialbox_grader_plugin.write(out, [code], name=f"results-{index}.json")
    return code


def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _merge(out, index, outcomes, collect_errors, tampering):
    data = _read(os.path.join(out, f"results-{index}.json"))
    try:
        res = json.loads(data) if data is not None else {}
        got, errors = res.get("outcomes", {}), res.get("collect_errors", [])
        if not isinstance(got, dict) or not isinstance(errors, list):
            raise ValueError("malformed")
    except (ValueError, AttributeError):
        tampering.append(f"group {index}: malformed results")
        return
    outcomes.update({str(k): str(v) for k, v in got.items()})
    collect_errors.extend(e for e in errors if isinstance(e, dict))


def parent(out, nodes):
    """Run every group in a child process; keep what each produced; write the merged results."""
    raw = _read(os.environ["TRIALBOX_GRADER_CONFIG"]).decode()
    cfg = json.loads(raw)
    trusted = _read(cfg["config"])
    wires = cfg.get("tripwires", [])
    codes, outcomes, collect_errors, tampering, junit = [], {}, [], [], {}

    def config_intact(when):
        if _read(cfg["config"]) != trusted:
            tampering.append(f"the configuration copy was changed {when}")
            with open(cfg["config"], "wb") as fh:
                fh.write(trusted)

    for i, group in enumerate(groups(nodes)):
        config_intact(f"before group {i}")
        env = {**os.environ, "TRIALBOX_GROUP": str(i), "TRIALBOX_GROUP_CONFIG": raw}
        wire = [wires[i]] if i < len(wires) else []
        proc = subprocess.run([sys.executable, "-s", "-E", "-B", os.path.abspath(__file__), out, *group, *wire], env=env)
        codes.append(proc.returncode)
        _merge(out, i, outcomes, collect_errors, tampering)
        junit[i] = _read(os.path.join(out, f"junit-{i}.xml"))
    config_intact("after the last group")
    for i, data in junit.items():  # a later group's code cannot stand for an earlier group's report
        path = os.path.join(out, f"junit-{i}.xml")
        if data is None:
            if os.path.exists(path):
                os.remove(path)
        else:
            with open(path, "wb") as fh:
                fh.write(data)
    with open(os.path.join(out, "results.json"), "w") as fh:
        json.dump({"outcomes": outcomes, "collect_errors": collect_errors, "exit_codes": codes,
                   "tampering": tampering}, fh)
    if all(c == 0 for c in codes):
        return 0
    return 1 if all(c in (0, 1) for c in codes) else next(c for c in codes if c not in (0, 1))


def main():
    out, nodes = sys.argv[1], sys.argv[2:]
    if "TRIALBOX_GROUP" in os.environ:
        return child(out, int(os.environ["TRIALBOX_GROUP"]), nodes, json.loads(os.environ["TRIALBOX_GROUP_CONFIG"]))
    return parent(out, nodes)


if __name__ == "__main__":
    sys.exit(main())
