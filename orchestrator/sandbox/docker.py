"""``DockerSandbox``: the ``Sandbox`` contract on a real Docker engine via docker-py.

Every container is created from the pinned image ID (a tag is refused; nothing
is pulled), with: hard CPU (``nano_cpus``) and memory limits, swap equal to
memory, the memory reservation and CPU shares from the reservations, a pids
limit, network mode ``none`` unless asked otherwise, a non-root user,
``cap_drop=ALL``, ``no-new-privileges``, a read-only root filesystem, docker's
init as PID 1, and trialbox labels naming run, trial, attempt and the owning
process. The only writable paths are the workspace (an ext4 loop disk of
``disk_limit_mb``), ``/tmp`` and ``$HOME`` (tmpfs of ``tmp_limit_mb``, counted as
memory) and ``/dev/shm`` (64 MiB tmpfs). The engine's masked paths are kept and
host-wide counts that another container could read are masked too
(``HOST_COUNT_PATHS``); the container is made through the engine's API directly,
since docker-py has no argument for ``MaskedPaths``.

Its commands are ``dockerexec.DockerExec``'s, its files ``dockerfiles.DockerFiles``'.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types
import docker.utils

from ..engine import MANAGED_LABEL, LABEL_PREFIX, docker_errors
from ..errors import ImageNotFound, RuntimeUnavailable, SandboxBroken, SandboxError
from ..log import get_logger
from ..missingimages import says_gone
from ..settings import load_settings
from .dockerexec import DockerExec
from .dockerfiles import DockerFiles, uid_gid
from .base import DEFAULT_USER, Sandbox, SandboxFactory, SandboxHost, SandboxInfo, SandboxSpec
from .disks import LoopDisk, create_disk, destroy_disk
from .machine import MachineDisk, archive_changes, image_layers, mount_machine, unmount_machine
from .hostdisk import DiskArchive, host_archive_possible, loop_backing_file
from .hostuids import UidLease, account_mounts, image_accounts, keep_lease, lease_uid
from .meter import Meter, Usage

GVISOR_THREAD_HEADROOM = 512


def _per_cpu(leaf: str) -> tuple[str, ...]:
    """``/sys/devices/system/cpu/cpuN/<leaf>`` for every CPU of this host (its containers share its kernel)."""
    try:
        cpus = sorted(n for n in os.listdir("/sys/devices/system/cpu") if n[3:].isdigit() and n.startswith("cpu"))
    except OSError:
        cpus = []
    return tuple(f"/sys/devices/system/cpu/{n}/{leaf}" for n in cpus)


ENGINE_MASKED_PATHS = ("/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
                       "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
                       "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap", *_per_cpu("thermal_throttle"))
"""What the engine masks in every container when it is not told otherwise: moby's defaults as of Docker 28.0.2
(``/sys/devices/virtual/powercap`` since 25, ``/proc/interrupts`` and each CPU's ``thermal_throttle`` since 28.0.2, a
security advisory: interrupt counts are a channel between containers). Giving ``MaskedPaths`` replaces the engine's
list, so it is kept whole here, newer entries included on older engines;
``test_the_engines_own_masked_paths_stay_masked`` fails on an engine that masks one more."""
HOST_COUNT_PATHS = ("/proc/sys/fs/aio-nr", "/proc/sys/kernel/pty/nr", "/proc/sys/fs/file-nr", "/proc/sys/fs/inode-nr",
                    "/proc/sys/fs/inode-state", "/proc/sys/fs/dentry-state", "/proc/diskstats", "/proc/partitions",
                    "/sys/block", "/sys/devices/virtual/block", "/sys/class/block", "/sys/dev/block",
                    "/sys/fs/ext4", "/proc/fs/ext4", "/proc/fs/jbd2", "/proc/locks")
"""Host-wide counts that unprivileged code moves by exact amounts of its choosing and every runc container can read:
AIO events, pseudo-terminals, open files, inodes and dentries, and each loop device's name (its backing file names
the other trials' sandboxes), I/O counters and its file system's free blocks and journal (``/sys/fs/ext4``,
``/proc/fs/ext4``, ``/proc/fs/jbd2`` name every mounted workspace disk), and ``/proc/locks``, where every
container's open-file-description locks are listed with the byte ranges their takers chose (data, not only a count).
One container writing them and another reading them is a channel between trials (a grader's code under test sending
the held-out tests' inputs to an agent beside it), so they read as empty files and folders (the engine's masking:
``/dev/null`` and an empty read-only tmpfs). gVisor (``runsc``) has no such files. Masking cannot close the class:
host-wide figures that tools need stay (``/proc/stat``, ``/proc/loadavg``, ``/proc/meminfo`` with its exact
``Committed_AS``, ``/proc/vmstat`` with exact counts of locked and pinned pages), ``/proc/net`` cannot be masked
(the engine's mount over it does not hold), and identifiers drawn from host-wide counters (socket cookies, inode
numbers of pipes and memfds, eventfd ids) reach a container through its own objects. Only ``runsc`` (a run under it
runs its graders under it too: ``GraderLimits.for_environment``), or a machine per trial, closes those (README,
threat model: the thirteenth review)."""
MASKED_PATHS = ENGINE_MASKED_PATHS + HOST_COUNT_PATHS
log = get_logger("sandbox")


def owner_label() -> str:
    """``host:pid:start`` of this process, so gc can tell a live owner from a crashed one."""
    return f"{socket.gethostname()}:{os.getpid()}:{process_start(os.getpid())}"


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot ('' when it does not exist)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


MACHINE_ROOT_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL")
"""What root keeps in a machine-state sandbox (gVisor only): ownership and permission of files, its own
processes' identities and signals."""

