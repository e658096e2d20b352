"""One sandbox lifecycle: trialbox's DockerSandbox against bare docker-py doing the same steps.

Steps on both sides: create from the pinned image ID with the same limits and
hardening, start, copy the repository in, one exec, export the workspace as a
tar, remove. The bare path mounts an anonymous engine volume at /workspace
(the engine refuses copies into a tmpfs on a read-only root); trialbox
creates and removes a bounded workspace disk (ext4 on a loop device) instead:
that is the price of a workspace that cannot fill the host, and it is inside
the measurement.

Run: .venv/bin/python benchmarks/sandbox_lifecycle.py [pairs]
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from _common import alternate, report

from orchestrator.engine import connect
from orchestrator.images import resolve_image
from orchestrator.loading import load_manifest
from orchestrator.repos import materialize
from orchestrator.sandbox.base import SandboxSpec
from orchestrator.sandbox.docker import DockerSandbox
from orchestrator.settings import load_settings
from orchestrator.taskload import load_tasks

ROOT = Path(__file__).resolve().parent.parent


def main(pairs: int = 20) -> int:
    client = connect()
    image = resolve_image(client, ROOT / "images", "python").image_id
    task = load_tasks(load_manifest(ROOT / "examples" / "script-demo.yaml"))[0]
    repo_tar = materialize(task, load_settings().repos_dir).tar_path.read_bytes()
    limits = dict(cpu_limit=1.0, cpu_reservation=0.5, memory_limit_mb=512, memory_reservation_mb=256,
                  pids_limit=256, disk_limit_mb=256)

    def trialbox(i: int) -> None:
        sb = DockerSandbox(SandboxSpec(image_id=image, name=f"bench-tb-{uuid.uuid4().hex[:8]}", **limits), client)
        try:
            sb.start()
            sb.copy_in(repo_tar, "/workspace")
            assert sb.exec(["true"]).exit_code == 0
            b"".join(sb.copy_out("/workspace"))
        finally:
            sb.remove()

    def bare(i: int) -> None:
        mem = limits["memory_limit_mb"] * 2**20
        c = client.containers.create(
            image, ["sleep", "infinity"], name=f"bench-bare-{uuid.uuid4().hex[:8]}", user="1000:1000",
            working_dir="/workspace", nano_cpus=10**9, cpu_shares=512, mem_limit=mem, memswap_limit=mem,
            mem_reservation=256 * 2**20, pids_limit=256, network_mode="none", cap_drop=["ALL"],
            security_opt=["no-new-privileges"], read_only=True, init=True,
            tmpfs={"/tmp": "size=64m", "/home/agent": "size=64m"},
            volumes=["/workspace"])  # an anonymous, unbounded engine volume
        try:
            c.start()
            c.put_archive("/workspace", repo_tar)
            assert c.exec_run(["true"]).exit_code == 0
            stream, _ = c.get_archive("/workspace")
            b"".join(stream)
        finally:
            c.remove(force=True, v=True)

    ta, tb = alternate(trialbox, bare, pairs)
    return 0 if report("sandbox lifecycle", "trialbox DockerSandbox", ta, "bare docker-py", tb, 1.15) else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
