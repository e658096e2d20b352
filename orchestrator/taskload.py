"""Loading the task set: every selected task folder with its held-out grader folder, checked together.

``load_tasks`` returns every task the manifest selects (``tasks.include``, in sorted order) with its grader and its
environment resolved (its image recipe and its run-time settings), or raises ``ValidationFailed`` listing every
problem in every folder at once: a field of the wrong type, a pinned commit absent from the source repository, a
held-out file missing, scope paths or test ids that do not fit the task.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from pathlib import Path

from .environments import WORKSPACE, EnvironmentSettings, Runtime, check_settings, parse_test_command, resolve_runtime
from .errors import ConfigError, Problem, ValidationFailed
from .images import Recipe, load_recipe, recipe_chain
from .manifest import LoadedManifest, Model
from .loading import parse_model
from .tasks import GraderConfig, Task, TaskConfig, git_commit_exists


def _parse(path: Path, model: type[Model]) -> tuple[Model | None, list[Problem]]:
    parsed, _, problems = parse_model(path, model)
    return parsed, problems


def check_task_folder(c: TaskConfig, g: GraderConfig, folder: Path, grader_folder: Path) -> list[Problem]:
    """Problems in one task and its grader beyond the field types."""
    tf, gf = str(folder / "task.yaml"), str(grader_folder / "grader.yaml")
    out: list[Problem] = []
    if c.id != folder.name:
        out.append(Problem(tf, "id", f"expected the folder name {folder.name!r}, got {c.id!r}"))
    if not (folder / c.instruction).is_file():
        out.append(Problem(tf, "instruction", f"file not found: {folder / c.instruction}"))
    r = c.repo
    src = Path(r.dir if r.dir is not None else r.git)  # type: ignore[arg-type]
    src = src if src.is_absolute() else folder / src
    if c.repo.dir is not None and not src.is_dir():
        out.append(Problem(tf, "repo.dir", f"folder not found: {src}"))
    if c.repo.git is not None:
        if not src.exists():
            out.append(Problem(tf, "repo.git", f"repository not found: {src}"))
        elif not git_commit_exists(src, c.repo.commit or ""):
            out.append(Problem(tf, "repo.commit", f"commit {c.repo.commit} not found in {src}"))
    for i, rx in enumerate(c.constraints.forbidden_commands):
        try:
            re.compile(rx)
        except re.error as exc:
            out.append(Problem(tf, f"constraints.forbidden_commands[{i}]", f"not a valid regular expression: {exc}"))
    for i, pair in enumerate(c.constraints.order):
        if len(pair) != 2:
            out.append(Problem(tf, f"constraints.order[{i}]", f"expected a pair [a, b], got {pair!r}"))
    if g.kind == "pytest" and not g.fail_to_pass and not c.abstain_expected:
        out.append(Problem(gf, "fail_to_pass", "expected at least one test id (only tasks with abstain_expected may have none)"))
    out += _placement_problems(c, g, tf, gf, grader_folder)
    for fld, message in check_settings(c.env, c.python_path, c.pytest_plugins):
        out.append(Problem(tf, fld, message))
    for field in ("tests", "test_patch", "solution", "rubric"):
        p = getattr(g, field)
        if p is not None and not (grader_folder / p).exists():
            out.append(Problem(gf, field, f"not found: {grader_folder / p}"))
    return out


# Paths a workspace or a grader folder must not be mounted on or under: the system, trialbox's own mounts
# (``$HOME`` moves out of a workspace at /home/agent: ``sandbox.base.home_for``).
SYSTEM_PATHS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
                "/sys", "/tmp", "/usr", "/var", "/trialbox-home", "/opt/trialbox-grader", "/trialbox")


def _clash(a: str, b: str) -> bool:
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _placement_problems(c: TaskConfig, g: GraderConfig, tf: str, gf: str, grader_folder: Path) -> list[Problem]:
    """The workspace and the script grader's folders: absolute, normal, apart from each other and the system."""
    out = []
    places = [(tf, "workdir", c.workdir)]
    if g.kind == "script":
        places += [(gf, "tests_mount", g.tests_mount), (gf, "reward_dir", g.reward_dir)]
        if g.solution_is_script:
            places.append((gf, "solution_mount", g.solution_mount))
    for i, (file, fld, path) in enumerate(places):
        if posixpath.normpath(path) != path or path == "/":
            out.append(Problem(file, fld, f"expected a normalised absolute folder other than /, got {path!r}"))
        elif any(_clash(path, sysp) for sysp in SYSTEM_PATHS):
            out.append(Problem(file, fld, f"{path!r} is (or holds, or is inside) a system or trialbox folder "
                                          f"({', '.join(SYSTEM_PATHS)})"))
        else:
            out += [Problem(file, fld, f"{path!r} overlaps {other_fld} ({other!r})")
                    for _, other_fld, other in places[:i] if _clash(path, other)]
    if c.workdir != WORKSPACE and g.kind != "script":
        out.append(Problem(tf, "workdir", f"a workspace at {c.workdir!r} needs a script grader (kind: script): the "
                                          f"pytest grader runs the repository at {WORKSPACE}"))
    if c.workdir != WORKSPACE and c.install is not None:
        out.append(Problem(tf, "install", f"the install step runs at {WORKSPACE}; with workdir {c.workdir!r} put "
                                          "it in the environment's Dockerfile"))
    if g.kind == "script":
        if g.tests is not None and not (grader_folder / g.tests / g.script).is_file():
            out.append(Problem(gf, "script", f"not found: {grader_folder / g.tests / g.script}"))
        if g.solution_is_script and g.solution is not None and not (grader_folder / g.solution / g.solution_script).is_file():
            out.append(Problem(gf, "solution_script", f"not found: {grader_folder / g.solution / g.solution_script}"))
        for fld, message in check_settings({**g.env, **g.solution_env}, [], []):
            out.append(Problem(gf, fld, message))
    return out


