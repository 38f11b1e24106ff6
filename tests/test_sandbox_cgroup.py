"""The cgroup memory cap, for real: a sandboxed process that allocates beyond the cap is ended by
the kernel's OOM killer and classified as out of memory; node runs under a cap (RLIMIT_AS kills
it); the cgroup is removed after a normal run, a timeout, and a SIGKILL of its owner; where no
cgroup can be written the run is bounded by time only and says so.

Needs root and a writable memory cgroup (v1 here); under METAEVAL_REQUIRE_BWRAP=1 a machine
without one fails instead of skipping.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from metaeval.sandbox import Workspace, bwrap_available
from metaeval.sandbox import cgroup as cgroup_mod
from metaeval.sandbox import process as process_mod
from metaeval.sandbox.cgroup import MemoryCgroup, memory_parent, sweep_stale

pytestmark = pytest.mark.bwrap
REQUIRED = os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1"
NODE = shutil.which("node") and os.path.realpath(shutil.which("node"))
# touch every page, so the memory is really held (not just reserved)
GRAB_MB = 'x = bytearray({mb} << 20); x[::4096] = b"a" * len(x[::4096]); print("survived")'


@pytest.fixture
def cgroups() -> Path:
    if not bwrap_available():
        pytest.fail("bubblewrap unavailable") if REQUIRED else pytest.skip("no bubblewrap")
    reason = cgroup_mod.unavailable_reason()
    if reason is not None:
        pytest.fail(reason) if REQUIRED else pytest.skip(reason)
    return memory_parent()[0]


def ours(parent: Path) -> set[str]:
    return {p.name for p in parent.iterdir() if p.name.startswith(f"metaeval-{os.getpid()}-")}


def test_allocation_beyond_the_cap_is_oom_killed_and_classified(cgroups, tmp_path):
    before = ours(cgroups)
    ws = Workspace(tmp_path)
    big = ws.exec(
        ["python3", "-c", GRAB_MB.format(mb=400)],
        memory_mb=None,
        memory_cgroup_mb=128,
        timeout_s=60,
    )
    assert big.sandboxed and big.oom_killed, big
    assert big.returncode not in (0, None) and "survived" not in big.stdout
    assert big.memory_note in ("cgroup v1 memory cap 128 MiB", "cgroup v2 memory cap 128 MiB")
    assert "out of memory" in big.describe("python3 grab.py")
    small = ws.exec(
        ["python3", "-c", GRAB_MB.format(mb=32)],
        memory_mb=None,
        memory_cgroup_mb=128,
        timeout_s=60,
    )
    assert small.ok and not small.oom_killed and small.stdout.strip() == "survived"
    assert ours(cgroups) == before  # both cgroups removed


@pytest.mark.skipif(NODE is None, reason="node not installed")
def test_node_runs_under_a_cgroup_cap_where_rlimit_as_kills_it(cgroups, tmp_path):
    ws = Workspace(tmp_path)
    script = "const b = Buffer.alloc(64 << 20, 1); console.log('node ok', b.length)"
    capped = ws.exec([NODE, "-e", script], memory_mb=None, memory_cgroup_mb=512, timeout_s=60)
    assert capped.ok and capped.stdout.strip() == f"node ok {64 << 20}", capped
    assert not capped.oom_killed
    # the same program under an address-space limit of the same size does not start
    limited = ws.exec([NODE, "-e", script], memory_mb=512, timeout_s=60)
    assert not limited.ok
    # and over the cap it is the OOM killer that ends it
    hog = "const a = []; for (;;) a.push(Buffer.alloc(16 << 20, 1));"
    over = ws.exec([NODE, "-e", hog], memory_mb=None, memory_cgroup_mb=256, timeout_s=60)
    assert over.oom_killed and not over.timed_out, over


def test_cgroup_is_removed_after_a_timeout(cgroups, tmp_path):
    before = ours(cgroups)
    ws = Workspace(tmp_path)
    started = time.monotonic()
    slow = ws.exec(["sleep", "30"], memory_mb=None, memory_cgroup_mb=64, timeout_s=1)
    assert slow.timed_out and not slow.oom_killed
    assert time.monotonic() - started < 20
    assert ours(cgroups) == before


def test_cgroups_of_a_killed_owner_are_swept(cgroups, tmp_path):
    """The owner is SIGKILLed while its sandboxed child sleeps in the cgroup: the next metaeval
    process kills what is left and removes the cgroup."""
    marker = tmp_path / "started"
    owner = textwrap.dedent(
        f"""
        from pathlib import Path
        from metaeval.sandbox import Workspace
        ws = Workspace(Path({str(tmp_path)!r}))
        ws.exec("touch started; sleep 60", memory_mb=None, memory_cgroup_mb=64, timeout_s=120)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", owner], cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists()
    left = cgroups / f"metaeval-{proc.pid}-1"
    assert left.is_dir() and (left / "cgroup.procs").read_text().split()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert left.is_dir()  # nothing cleaned up after the kill
    assert left in sweep_stale(cgroups)
    assert not left.exists()