MACHINE_INIT = "/.trialbox-init"
"""Where a machine-state sandbox's init (the engine's own ``docker-init``, read-only) is mounted."""

OOM_FLAG_WAIT_S = 3.0
"""How long a sandbox killed by SIGKILL is watched for the engine's out-of-memory flag."""


class DockerSandbox(DockerExec, DockerFiles, Sandbox):
    """A sandbox in a fresh container on a local Docker engine (its commands: ``DockerExec``; its files:
    ``DockerFiles``)."""

    def __init__(self, spec: SandboxSpec, client: docker.DockerClient) -> None:
        if not spec.image_id.startswith("sha256:"):
            raise SandboxError(f"image must be pinned by image ID (sha256:…), got {spec.image_id!r}")
        self.uid_lease: UidLease | None = None
        """This sandbox's own host uid (``hostuids``): taken when the spec names the images' user, whose uid 1000
        then stands only for the name; released on ``remove``."""
        if spec.user == DEFAULT_USER and not spec.machine:  # a machine runs under gVisor, its users its own
            self.uid_lease = lease_uid()
            spec = dataclasses.replace(spec, user=self.uid_lease.user)
        self.spec = spec
        self.client = client
        self.container: Any = None
        self.volume: Any = None
        self.disk: LoopDisk | None = None
        self.machine: MachineDisk | None = None
        self.info: SandboxInfo | None = None
        self.meter = Meter(spec.cpu_reservation, spec.memory_reservation_mb)
        """CPU time and memory-time of every span the container ran (``resources_used``)."""
        self._stream_api = docker.APIClient(timeout=None, version=client.api.api_version,
                                            **docker.utils.kwargs_from_env())

    # ------------------------------------------------------------------ lifecycle
    def labels(self) -> dict[str, str]:
        return {MANAGED_LABEL: "true", f"{LABEL_PREFIX}.owner": owner_label(),
                f"{LABEL_PREFIX}.created": str(int(time.time())), **self.spec.labels}

    def _check_runtime(self) -> None:
        if self.spec.runtime == "runc":
            return
        with docker_errors():
            runtimes = self.client.info().get("Runtimes", {})
        if self.spec.runtime not in runtimes:
            raise RuntimeUnavailable(
                f"runtime {self.spec.runtime!r} is not registered with the Docker engine "
                f"(known: {sorted(runtimes)}); `make setup` registers runsc on Debian")

    def _create_volume(self) -> None:
        s = self.spec
        uid, gid = uid_gid(s.workspace_owner or s.user)
        disk_path = load_settings().disks_dir / f"{s.name}.img"
        disk_path.parent.mkdir(parents=True, exist_ok=True)
        disk_path.with_suffix(".owner").write_text(owner_label())
        seed = Path(s.workspace_seed) if s.workspace_seed else None
        self.disk = create_disk(disk_path, s.disk_limit_mb, uid, gid, seed_tar=seed,
                                golden_dir=load_settings().state_dir / "golden")
        labels = {**self.labels(), f"{LABEL_PREFIX}.disk": str(disk_path)}
        with docker_errors(s.name):
            self.volume = self.client.volumes.create(
                name=f"{s.name}-workspace", driver="local", labels=labels,
                driver_opts={"type": "ext4", "device": self.disk.device, "o": "nosuid,nodev"})

    def _create_machine(self, uid: int) -> list[Any]:
        """The machine-state sandbox's disk, mounted on the host, and an overlay volume per top-level folder of
        the image (``sandbox.machine``); returns their mounts."""
        s = self.spec
        if s.runtime != "runsc":
            raise SandboxError("a machine-state sandbox runs under gVisor (runtime: runsc): its user is the image's "
                               "own (root included), whose files it owns, and under runc that uid would be the "
                               "host's and share the host's per-user counts", container=s.name)
        with docker_errors(s.name):
            layers = image_layers(self.client, s.image_id)
        settings = load_settings()
        disk_path = settings.disks_dir / f"{s.name}.img"
        disk_path.parent.mkdir(parents=True, exist_ok=True)
        disk_path.with_suffix(".owner").write_text(owner_label())
        self.machine = mount_machine(disk_path, settings.state_dir / "machines" / s.name, s.disk_limit_mb, layers,
                                     Path(s.machine_changes) if s.machine_changes else None)
        mounts = []
        labels = {**self.labels(), f"{LABEL_PREFIX}.disk": str(disk_path)}
        for folder in self.machine.folders:
            with docker_errors(s.name):
                volume = self.client.volumes.create(
                    name=f"{s.name}-m-{folder}", driver="local", labels=labels,
                    driver_opts={"type": "overlay", "device": "overlay", "o": self.machine.options(folder)})
            self.machine.volumes.append(volume)
            mounts.append(docker.types.Mount(f"/{folder}", volume.name, type="volume", no_copy=True))
        return mounts

    def archive_machine(self, out: Path) -> list[str]:
        """A stopped machine-state sandbox's changes into the tar ``out`` (``machine.archive_changes``), read on
        the host; returns the engine's mount targets left out."""
        if self.machine is None:
            raise SandboxError("not a machine-state sandbox", container=self.spec.name)
        if self.is_running():
            raise SandboxError("the machine's changes are read once the sandbox has stopped", container=self.spec.name)
        return archive_changes(self.machine, out)

    @contextlib.contextmanager
    def _image_there(self) -> Iterator[None]:
        """The engine's word that this container's image is not there (docker's ``ImageNotFound``, or an error
        saying "No such image"), as ``ImageNotFound`` naming the pinned image ID (``missingimages``)."""
        try:
            yield
        except (ImageNotFound, SandboxError) as exc:
            if not isinstance(exc, ImageNotFound) and not says_gone(exc.message):
                raise
            raise ImageNotFound(f"image {self.spec.image_id} is not on this engine (trialbox never pulls; "
                                f"{exc.message}): run `trialbox images build` or `trialbox images load`",
                                image=self.spec.image_id) from exc

    def create(self) -> None:
        """Everything of ``start`` but starting: the image checked, the workspace disk made and seeded, the
        container created with its limits (a prepared sandbox: nothing runs in it yet). Idempotent."""
        if self.container is not None:
            return
        s = self.spec
        self._check_runtime()
        with self._image_there():
            with docker_errors(s.name):
                self.client.images.get(s.image_id)
        uid, gid = uid_gid(s.user)
        if s.machine:
            workspace_mounts = self._create_machine(uid)
        else:
            self._create_volume()
            # no_copy: the workspace is exactly its seed, never merged with what the image has at that path
            workspace_mounts = [docker.types.Mount(s.workdir, self.volume.name, type="volume", no_copy=True)]
        accounts = self._account_mounts(uid)
        copies = self._copy_mounts()
        tmpfs_opts = f"size={s.tmp_limit_mb}m,uid={uid},gid={gid},mode=0700,nosuid,nodev"
        tmpfs = {} if s.machine else {"/tmp": tmpfs_opts, s.home: tmpfs_opts}
        tmpfs.update({d: tmpfs_opts for d in s.scratch_dirs})
        # root in a machine-state sandbox (gVisor only, see _create_machine): the file capabilities a
        # package manager or a task's set-up uses as root; never MKNOD, NET_*, SYS_*
        cap_add = list(MACHINE_ROOT_CAPS) if s.machine and uid == 0 else None
        command, init, init_mounts = ["sleep", "infinity"], True, []
        if s.machine:
            # the engine's init is mounted at /sbin/docker-init, which in a merged-/usr image leads into the /usr
            # overlay, where gVisor cannot make a mount target: the same init, mounted at the root instead
            host_init = shutil.which("docker-init")
            if host_init is not None:
                command, init = [MACHINE_INIT, "--", "sleep", "infinity"], False
                init_mounts = [docker.types.Mount(MACHINE_INIT, host_init, type="bind", read_only=True)]
        mem = s.memory_limit_mb * 1024 * 1024
        pids, ulimits = s.pids_limit, None
        if s.runtime == "runsc":
            # gVisor's Sentry runs as many host threads, all counted by the engine's
            # pids limit: give them headroom and bound the sandboxed processes with
            # RLIMIT_NPROC, which gVisor enforces inside (its user is alone there).
            pids = s.pids_limit + GVISOR_THREAD_HEADROOM
            ulimits = [docker.types.Ulimit(name="nproc", soft=s.pids_limit, hard=s.pids_limit)]
        api = self.client.api
        host_config = api.create_host_config(
            nano_cpus=int(s.cpu_limit * 1e9), cpu_shares=max(2, int(s.cpu_reservation * 1024)),
            mem_limit=mem, memswap_limit=mem, mem_reservation=s.memory_reservation_mb * 1024 * 1024,
            pids_limit=pids, ulimits=ulimits, network_mode=s.network, runtime=s.runtime,
            cap_drop=["ALL"], cap_add=cap_add, security_opt=["no-new-privileges"], read_only=True, init=init,
            shm_size="64m", tmpfs=tmpfs,
            mounts=[*workspace_mounts, *init_mounts,
                    *(docker.types.Mount(target, source, type="bind", read_only=True)
                      for source, target in (*s.mounts, *copies, *accounts))],
            # PID 1's output goes nowhere: the agent can write to /proc/1/fd/1, and an engine log on
            # the host would bypass the disk limit and fill the disk other trials' workspaces sit on
            log_config=docker.types.LogConfig(type="none"))
        host_config["MaskedPaths"] = list(MASKED_PATHS)  # docker-py has no argument for it; the engine's API has
        with self._image_there(), docker_errors(s.name):  # removed since the check above: the same refusal
            made = api.create_container(
                s.image_id, command=command, name=s.name, labels=self.labels(),
                user=s.init_user or s.user, working_dir=s.workdir, environment={"HOME": s.home, **s.env},
                host_config=host_config, detach=True, stdin_open=False, tty=False)
            self.container = self.client.containers.get(made["Id"])

    def _copies_dir(self) -> Path:
        return load_settings().state_dir / "mounts" / self.spec.name

    def _copy_mounts(self) -> tuple[tuple[str, str], ...]:
        """``spec.copied_mounts``, each copied into a folder of this sandbox's own, open to read (``SandboxSpec``)."""
        if not self.spec.copied_mounts:
            return ()
        out = []
        try:
            self._copies_dir().mkdir(parents=True, exist_ok=True)  # its owner first: gc removes a dead owner's
            staged = self._copies_dir() / f".owner-{os.getpid()}"
            staged.write_text(owner_label())
            os.replace(staged, self._copies_dir() / "owner")  # whole or absent: never an empty owner to misread
            for i, (source, target) in enumerate(self.spec.copied_mounts):
                dest = self._copies_dir() / str(i)
                shutil.rmtree(dest, ignore_errors=True)
                if not os.path.isdir(source):  # one file
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, dest)
                    os.chmod(dest, 0o644)
                    out.append((str(dest), target))
                    continue
                shutil.copytree(source, dest, symlinks=True)
                for root, dirs, files in os.walk(dest):
                    os.chmod(root, 0o755)
                    for name in files:
                        path = os.path.join(root, name)
                        if not os.path.islink(path):
                            os.chmod(path, 0o755 if os.stat(path).st_mode & 0o111 else 0o644)
                out.append((str(dest), target))
        except (OSError, shutil.Error) as exc:
            raise SandboxError(f"a read-only folder could not be copied for the sandbox: {exc}",
                               container=self.spec.name) from exc
        return tuple(out)

    def _account_mounts(self, uid: int) -> tuple[tuple[str, str], ...]:
        """The image's ``/etc/passwd`` and ``/etc/group`` naming the leased uid where they named uid 1000."""
        if self.uid_lease is None:
            return ()
        cache = load_settings().state_dir / "accounts"
        with self._image_there():
            accounts = image_accounts(self.client, self.spec.image_id, cache, self.labels())
        try:
            return account_mounts(accounts, uid, cache)
        except OSError as exc:
            raise SandboxError(f"the sandbox's account files could not be written: {exc}",
                               container=self.spec.name) from exc

    def start(self) -> SandboxInfo:
        s = self.spec
        self.create()  # a no-op for a sandbox prepared ahead
        with self._image_there(), docker_errors(s.name):  # prepared ahead, its image removed since
            self.container.start()
            self.container.reload()
        self.meter.begin(self.container, self.client.api)
        hc = self.container.attrs["HostConfig"]
        keep = ("NanoCpus", "CpuShares", "Memory", "MemorySwap", "MemoryReservation", "PidsLimit",
                "NetworkMode", "Runtime", "ReadonlyRootfs", "CapDrop", "SecurityOpt", "Tmpfs", "ShmSize",
                "Init", "Mounts", "Ulimits", "LogConfig", "MaskedPaths")
        self.info = SandboxInfo(self.container.id, s.name, s.image_id, hc.get("Runtime", ""),
                                {k: hc.get(k) for k in keep})
        log.info("sandbox started", sandbox=s.name, image_id=s.image_id, runtime=self.info.runtime)
        return self.info

    def is_running(self) -> bool:
        if self.container is None:
            return False
        with docker_errors(self.spec.name):
            try:
                self.container.reload()
            except docker.errors.NotFound:
                return False
        return bool(self.container.attrs["State"].get("Running"))

    def resources_used(self) -> Usage:
        return self.meter.end()

    def stop(self, timeout: float = 5) -> None:
        if self.container is None:
            return
        self.meter.end()  # before the stop: the cgroup goes with the container's processes
        with docker_errors(self.spec.name):
            try:
                self.container.stop(timeout=int(timeout))
            except docker.errors.NotFound:
                pass

    def host_archive(self, deadline: float | None = None):
        """See ``Sandbox.host_archive`` (``hostdisk.DiskArchive``): only once the container has stopped, for a
        workspace on its own disk, where this process may mount it."""
        if self.disk is None or not host_archive_possible() or self.is_running():
            return None
        if loop_backing_file(self.disk.device) != str(self.disk.path):
            log.warning("the workspace's loop device is no longer its disk's: not archived on the host",
                        sandbox=self.spec.name, device=self.disk.device)
            return None  # never another trial's disk
        return DiskArchive(self.disk.device, load_settings().state_dir / "views", deadline)

    @property
    def archives_on_host(self) -> bool:
        """Whether ``host_archive`` will be possible once the sandbox has stopped."""
        return self.disk is not None and host_archive_possible()

    def resume(self, timeout: float = 30) -> None:
        """Start a stopped sandbox again for inspection (its command only, ``sleep``: no process of the
        agent survived the stop, nothing of the workspace runs on start; ``/tmp`` and ``$HOME`` are fresh)."""
        container = self._require()
        with self._image_there(), docker_errors(self.spec.name):  # stopped, its image removed since
            container.start()
        t0 = time.monotonic()
        while not self.is_running():
            if time.monotonic() - t0 > timeout:
                raise SandboxError("the stopped sandbox could not be started again for its listing",
                                   container=self.spec.name)
            time.sleep(0.1)
        self.meter.begin(container, self.client.api)  # its listing is part of what the trial used

    def remove(self) -> None:
        name = self.spec.name
        self.meter.end()
        gone = self.container is None  # the uid is given back only once no container of it can run
        try:
            if self.container is not None:
                with docker_errors(name):
                    try:
                        self.container.remove(force=True, v=True)
                    except docker.errors.NotFound:
                        pass
                gone = True
            for volume in ([self.volume] if self.volume is not None else []) + \
                    (self.machine.volumes if self.machine is not None else []):
                with docker_errors(name):
                    try:
                        volume.remove(force=True)
                    except docker.errors.NotFound:
                        pass
        finally:
            if self.machine is not None:
                unmount_machine(self.machine)
                self.machine.disk.path.with_suffix(".owner").unlink(missing_ok=True)
            if self.disk is not None:
                destroy_disk(self.disk.path)
                self.disk.path.with_suffix(".owner").unlink(missing_ok=True)
            if self.spec.copied_mounts and gone:
                shutil.rmtree(self._copies_dir(), ignore_errors=True)
            self._stream_api.close()
            if self.uid_lease is not None and gone:
                self.uid_lease.release()
            elif self.uid_lease is not None:  # the engine did not remove it: it may still run as that uid
                keep_lease(self.uid_lease)
                log.warning("the container could not be removed: its uid stays leased until this process ends",
                            sandbox=name, uid=self.uid_lease.uid)
        log.debug("sandbox removed", sandbox=name)

    # ------------------------------------------------------------------ exec
    def _require(self) -> Any:
        if self.container is None:
            raise SandboxError("sandbox not started", container=self.spec.name)
        return self.container

    def _broken(self, oom: bool = False) -> SandboxBroken:
        """The error for a sandbox whose init died, telling an OOM kill apart."""
        self.is_running()  # refresh the state
        state = self.container.attrs.get("State", {}) if self.container is not None else {}
        deadline = time.monotonic() + OOM_FLAG_WAIT_S
        # killed (SIGKILL) without the flag: the engine's OOM event can land after its exit event on a busy host
        while not (oom or state.get("OOMKilled")) and state.get("ExitCode") == 137 and time.monotonic() < deadline:
            time.sleep(0.1)
            self.is_running()
            state = self.container.attrs.get("State", {}) if self.container is not None else {}
        if oom or state.get("OOMKilled"):
            return SandboxBroken("the sandbox died: out of memory", container=self.spec.name, reason="oom")
        return SandboxBroken(f"the sandbox died (exit code {state.get('ExitCode')})", container=self.spec.name)

    def _tracks_oom(self) -> bool:
        return self.info is not None

    def conditions(self) -> dict[str, int | None]:
        """CPU throttling and peak memory from the container's cgroup on this host (None: unknown)."""
        cid = self.container.id if self.container is not None else ""
        out: dict[str, int | None] = {"cpu_throttled_periods": None, "cpu_throttled_ns": None, "memory_peak_bytes": None}
        try:
            stat = dict(line.split() for line in open(f"/sys/fs/cgroup/cpu/docker/{cid}/cpu.stat"))
            out["cpu_throttled_periods"], out["cpu_throttled_ns"] = int(stat["nr_throttled"]), int(stat["throttled_time"])
        except (OSError, KeyError, ValueError):
            pass
        try:
            out["memory_peak_bytes"] = int(open(f"/sys/fs/cgroup/memory/docker/{cid}/memory.max_usage_in_bytes").read())
        except (OSError, ValueError):
            pass
        return out

    def _host_cgroup_oom(self) -> int | None:
        """The OOM-kill counter from the container's memory cgroup on this host (local engine)."""
        if self.container is None:
            return None
        cid = self.container.id
        for path in (f"/sys/fs/cgroup/memory/docker/{cid}/memory.oom_control",
                     f"/sys/fs/cgroup/docker/{cid}/memory.events",
                     f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/memory.events"):
            try:
                with open(path) as fh:
                    for line in fh:
                        key, _, value = line.partition(" ")
                        if key == "oom_kill":
                            return int(value)
            except (OSError, ValueError):
                continue
        return None

    def oom_kill_count(self) -> int | None:
        host = self._host_cgroup_oom()
        if host is not None:
            return host
        script = ("cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null "
                  "|| cat /sys/fs/cgroup/memory.events 2>/dev/null")
        try:
            res = self._require().exec_run(["/bin/sh", "-c", script], user="0",
                                           environment={"PATH": "/usr/bin:/bin"})
        except docker.errors.APIError:
            return None
        for line in res.output.decode(errors="replace").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return None

    def network_counters(self) -> dict[str, int] | None:
        try:  # as root, by absolute paths on a read-only root filesystem: the kernel's /proc, not the agent's
            res = self._require().exec_run(["/bin/cat", "/proc/net/snmp", "/proc/net/snmp6"], user="0",
                                           environment={"PATH": "/usr/bin:/bin"})
        except Exception:  # noqa: BLE001 - an engine that cannot answer: cannot tell
            return None
        return parse_network_counters(res.output.decode(errors="replace"))


def parse_network_counters(text: str) -> dict[str, int] | None:
    """``/proc/net/snmp`` (its ``Ip:`` header and value lines) and ``/proc/net/snmp6`` (``name value`` lines) to
    the no-route counts; None when the IPv4 count is not there (IPv6 may be disabled: then only IPv4)."""
    counts: dict[str, int] = {}
    ip_lines = [line.split()[1:] for line in text.splitlines() if line.startswith("Ip: ")]
    if len(ip_lines) >= 2 and "OutNoRoutes" in ip_lines[0] and len(ip_lines[1]) == len(ip_lines[0]):
        value = ip_lines[1][ip_lines[0].index("OutNoRoutes")]
        if value.isdigit():
            counts["ipv4_out_no_routes"] = int(value)
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == "Ip6OutNoRoutes" and value.strip().isdigit():
            counts["ipv6_out_no_routes"] = int(value.strip())
    return counts if "ipv4_out_no_routes" in counts else None


def docker_sandboxes(client: docker.DockerClient) -> SandboxFactory:
    """The factory of sandboxes on ``client``'s engine, for code that must not know which engine it is."""
    return lambda spec: DockerSandbox(spec, client)


def docker_host(client: docker.DockerClient, node: dict[str, Any] | None = None) -> SandboxHost:
    """The trial's view of ``client``'s engine: its sandboxes, this machine (``node`` when the caller already
    described it) and the engine's ping."""
    from ..nodes import node_info

    return SandboxHost(docker_sandboxes(client), node or node_info(client), client.ping)
