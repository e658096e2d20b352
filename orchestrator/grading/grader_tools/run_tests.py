"""Inside the grader container: run the named tests with trialbox's safeguards.

Started as ``PYTHON -s -E -B /opt/trialbox-grader/run_tests.py OUT NODE...``
(PYTHON: the interpreter of the task's test command): ``-s``/``-E`` ignore the
user site and PYTHON* variables, and sys.path[0] is this folder (read-only,
mounted from the host), not the workspace, so a ``sitecustomize.py`` or
``.pth`` file the agent planted there is never loaded at start-up.

Its configuration (``$TRIALBOX_GRADER_CONFIG``, written by the host) says:
the repository's own pytest configuration file, copied from the trusted
initial commit (``config``); the Python path entries the task declares
(``python_path``, the workspace first for ``python -m pytest``); the plugins
the environment declares (``plugins``); extra options of the test command
(``args``); whether the trusted install step's user site is added
(``user_site``). Every plugin (trialbox's, pytest-timeout, the declared ones)
is imported *before* any workspace folder is on the path, so no file of the
workspace can stand in for one; auto-loading by entry point is off. Results go
to OUT, outside the workspace, twice: JUnit XML and this folder's plugin,
both cross-checked with the exit code.
"""

import importlib
import json
import os
import site
import sys

os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pytest  # noqa: E402

import trialbox_grader_plugin  # noqa: E402


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


def main() -> int:
    out, nodes = sys.argv[1], sys.argv[2:]
    with open(os.environ["TRIALBOX_GRADER_CONFIG"]) as fh:
        cfg = json.load(fh)
    timeout = os.environ.get("TRIALBOX_TEST_TIMEOUT", "60")
    plugins = [trialbox_grader_plugin, *load_plugins(cfg.get("plugins", []))]
    options = []
    try:
        import pytest_timeout

        plugins.append(pytest_timeout)
        options.append(f"--timeout={timeout}")
    except ImportError:  # the whole run's timeout still holds
        print("note: pytest-timeout is not in this environment: no per-test timeout", file=sys.stderr)
    if cfg.get("user_site"):
        site.addsitedir(site.getusersitepackages())
    sys.path[0:0] = cfg.get("python_path", [])
    codes = []
    for i, group in enumerate(groups(nodes)):
        args = ["-c", cfg["config"], "--rootdir", "/workspace", *options, "-p", "no:cacheprovider",
                "--continue-on-collection-errors", f"--junitxml={os.path.join(out, f'junit-{i}.xml')}", "-q", "-rA",
                *cfg.get("args", []), *group]
        codes.append(int(pytest.main(args, plugins=plugins)))
    trialbox_grader_plugin.write(out, codes)
    if all(c == 0 for c in codes):
        return 0
    return 1 if all(c in (0, 1) for c in codes) else next(c for c in codes if c not in (0, 1))


if __name__ == "__main__":
    sys.exit(main())