def recipe_of(config: TaskConfig, folder: Path, images_dir: Path) -> Recipe:
    """The task's recipe: ``images_dir/<name>``, or a folder of the task's own when ``image`` is a path."""
    ref = config.image
    if "/" in ref:
        path = (folder / ref).resolve()
        if not path.is_relative_to(folder.resolve()):
            raise ConfigError(f"expected a folder inside the task folder, got {ref!r}")
        return load_recipe(f"{config.id}:{ref.strip('/')}", path)
    if not (images_dir / ref).is_dir():
        known = sorted(p.name for p in images_dir.iterdir() if p.is_dir()) if images_dir.is_dir() else []
        raise ConfigError(f"expected an image defined under {images_dir} {known} or a folder of the task's own "
                          f"(./environment), got {ref!r}")
    return load_recipe(ref, images_dir / ref)


def _environment(config: TaskConfig, grader: GraderConfig, folder: Path, images_dir: Path, tf: str, gf: str
                 ) -> tuple[Recipe | None, Runtime | None, list[Problem]]:
    problems: list[Problem] = []
    recipe = runtime = None
    try:
        recipe = recipe_of(config, folder, images_dir)
        chain = recipe_chain(images_dir, recipe)
    except ValidationFailed as exc:
        return None, None, list(exc.problems)
    except ConfigError as exc:
        return None, None, [Problem(tf, "image", exc.message)]
    for r in chain:
        ef = str(r.folder / "environment.yaml")
        problems += [Problem(ef, f, m) for f, m in check_settings(r.settings.env, r.settings.python_path,
                                                                  r.settings.pytest_plugins)]
    command, why = parse_test_command(grader.command)
    if command is None:
        problems.append(Problem(gf, "command", why or ""))
    else:
        own = EnvironmentSettings(env=config.env, python_path=config.python_path, install=config.install,
                                  pytest_plugins=config.pytest_plugins)
        runtime = resolve_runtime([r.settings for r in chain] + [own], command)
    return recipe, runtime, problems


def load_task(folder: Path, graders_dir: Path, images_dir: Path) -> tuple[Task | None, list[Problem]]:
    """Load one task folder and its grader folder, returning every problem found."""
    config, problems = _parse(folder / "task.yaml", TaskConfig)
    gfolder = graders_dir / folder.name
    if not (gfolder / "grader.yaml").is_file():
        problems.append(Problem(str(gfolder / "grader.yaml"), "", f"no grader folder for task {folder.name!r}"))
        grader = None
    else:
        grader, gproblems = _parse(gfolder / "grader.yaml", GraderConfig)
        problems += gproblems
    if config is None or grader is None:
        return None, problems
    recipe, runtime, env_problems = _environment(config, grader, folder.absolute(), images_dir,
                                                 str(folder / "task.yaml"), str(gfolder / "grader.yaml"))
    problems += env_problems + check_task_folder(config, grader, folder.absolute(), gfolder.absolute())
    grader_recipe = None
    if grader.image is not None:
        grader_recipe, image_problems = _grader_recipe(config, grader, gfolder.absolute(), images_dir,
                                                       str(gfolder / "grader.yaml"))
        problems += image_problems
    if recipe is None or runtime is None or problems:
        return None, problems
    return Task(config=config, folder=folder.absolute(), grader=grader, grader_folder=gfolder.absolute(),
                recipe=recipe, runtime=runtime, grader_recipe=grader_recipe), problems


