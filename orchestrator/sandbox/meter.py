"""What a container used: its CPU time and its memory-time, from its cgroup.

The cost of a run is more than its model tokens: every sandbox and grader
container holds CPUs and memory while it lives. ``Meter`` measures, for one
container, over each span it runs (start → stop; a container started again is
a new span):

* **CPU time** (``cpu_s``): the cgroup's cumulative CPU counter (user + system,
  every process of the container, from 0 when the container's cgroup is made at
  its start), read every ``interval`` seconds and at the end; the last reading
  counts, so a container that died keeps what it used. Under gVisor it is what
  the host spent on the sandbox (its Sentry and Gofer included), which is what
  is paid for; the guest's own CPU clock is gVisor's accounting and can differ.
* **memory-time** (``memory_gib_s``): the integral over the span of the memory
  in use, in GiB·seconds, each sample held until the next one. "In use" is what
  ``docker stats`` shows: the cgroup's usage without its inactive file cache
  (which the kernel takes back first). Sampled every ``INTERVAL_S`` (a quarter
  of a second), a process that lives less than that can be missed: the error
  is at most a quarter second's worth of its memory.
* **reserved** (``reserved_cpu_s``, ``reserved_memory_gib_s``): the container's
  reservations times its wall time, what admission control held for it
  whatever it used (the basis a team paying for dedicated machines prices).

Where the counters come from: the container's cgroup files on this host,
found through ``/proc/<init pid>/cgroup`` (cgroup v1 or v2, any cgroup driver;
the file must name the container, which proves it is this host's process).
Where they cannot be read (a remote engine, a host whose ``/sys/fs/cgroup`` is
not the engine's), the engine's stats endpoint is sampled instead, every
``ENGINE_INTERVAL_S``; where neither answers, the source is ``unmeasured`` and
the figures are None: the report names them, never counts them as zero
silently.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..log import get_logger

log = get_logger("meter")

INTERVAL_S = 0.25
"""Between cgroup samples: three small file reads each, and a short process's memory is still seen (at 1 s,
three 0.4 s holds of 80 MiB read 2% to 120% of their memory-time; at 0.25 s, 82% to 109%)."""
ENGINE_INTERVAL_S = 5.0
GIB = float(1 << 30)
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Usage:
    """What one or more container spans used."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    """CPU time (user + system) of every process in the container, over the measured spans."""
    memory_gib_s: float = 0.0
    """Memory in use integrated over the wall time of the measured spans, GiB·s."""
    reserved_cpu_s: float = 0.0
    """CPU reservation × wall time."""
    reserved_memory_gib_s: float = 0.0
    """Memory reservation (GiB) × wall time."""
    source: str = "none"
    """``cgroup``, ``engine``, ``unmeasured``, or several joined by ``+``; ``none`` for no span."""
    spans: int = 0
    samples: int = 0
    unmeasured_spans: int = 0
    """Spans neither the cgroup nor the engine answered for: their CPU and memory are not in the figures above
    (the measured spans' still are), and the report names them."""

    def __add__(self, other: "Usage") -> "Usage":
        sources = [s for s in dict.fromkeys(self.source.split("+") + other.source.split("+")) if s != "none"]
        return Usage(self.wall_s + other.wall_s, self.cpu_s + other.cpu_s, self.memory_gib_s + other.memory_gib_s,
                     self.reserved_cpu_s + other.reserved_cpu_s,
                     self.reserved_memory_gib_s + other.reserved_memory_gib_s, "+".join(sources) or "none",
                     self.spans + other.spans, self.samples + other.samples,
                     self.unmeasured_spans + other.unmeasured_spans)

    def to_dict(self) -> dict[str, Any]:
        r = lambda v: round(v, 6)  # noqa: E731
        return {"wall_s": r(self.wall_s), "cpu_s": r(self.cpu_s), "memory_gib_s": r(self.memory_gib_s),
                "reserved_cpu_s": r(self.reserved_cpu_s), "reserved_memory_gib_s": r(self.reserved_memory_gib_s),
                "source": self.source, "spans": self.spans, "samples": self.samples,
                "unmeasured_spans": self.unmeasured_spans}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "Usage":
        """A recorded usage; a figure recorded as null (earlier versions wrote null for a span nothing could
        measure) counts as 0 and its span as unmeasured, as the cost has always counted it."""
        if not d:
            return cls()
        fields = {f.name: f.default for f in dataclasses.fields(cls)}
        values = {k: (fields[k] if v is None else v) for k, v in d.items() if k in fields}
        unknown = any(d.get(k, 0.0) is None for k in ("cpu_s", "memory_gib_s"))
        if unknown and values.get("spans", 0):
            values["unmeasured_spans"] = int(values.get("unmeasured_spans") or 0) + 1
        return cls(**values)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _stat(text: str | None, key: str) -> int | None:
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


@dataclass(frozen=True)
class CgroupFiles:
    """The files one container's counters are read from (v1: cpuacct and memory controllers; v2: one folder)."""

    cpu: Path
    """v1 ``cpuacct.usage`` (ns) or v2 ``cpu.stat`` (``usage_usec``)."""
    memory: Path
    """v1 ``memory.usage_in_bytes`` or v2 ``memory.current``."""
    memory_stat: Path
    v2: bool

    def read(self) -> tuple[float, float] | None:
        """(CPU seconds so far, bytes in use now), or None when the cgroup is gone."""
        cpu_text, mem_text = _read(self.cpu), _read(self.memory)
        if cpu_text is None or mem_text is None or not mem_text.strip().isdigit():
            return None
        if self.v2:
            usec = _stat(cpu_text, "usage_usec")
            if usec is None:
                return None
            cpu = usec / 1e6
        elif cpu_text.strip().isdigit():
            cpu = int(cpu_text) / 1e9
        else:
            return None
        stat = _read(self.memory_stat)
        inactive = _stat(stat, "inactive_file" if self.v2 else "total_inactive_file") or 0
        used = int(mem_text)
        return cpu, float(used - inactive if inactive < used else used)


def cgroup_files(pid: int, container_id: str, root: Path = CGROUP_ROOT, proc: Path = Path("/proc")
                 ) -> CgroupFiles | None:
    """The cgroup files of the container whose init is ``pid`` on this host; None when they cannot be found
    or ``/proc/<pid>/cgroup`` does not name the container (another host's pid, another pid namespace)."""
    try:
        return _cgroup_files(pid, container_id, root, proc)
    except OSError:  # a cgroup folder this process may not read (Path.is_file raises EACCES): not found
        return None


def _cgroup_files(pid: int, container_id: str, root: Path, proc: Path) -> CgroupFiles | None:
    text = _read(proc / str(pid) / "cgroup") if pid > 0 else None
    if not text or not container_id or container_id not in text:
        return None
    cpu = memory = None
    v2_path = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        rel = rel.lstrip("/")
        names = controllers.split(",")
        if controllers == "":
            v2_path = root / rel
        if "cpuacct" in names:
            for mount in ("cpuacct", "cpu,cpuacct", "cpuacct,cpu"):
                if (root / mount / rel / "cpuacct.usage").is_file():
                    cpu = root / mount / rel / "cpuacct.usage"
                    break
        if "memory" in names and (root / "memory" / rel / "memory.usage_in_bytes").is_file():
            memory = root / "memory" / rel
    if cpu is not None and memory is not None:
        return CgroupFiles(cpu, memory / "memory.usage_in_bytes", memory / "memory.stat", v2=False)
    if v2_path is not None and (v2_path / "cpu.stat").is_file() and (v2_path / "memory.current").is_file():
        return CgroupFiles(v2_path / "cpu.stat", v2_path / "memory.current", v2_path / "memory.stat", v2=True)
    return None


def engine_reading(api: Any, container_id: str) -> tuple[float, float] | None:
    """(CPU seconds so far, bytes in use now) from the engine's stats endpoint; None when it does not answer."""
    try:
        stats = api.stats(container_id, stream=False, one_shot=True)
        cpu = stats["cpu_stats"]["cpu_usage"]["total_usage"] / 1e9
        mem = stats["memory_stats"]
        used = float(mem["usage"])
        detail = mem.get("stats") or {}
        inactive = detail.get("total_inactive_file", detail.get("inactive_file", 0)) or 0
        return cpu, used - inactive if inactive < used else used
    except Exception:  # noqa: BLE001 - any failure of a measurement leaves it unmeasured, never fails the trial
        return None


class Meter:
    """Measures one container over its spans (``begin`` after each start, ``end`` before each stop)."""

    def __init__(self, cpu_reservation: float, memory_reservation_mb: int, interval: float = INTERVAL_S,
                 engine_interval: float = ENGINE_INTERVAL_S) -> None:
        self.cpu_reservation, self.memory_reservation_gib = cpu_reservation, memory_reservation_mb / 1024.0
        self.interval, self.engine_interval = interval, engine_interval
        self.total = Usage()
        self._lock = threading.Lock()
        self._span: _Span | None = None

    def begin(self, container: Any, api: Any) -> None:
        """Start a span of ``container`` (started, attributes loaded); a span already open is ended first."""
        self.end()
        try:
            pid = int(((getattr(container, "attrs", None) or {}).get("State") or {}).get("Pid") or 0)
        except (TypeError, ValueError):
            pid = 0
        files = cgroup_files(pid, container.id)
        if files is not None:
            read, source, every = files.read, "cgroup", self.interval
        else:
            read, source, every = (lambda: engine_reading(api, container.id)), "engine", self.engine_interval
        span = _Span(read, source, every)
        if not span.first and source == "cgroup":  # the files vanished at once: ask the engine
            span = _Span(lambda: engine_reading(api, container.id), "engine", self.engine_interval)
        with self._lock:
            self._span = span
        span.thread.start()

    def end(self) -> Usage:
        """End the open span (if any) and return the total so far."""
        with self._lock:
            span, self._span = self._span, None
        if span is not None:
            self.total = self.total + span.close(self.cpu_reservation, self.memory_reservation_gib)
        return self.total


class _Span:
    def __init__(self, read, source: str, every: float) -> None:
        self.read, self.source, self.every = read, source, every
        self.t0 = time.monotonic()
        self.last_cpu: float | None = None
        self.last_mem: float | None = None
        self.last_t = self.t0
        self.memory_bs = 0.0
        self.samples = 0
        self.lock = threading.Lock()
        self._sample()
        self.first = self.last_cpu is not None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="trialbox-meter", daemon=True)

    def _sample(self) -> None:
        try:
            reading = self.read()
        except Exception:  # noqa: BLE001 - a failed measurement leaves the last reading standing, never fails a trial
            reading = None
        now = time.monotonic()
        with self.lock:
            if reading is None:
                return  # gone or silent: the last reading stands; its memory is held until the end
            if self.last_mem is not None:
                self.memory_bs += self.last_mem * (now - self.last_t)
            self.last_cpu, self.last_mem, self.last_t = reading[0], reading[1], now
            self.samples += 1

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            self._sample()

    def close(self, cpu_reservation: float, memory_reservation_gib: float) -> Usage:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(self.every + 5)
        self._sample()
        end = time.monotonic()
        with self.lock:
            wall = end - self.t0
            reserved = (cpu_reservation * wall, memory_reservation_gib * wall)
            if self.last_cpu is None:  # no reading ever came: named, never a silent zero
                return Usage(wall, 0.0, 0.0, *reserved, "unmeasured", 1, 0, 1)
            if self.last_mem is not None:
                self.memory_bs += self.last_mem * (end - self.last_t)
            # the CPU counter starts at 0 with the container's cgroup; memory counts from the first reading
            return Usage(wall, self.last_cpu, self.memory_bs / GIB, *reserved, self.source, 1, self.samples)
