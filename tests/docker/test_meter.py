"""What a container used, measured on the real engine: CPU time and memory-time from its cgroup, and the engine's
statistics where the cgroup cannot be read. CPU work is counted in the process's own CPU time, so a busy host
stretches the wall time but not what is asserted."""

from __future__ import annotations

from types import SimpleNamespace

from orchestrator.sandbox.meter import Meter, engine_reading

BURN = ("import time\n"
        "held = b'x' * (96 << 20)\n"           # 96 MiB in use for the whole burn
        "while time.process_time() < {cpu}:\n"
        "    pass\n"
        "print(len(held))\n")


def test_cpu_and_memory_time_come_from_the_cgroup(make_sandbox, runtime):
    sb = make_sandbox(runtime=runtime)
    res = sb.exec(["python3", "-c", BURN.format(cpu=2.0)], timeout=120)
    assert res.exit_code == 0, res.stderr
    sb.stop()
    used = sb.resources_used()
    assert used.source == "cgroup" and used.spans == 1 and used.samples >= 2
    # runc: the host counts what the process counted. gVisor: the host counts the sandbox's own kernel (Sentry) and
    # file server too, and the guest's clock is gVisor's accounting, not the host's: only the bound holds as tight
    assert (2.0 if runtime == "runc" else 1.0) <= used.cpu_s <= used.wall_s * 1.0 + 0.5  # at most the 1-CPU limit
    held_s = 2.0                                                    # the burn held 96 MiB for at least its CPU time
    assert used.memory_gib_s >= 0.09 * (held_s - 0.5)               # sampled every 0.25 s: a sample or two may be missed
    assert used.memory_gib_s <= 0.5 * used.wall_s                   # never above the 512 MiB limit
    assert used.reserved_cpu_s == 0.5 * used.wall_s and used.reserved_memory_gib_s == 0.25 * used.wall_s
    assert sb.resources_used() == used                                # a stopped container adds nothing more


def test_a_container_started_again_adds_a_span(make_sandbox):
    sb = make_sandbox()
    sb.exec(["python3", "-c", BURN.format(cpu=0.5)], timeout=120)
    sb.stop()
    first = sb.resources_used()
    sb.resume()
    sb.exec(["python3", "-c", BURN.format(cpu=0.5)], timeout=120)
    sb.stop()
    both = sb.resources_used()
    assert both.spans == 2 and both.cpu_s >= first.cpu_s + 0.5 and both.wall_s > first.wall_s


def test_the_engine_statistics_stand_in_where_no_cgroup_can_be_read(make_sandbox, client):
    sb = make_sandbox()
    reading = engine_reading(client.api, sb.container.id)
    assert reading is not None and reading[0] >= 0 and reading[1] > 0
    meter = Meter(0.5, 256, interval=0.2, engine_interval=0.5)
    elsewhere = SimpleNamespace(id=sb.container.id, attrs={"State": {"Pid": 0}})  # as from another host
    meter.begin(elsewhere, client.api)
    sb.exec(["python3", "-c", BURN.format(cpu=1.0)], timeout=120)
    used = meter.end()
    assert used.source == "engine" and used.cpu_s >= 1.0 and used.memory_gib_s > 0
    assert engine_reading(client.api, "no-such-container") is None