def _grader_recipe(config: TaskConfig, grader: GraderConfig, gfolder: Path, images_dir: Path, gf: str
                   ) -> tuple[Recipe | None, list[Problem]]:
    """The grader's own image recipe (``GraderConfig.image``): a folder of the grader folder, for a script grader."""
    if grader.kind != "script":
        return None, [Problem(gf, "image", "only a script grader may run in an image of its own (a pytest grader "
                                           "installs and runs the repository's tests in the task's environment)")]
    try:
        recipe = load_recipe(f"{config.id}:grader:{grader.image}", gfolder / grader.image)
        recipe_chain(images_dir, recipe)
    except ConfigError as exc:
        return None, [Problem(gf, "image", exc.message)]
    return recipe, []


def select_folders(tasks_dir: Path, patterns: list[str]) -> list[Path]:
    """Task folders (holding task.yaml) whose name matches one of the patterns, sorted."""
    folders = sorted(p for p in tasks_dir.iterdir() if (p / "task.yaml").is_file()) if tasks_dir.is_dir() else []
    return [p for p in folders if any(fnmatch.fnmatchcase(p.name, pat) for pat in patterns)]


def collect_tasks(loaded: LoadedManifest) -> tuple[list[Task], list[Problem]]:
    """Every selected task of the manifest's split, with every problem found on the way."""
    m = loaded.manifest
    tasks_dir, graders_dir = loaded.resolve(m.tasks.path), loaded.resolve(m.tasks.graders)
    images_dir = loaded.resolve(m.tasks.images)
    folders = select_folders(tasks_dir, m.tasks.select)
    problems: list[Problem] = []
    if not folders:
        problems.append(Problem(str(loaded.path), "tasks.select", f"selects no task folder under {tasks_dir}"))
    tasks: list[Task] = []
    for folder in folders:
        task, p = load_task(folder, graders_dir, images_dir)
        problems += p
        if task is not None and task.config.split == m.experiment.task_split:
            tasks.append(task)
    for task in tasks:
        problems += requirement_problems(task, m.environment)
    if folders and not problems and not tasks:
        problems.append(Problem(str(loaded.path), "experiment.task_split",
                                f"no selected task has split {m.experiment.task_split!r}"))
    return tasks, problems


def requirement_problems(task: Task, env) -> list[Problem]:
    """The task's declared requirements the manifest's environment does not meet (one problem each)."""
    req, tf = task.config.requires, str(task.folder / "task.yaml")
    out = []
    for fld, needed, given, name in (("cpus", req.cpus, env.cpu_limit, "environment.cpu_limit"),
                                     ("memory_mb", req.memory_mb, env.memory_limit_mb, "environment.memory_limit_mb"),
                                     ("storage_mb", req.storage_mb, env.disk_limit_mb, "environment.disk_limit_mb")):
        if needed is not None and given < needed:
            out.append(Problem(tf, f"requires.{fld}", f"the task requires {needed:g}; the manifest's {name} gives "
                                                      f"{given:g} (raise it for every task, to keep trials comparable)"))
    if req.network == "none" and env.network_policy not in ("none", "model-api-only"):
        out.append(Problem(tf, "requires.network", f"the task must run without network; the manifest's "
                                                   f"environment.network_policy is {env.network_policy!r}"))
    return out


def load_tasks(loaded: LoadedManifest) -> list[Task]:
    """The selected tasks, or ``ValidationFailed`` listing every problem."""
    tasks, problems = collect_tasks(loaded)
    if problems:
        raise ValidationFailed(problems)
    return tasks


def load_run_manifest(paths, override: str | None = None) -> tuple[LoadedManifest, list[Task]]:
    """The manifest a run used, from where it was (``source.json``: its relative paths resolve there), or
    ``override``, and its tasks (``report``, ``regrade``, ``export``, ``reproduce`` and ``trialbox view``)."""
    import json

    from .loading import load_manifest

    source = json.loads(paths.source.read_text())["manifest"] if paths.source.exists() else paths.manifest
    loaded = load_manifest(Path(override or source))
    return loaded, load_tasks(loaded)
