"""Inside the grader container: one test-file group's pytest session, its results streamed to the host.

Started by the host once per group as ``PYTHON -s -E -B /opt/trialbox-grader/run_tests.py NODE...``
(PYTHON: the interpreter of the task's test command), with the group's configuration in
``$TRIALBOX_GROUP_CONFIG`` (set by the host on this command alone: no file the code under test could rewrite
for a later group). ``-s``/``-E`` ignore the user site and PYTHON* variables, and sys.path[0] is this folder
(read-only, mounted from the host), not the workspace, so a ``sitecustomize.py`` or ``.pth`` file the agent
planted there is never loaded at start-up.

This process runs code under test, so nothing it holds is a secret of the grading: the node ids it is given are
the group's tests with its tripwire among them, in an order drawn by the host, and nothing here or in its
environment says which one the tripwire is (only the host knows). Everything between the groups (killing every
process the group left, checking every trusted file, ownership of those files) is the host's, in commands of its
own: see ``grading.runner``.

The configuration names the repository's own pytest configuration file, copied from the trusted initial commit
(``config``); the Python path entries the task declares (``python_path``, the workspace first for ``python -m
pytest``); the plugins the environment declares (``plugins``); extra options of the test command (``args``); the
whether the trusted install step's user site is added (``user_site``). Every plugin (trialbox's,
pytest-timeout, the declared ones) is imported *before* any workspace folder is on the path, so no file of the
workspace can stand in for one, and handed to pytest as a module; auto-loading by entry point is off.

Output: pytest's own output (and anything the code under test prints) goes to standard error; standard output
carries one JSON document written when the session ended: the plugin's outcomes and collection errors, pytest's
exit code, and the session's JUnit XML report. The host cross-checks them with each other, with the exit code the
engine reports and with pytest's summary line in the log.
"""

import importlib
import json
import os
import site
import sys
import tempfile

os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
JUNIT_BYTES = 4 << 20
"""A larger JUnit report is not sent (the host then notes the channel missing)."""


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


def main():
    cfg = json.loads(os.environ.pop("TRIALBOX_GROUP_CONFIG"))
    nodes = sys.argv[1:]
    results = os.dup(1)  # the host's channel; pytest and the code under test write to standard error
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
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
    junit = os.path.join(tempfile.mkdtemp(), "report.xml")
    args = ["-c", cfg["config"], "--rootdir", "/workspace", *options, "-p", "no:cacheprovider",
            "--continue-on-collection-errors", f"--junitxml={junit}", "-q", "-rA", *cfg.get("args", []), *nodes]
    code = int(pytest.main(args, plugins=plugins))
    try:
        with open(junit, "rb") as fh:
            report = fh.read(JUNIT_BYTES + 1)
        report = report.decode("utf-8", "replace") if len(report) <= JUNIT_BYTES else None
    except OSError:
        report = None
    doc = {**trialbox_grader_plugin.results(), "exit_code": code, "junit": report}
    data = (json.dumps(doc) + "\n").encode()
    while data:
        data = data[os.write(results, data):]
    return code


if __name__ == "__main__":
    sys.exit(main())
