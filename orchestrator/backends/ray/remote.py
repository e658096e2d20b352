"""What runs on the nodes, as Ray tasks: the probe of a node, one trial on its own engine, the clean-up."""

from __future__ import annotations

import dataclasses
import os
import shutil
import traceback
import uuid
from typing import Any

from ...engine import connect
from ...errors import TrialboxError
from ...grading.runner import GraderLimits
from ...manifest import LoadedManifest
from ...nodes import node_info
from ...settings import load_settings
from ...store import RunPaths
from ...trial import TrialSpec, run_trial
from .bundle import pack_folder, rebase, rebase_task, unpack_bundle
from .common import MODEL_ENV, node_id, ray


def node_problems(client, image_ids: dict[str, str], harness: dict[str, str]) -> list[str]:
    """What keeps this machine from running a run's trials: another trialbox, or a pinned image missing."""
    from ...lock import harness_identity

    problems: list[str] = []
    mine = harness_identity()
    if mine != harness:
        problems.append(f"trialbox {mine['version']}+{mine['commit']} differs from the lock's "
                        f"{harness['version']}+{harness['commit']}: install the same trialbox on every node")
    for name, image_id in sorted(image_ids.items()):
        try:
            found = client.images.get(image_id).id
        except Exception:  # noqa: BLE001 - not found or unreadable: either way not the pinned image
            found = None
        if found != image_id:
            problems.append(f"image {name} {image_id} is not on this node's engine (`trialbox images save` where "
                            "it was built, `trialbox images load` here; never a rebuilt look-alike)")
    return problems


@ray.remote
def probe_node(image_ids: dict[str, str], harness: dict[str, str]) -> dict[str, Any]:
    """This node's description, and what keeps it from running the run's trials (empty when nothing)."""
    from ...nodes import node_name
    from ...sandbox.gc import collect_garbage

    try:
        client = connect(timeout=30)
    except TrialboxError as exc:
        return {"info": {"name": node_name(), "id": node_id()}, "problems": [str(exc)]}
    try:
        info = node_info(client, node_id())
        problems = node_problems(client, image_ids, harness)
        collect_garbage(client, load_settings())  # leftovers of trials whose process died on this node
    finally:
        client.close()
    return {"info": info, "problems": problems}


@ray.remote
def node_trial(spec: TrialSpec, loaded: LoadedManifest, bundle_sha: str, bundle: list, judge,
               model_env: dict[str, str]) -> dict[str, Any]:
    """Run one trial on this node's engine; returns its ``TrialResult`` (``result``) and its folder as a tar."""
    root = unpack_bundle(bundle_sha, bundle)
    here = LoadedManifest(path=rebase(loaded.path, root), manifest=loaded.manifest)
    spec = dataclasses.replace(spec, task=rebase_task(spec.task, root))
    from ...sandbox.docker import docker_host, owner_label

    work = load_settings().state_dir / "ray" / "trials" / uuid.uuid4().hex
    work.mkdir(parents=True)
    (work / "owner").write_text(owner_label())  # a worker killed mid-trial leaves this folder: clean_node removes it
    # exactly the driver's model endpoint and key: a node's own values never stand in for them
    env = {**{k: v for k, v in os.environ.items() if k not in MODEL_ENV}, **model_env}
    paths = RunPaths(work)
    folder = paths.trial(spec.trial_id, spec.attempt)
    client = connect()
    try:
        result = run_trial(spec, here, docker_host(client, node_info(client, node_id())), paths,
                           GraderLimits.for_environment(spec.environment), judge, None, env)
        return {"result": result, "artifacts": pack_folder(folder)}
    except Exception as exc:  # noqa: BLE001 - the driver records it; the events written so far come back with it
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:],
                "artifacts": pack_folder(folder) if folder.is_dir() else b""}
    finally:
        client.close()
        shutil.rmtree(work, ignore_errors=True)


@ray.remote
def ping() -> str:
    """This node's Ray id: a node that answers it is alive and can still run work."""
    return node_id()


@ray.remote
def clean_node(run_key: str | None) -> list[str]:
    """Remove the run's containers on this node (with ``run_key``), then every leftover whose owner
    process died (containers, volumes, disks, and the work folders of killed workers)."""
    from ..base import remove_run_containers
    from ...sandbox.gc import collect_garbage, owner_alive

    client = connect(timeout=30)
    try:
        removed = remove_run_containers(client, run_key) if run_key else []
        gc = collect_garbage(client, load_settings())
    finally:
        client.close()
    for work in (load_settings().state_dir / "ray" / "trials").glob("*"):
        owner = work / "owner"
        if not owner.exists() or not owner_alive(owner.read_text().strip()):
            shutil.rmtree(work, ignore_errors=True)
    return removed + [c for c in gc.containers if c not in removed]
