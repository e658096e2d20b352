#!/usr/bin/env python3
"""Rebuild the realistic SWE-bench-style samples from the plain files in src-repos/.

Layout read, per repository ``src-repos/<name>/``:

    base/...                    the repository at the base commit
    <n>/fix/...                 files the fix changes (post-fix content)
    <n>/tests/...               test files the test patch changes or adds
    <n>/deleted.txt             (optional) paths the test patch deletes, one a line
    <n>/issue.md                the problem statement
    <n>/instance.json           version, created_at, FAIL_TO_PASS, PASS_TO_PASS

Written next to this script:

    repos/samples/<name>.bundle   git bundle of the repository (every branch)
    instances.jsonl               one SWE-bench instance per line
    instances.json                the same instances as one JSON array

For each repository a git repository is made in a temporary folder: ``main``
holds the base commit; each instance gets two branches off it,
``instances/<n>/tests`` (base + test changes) and ``instances/<n>/fix``
(base + source fix). ``test_patch`` and ``patch`` are ``git diff`` from the
base to those commits. Author, committer and dates are fixed (one minute per
commit from 2024-01-01T00:00:00+0000), and git ignores the user's and system's
configuration, so commit ids, and hence both instance files, are the same on
every run.

Only the standard library and the git command line are used.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "src-repos"
OWNER = "samples"
NAME = "trialbox samples"
EMAIL = "samples@trialbox.invalid"
START = datetime(2024, 1, 1, tzinfo=timezone.utc)
SKIP = {"__pycache__", ".pytest_cache", ".mypy_cache", ".venv", "build", "dist"}
KEYS = ("version", "created_at", "FAIL_TO_PASS", "PASS_TO_PASS")


class Repo:
    """A scratch git repository with pinned identity, dates and configuration."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.commits = 0
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        self.env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
                        GIT_AUTHOR_NAME=NAME, GIT_AUTHOR_EMAIL=EMAIL,
                        GIT_COMMITTER_NAME=NAME, GIT_COMMITTER_EMAIL=EMAIL,
                        LC_ALL="C", TZ="UTC")

    def git(self, *args: str) -> str:
        proc = subprocess.run(["git", "-c", "core.autocrlf=false", "-c", "core.fileMode=true",
                               "-c", "init.defaultBranch=main", *args],
                              cwd=self.path, env=self.env, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"git {' '.join(args)} failed in {self.path}:\n{proc.stderr}")
        return proc.stdout

    def commit(self, message: str) -> str:
        """Commit everything in the work tree; the date moves on a minute per commit."""
        stamp = (START + timedelta(minutes=self.commits)).strftime("%Y-%m-%dT%H:%M:%S+0000")
        self.commits += 1
        self.env.update(GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
        self.git("add", "--all")
        self.git("commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", message)
        return self.git("rev-parse", "HEAD").strip()

    def diff(self, old: str, new: str) -> str:
        return self.git("diff", "--no-color", "--no-ext-diff", "--no-renames", "--no-textconv", old, new)


def files_under(root: Path) -> list[Path]:
    """Files below ``root`` (relative, sorted), leaving out caches and build output."""
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in SKIP or part.endswith(".egg-info") for part in rel.parts):
            continue
        if path.is_file() and path.suffix != ".pyc":
            out.append(rel)
    return out


def overlay(src: Path, work: Path) -> list[str]:
    """Copy the files of ``src`` over the work tree; their paths, as posix strings."""
    written = []
    for rel in files_under(src):
        dest = work / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes((src / rel).read_bytes())
        written.append(rel.as_posix())
    return written


def clean(work: Path) -> None:
    """Empty the work tree (keeping .git) before checking out another branch."""
    for child in work.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() else child.unlink()


def instance_dirs(repo_src: Path) -> list[Path]:
    return sorted((p for p in repo_src.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))


def build_repo(name: str, scratch: Path, bundles: Path) -> list[dict]:
    """Make one repository, write its bundle, and return its instances."""
    repo_src = SRC / name
    work = scratch / name
    work.mkdir()
    repo = Repo(work)
    repo.git("init", "--quiet", "--initial-branch=main")
    overlay(repo_src / "base", work)
    base = repo.commit(f"{name}: state before the sample issues")
    instances = []
    for inst_dir in instance_dirs(repo_src):
        n = inst_dir.name
        iid = f"{OWNER}__{name}-{n}"
        meta = json.loads((inst_dir / "instance.json").read_text())
        missing = [k for k in KEYS if k not in meta]
        if missing:
            sys.exit(f"{inst_dir / 'instance.json'}: missing {missing}")

        repo.git("checkout", "--quiet", "-b", f"instances/{n}/tests", base)
        changed = overlay(inst_dir / "tests", work)
        deleted_txt = inst_dir / "deleted.txt"
        deleted = [line.strip() for line in deleted_txt.read_text().splitlines()
                   if line.strip()] if deleted_txt.is_file() else []
        for rel in deleted:
            if not (work / rel).is_file():
                sys.exit(f"{deleted_txt}: {rel} is not in the base of {name}")
            (work / rel).unlink()
        if not all(p.startswith("tests/") for p in changed + deleted):
            sys.exit(f"{inst_dir / 'tests'}: the test patch may only touch tests/")
        tests_commit = repo.commit(f"Tests for {iid}")

        repo.git("checkout", "--quiet", base)
        clean(work)
        repo.git("checkout", "--quiet", "--force", "-b", f"instances/{n}/fix", base)
        fixed = overlay(inst_dir / "fix", work)
        if not fixed or any(p.startswith("tests/") for p in fixed):
            sys.exit(f"{inst_dir / 'fix'}: the fix must change source files only")
        fix_commit = repo.commit(f"Fix {iid}")

        test_patch, patch = repo.diff(base, tests_commit), repo.diff(base, fix_commit)
        if not test_patch or not patch:
            sys.exit(f"{iid}: empty {'test_patch' if not test_patch else 'patch'}")
        instances.append({
            "instance_id": iid,
            "repo": f"{OWNER}/{name}",
            "base_commit": base,
            "problem_statement": (inst_dir / "issue.md").read_text().rstrip() + "\n",
            "patch": patch,
            "test_patch": test_patch,
            "FAIL_TO_PASS": json.dumps(meta["FAIL_TO_PASS"]),
            "PASS_TO_PASS": json.dumps(meta["PASS_TO_PASS"]),
            "version": meta["version"],
            "created_at": meta["created_at"],
            "hints_text": "",
            "environment_setup_commit": base,
        })
        repo.git("checkout", "--quiet", base)
        clean(work)
        repo.git("checkout", "--quiet", "--force", "main")

    bundle = bundles / f"{name}.bundle"
    bundle.unlink(missing_ok=True)
    repo.git("-c", "pack.threads=1", "bundle", "create", "--quiet", str(bundle), "--all")
    return instances


def main() -> None:
    names = sorted(p.name for p in SRC.iterdir() if (p / "base").is_dir())
    bundles = HERE / "repos" / OWNER
    bundles.mkdir(parents=True, exist_ok=True)
    instances: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="trialbox-samples-") as tmp:
        for name in names:
            instances += build_repo(name, Path(tmp), bundles)
    (HERE / "instances.jsonl").write_text("".join(json.dumps(i) + "\n" for i in instances))
    (HERE / "instances.json").write_text(json.dumps(instances, indent=2) + "\n")
    for inst in instances:
        print(f"{inst['instance_id']}  base {inst['base_commit'][:12]}")
    print(f"{len(instances)} instances from {len(names)} repositories")


if __name__ == "__main__":
    main()
