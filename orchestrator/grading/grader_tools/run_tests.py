"""Inside the grader container: run the named tests with trialbox's safeguards.

Started as ``python3 -s -E /opt/trialbox-grader/run_tests.py OUT NODE...``:
``-s``/``-E`` ignore the user site and PYTHON* variables, and sys.path[0] is
this folder (read-only, mounted from the host), not the workspace, so a
``sitecustomize.py`` or ``.pth`` file the agent planted there is never loaded
at start-up. pytest gets trialbox's own configuration file (the repository's
pytest.ini, tox.ini, setup.cfg and pyproject settings are ignored), plugin
auto-loading off (no entry point in the workspace can inject a plugin), and
only the plugins named here. Results go to OUT, outside the workspace, twice:
JUnit XML and this folder's plugin, both cross-checked with the exit code.
"""

import os
import sys

os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pytest  # noqa: E402


def groups(nodes):
    """Node ids grouped by test file, in a stable order: one pytest session per file, so a
    module that fails to import cannot keep the other files' tests from running."""
    by_file = {}
    for node in nodes:
        by_file.setdefault(node.split("::", 1)[0], []).append(node)
    return [by_file[f] for f in sorted(by_file)]


def main() -> int:
    out, nodes = sys.argv[1], sys.argv[2:]
    timeout = os.environ.get("TRIALBOX_TEST_TIMEOUT", "60")
    codes = []
    for i, group in enumerate(groups(nodes)):
        args = ["-c", os.path.join(HERE, "pytest.ini"), "--rootdir", "/workspace", "-p", "trialbox_grader_plugin",
                "-p", "pytest_timeout", f"--timeout={timeout}", "-p", "no:cacheprovider",
                "--continue-on-collection-errors", f"--junitxml={os.path.join(out, f'junit-{i}.xml')}",
                "-q", "-rA", *group]
        codes.append(int(pytest.main(args)))
    import trialbox_grader_plugin

    trialbox_grader_plugin.write(out, codes)
    if all(c == 0 for c in codes):
        return 0
    return 1 if all(c in (0, 1) for c in codes) else next(c for c in codes if c not in (0, 1))


if __name__ == "__main__":
    sys.exit(main())