def test_without_a_writable_cgroup_the_run_is_time_bounded_and_says_so(tmp_path, monkeypatch):
    def refuse(limit_mb: int, root: Path = cgroup_mod.CGROUP_ROOT) -> MemoryCgroup:
        raise OSError("memory cgroup /sys/fs/cgroup/memory/x is not writable")

    monkeypatch.setattr(process_mod.MemoryCgroup, "create", refuse)
    result = Workspace(tmp_path).exec(
        ["python3", "-c", "print('ran')"], memory_mb=None, memory_cgroup_mb=128, timeout_s=30
    )
    assert result.ok and result.stdout.strip() == "ran"
    assert result.memory_note == (
        "no memory cgroup (memory cgroup /sys/fs/cgroup/memory/x is not writable); "
        "bounded by time only"
    )


def test_memory_parent_reads_a_v2_hierarchy_with_the_memory_controller(tmp_path, monkeypatch):
    """cgroup v2 cannot be exercised live here (the unified hierarchy has no memory controller
    on this machine): the choice of hierarchy and the files written are checked on a copy of
    the v2 layout, placed by this process's own /proc/self/cgroup."""
    own = Path("/proc/self/cgroup").read_text()
    unified = next((ln.split(":", 2)[2] for ln in own.splitlines() if ln.startswith("0::")), "/")
    group_dir = tmp_path / unified.lstrip("/")
    group_dir.mkdir(parents=True, exist_ok=True)
    with pytest.raises(OSError, match="no memory cgroup controller"):
        memory_parent(tmp_path)  # a v2 hierarchy without the memory controller
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids\n")
    assert memory_parent(tmp_path) == (group_dir, 2)
    (group_dir / "cgroup.subtree_control").write_text("cpu memory\n")
    real_mkdir = Path.mkdir

    def mkdir_with_files(self: Path, *args, **kwargs):  # what the kernel creates in a cgroup
        real_mkdir(self, *args, **kwargs)
        for name in ("memory.max", "memory.swap.max", "cgroup.procs", "memory.events"):
            (self / name).write_text("")

    monkeypatch.setattr(Path, "mkdir", mkdir_with_files)
    group = MemoryCgroup.create(256, tmp_path)
    assert group.version == 2 and group.path.parent == group_dir
    assert (group.path / "memory.max").read_text() == str(256 << 20)
    assert (group.path / "memory.swap.max").read_text() == "0"
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.oom_kills() == 1
    os.close(group._procs_fd)  # a plain directory: not removable like a cgroup
    group._procs_fd = None


def test_doctor_says_whether_cli_agents_get_a_memory_cap(cgroups, monkeypatch):
    from metaeval.doctor import cgroup_check

    name, ok, detail = cgroup_check()
    assert (name, ok) == ("memory cgroup (optional)", True)
    assert detail.startswith("v") and f"under {cgroups} (agent CLIs capped)" in detail
    assert ours(cgroups) == set()  # the probe's cgroup is gone
    monkeypatch.setattr(cgroup_mod, "unavailable_reason", lambda: "not writable")
    assert cgroup_check() == (
        "memory cgroup (optional)",
        False,
        "not writable; agent CLIs bounded by time only",
    )


def test_a_timed_out_cli_that_kept_hitting_its_cap_says_so():
    from metaeval.agents.cli import CLI_ADAPTERS
    from metaeval.agents.cli.outcome import memory_outcome
    from metaeval.agents.types import AgentResult
    from metaeval.sandbox.process import ExecResult

    adapter = CLI_ADAPTERS["claude-code"]()
    adapter.memory_cgroup_mb = 128
    run = AgentResult(status="timeout", error="claude-code timed out after 60s")
    pressed = ExecResult(
        returncode=None,
        timed_out=True,
        memory_note="cgroup v1 memory cap 128 MiB",
        memory_cap_hits=7,
    )
    out = memory_outcome(run, pressed, adapter)
    assert out.status == "timeout" and out.error == (
        "claude-code timed out after 60s (it reached its memory cap (128 MiB) 7 times: "
        "it may have been starved of memory)"
    )
    assert [e.text for e in out.transcript] == [
        "memory: cgroup v1 memory cap 128 MiB",
        "memory: it reached its memory cap (128 MiB) 7 times",
    ]
    calm = memory_outcome(run, pressed.model_copy(update={"memory_cap_hits": 0}), adapter)
    assert calm.error == "claude-code timed out after 60s"
