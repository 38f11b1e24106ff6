"""One trial runner for audit and improve: what task.toml declares is what a real task sees.

Each task here prints what its processes observe (the address-space limit under bubblewrap,
the cgroup memory and CPU limits in a Podman container, the network interfaces of its
namespace, how long a phase ran) and the tests compare that with the declared numbers,
written out by hand. Bubblewrap tests fail instead of skipping with METAEVAL_REQUIRE_BWRAP=1,
container tests with METAEVAL_REQUIRE_CONTAINER=1 (as `make test` sets both).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tomllib
from pathlib import Path

import pytest

from metaeval.agents.in_trial import TrialAgent
from metaeval.agents.registry import get_agent
from metaeval.protocols.audit.execution_checks import run_execution_checks
from metaeval.protocols.audit.execution_results import ExecutionCheckResult
from metaeval.protocols.audit.task_hints import Hints
from metaeval.protocols.audit.task_view import load_task
from metaeval.protocols.improve.episode_limits import EpisodeLimits
from metaeval.protocols.improve.evaluate import evaluate_task
from metaeval.protocols.improve.pact.protocol import CommandAction, SubmitAction
from metaeval.protocols.improve.task_outcome import TaskOutcome
from metaeval.sandbox import bwrap as bwrap_mod
from metaeval.sandbox.container import find_engine
from metaeval.sandbox.policy import network_isolation
from metaeval.tasks.harbor_root import harbor_sandbox_unavailable
from metaeval.tasks.images import image_exists
from metaeval.tasks.limits import trial_limits
from metaeval.tasks.rooms import BwrapBackend
from metaeval.tasks.trial import TrialResult, run_trial
from test_improve_evaluate import ScriptedClient

# What a phase prints: its address-space limit (KiB, `ulimit -v`), its cgroup memory limit
# (bytes, cgroup v1 or v2), the CPUs it may run on, its CPU quota and the network interfaces
# it can see.
PROBE = r"""
echo "{name}-as-kb=$(ulimit -v)"
echo "{name}-cgroup-bytes=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null \
  || cat /sys/fs/cgroup/memory.max 2>/dev/null || echo none)"
echo "{name}-nproc=$(nproc)"
echo "{name}-cpu-quota=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null \
  || cut -d' ' -f1 /sys/fs/cgroup/cpu.max 2>/dev/null || echo none)"
echo "{name}-interfaces=$(python3 -c \
  'import socket; print(",".join(n for _, n in socket.if_nameindex()))')"
"""
TEST_SH = "#!/bin/bash\n" + PROBE.format(name="verifier") + "echo 0 > /logs/verifier/reward.txt\n"
SOLVE_SH = "#!/bin/bash\n" + PROBE.format(name="solve")
DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /app\n"


@pytest.fixture
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    reason = harbor_sandbox_unavailable()
    if reason is not None:
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_BWRAP=1 but {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def podman():
    found, problem = find_engine("podman")
    if found is not None and not image_exists(found, "python:3.11-slim"):
        problem = "base image python:3.11-slim missing (run scripts/container-base-image.sh)"
    if problem:
        if os.environ.get("METAEVAL_REQUIRE_CONTAINER") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_CONTAINER=1 but {problem}")
        pytest.skip(problem)
    return found


def write_task(
    root: Path,
    toml: str,
    *,
    test: str = TEST_SH,
    solve: str | None = SOLVE_SH,
    dockerfile: str | None = None,
) -> Path:
    """A Harbor task: instruction.md, task.toml, tests/test.sh, solution/solve.sh and, when
    given, environment/Dockerfile."""
    (root / "tests").mkdir(parents=True)
    (root / "instruction.md").write_text("Write /app/answer.txt.\n")
    (root / "task.toml").write_text('version = "1.0"\n' + toml)
    (root / "tests" / "test.sh").write_text(test)
    if solve is not None:
        (root / "solution").mkdir()
        (root / "solution" / "solve.sh").write_text(solve)
    if dockerfile is not None:
        (root / "environment").mkdir()
        (root / "environment" / "Dockerfile").write_text(dockerfile)
    return root


def audit(task_dir: Path, sandbox: str = "auto") -> ExecutionCheckResult:
    task = load_task(task_dir, bench_root=task_dir.parent, hints=Hints())
    result = run_execution_checks(task, hints=Hints(), sandbox=sandbox)
    assert result.skipped is None, (result.skipped, result.build_log)
    return result


def improve(task_dir: Path, client: ScriptedClient, tmp_path: Path) -> TaskOutcome:
    return evaluate_task(
        task_dir,
        client,
        limits=EpisodeLimits(max_steps=5, task_timeout_s=60, command_timeout_s=30),
        work_root=tmp_path / "work",
    )


def seen(log: str, key: str) -> str:
    """The value a probe printed as `key=value` in a log (exactly one line)."""
    [value] = re.findall(rf"^{re.escape(key)}=(.*)$", log, re.MULTILINE)
    return value


# --------------------------------------------------------------------------- reading task.toml


@pytest.mark.parametrize(
    ("environment", "memory_mb", "cpus"),
    [
        ({"memory_mb": 512, "cpus": 2}, 512, 2),
        ({"memory_mb": 512.0, "cpus": 1.0}, 512, 1),  # Harbor's int fields take 512.0
        ({"memory": "1.5G"}, 1536, None),  # the deprecated size string, as Harbor maps it
        ({"memory": "300M", "memory_mb": 300}, 300, None),
        ({"memory_mb": 512.5, "cpus": 0}, 2048, None),  # invalid: the default, no CPU limit
        ({"memory_mb": True, "memory": "2"}, 2048, None),  # a bool, a size without a unit
        ({"memory_mb": 2**63 - 1}, 65536, None),  # capped at 64 GiB
        ({"memory_mb": float("inf")}, 2048, None),
    ],
)
def test_memory_and_cpus_are_read_as_harbor_reads_them(
    environment: dict, memory_mb: int, cpus: int | None
) -> None:
    limits = trial_limits({"environment": environment})
    assert (limits.memory_mb, limits.cpus) == (memory_mb, cpus)


def test_phase_timeouts_and_network_are_read_per_phase() -> None:
    config = {
        "environment": {"allow_internet": False},
        "agent": {"timeout_sec": 90},
        "verifier": {"timeout_sec": float("nan"), "network_mode": "public"},
    }
    limits = trial_limits(config)
    assert (limits.agent.timeout_s, limits.agent.network) == (90.0, False)
    assert (limits.verifier.timeout_s, limits.verifier.network) == (600.0, True)
    overridden = trial_limits(config, agent_timeout_s=5, verifier_timeout_s=7)
    assert (overridden.agent.timeout_s, overridden.verifier.timeout_s) == (5.0, 7.0)
    # Silent about the network: none (Harbor's default would be public), marked undeclared.
    silent = trial_limits({"environment": {"memory_mb": 512}})
    assert not silent.agent.network and not silent.verifier.network
    assert not silent.agent.network_declared and not silent.verifier.network_declared
    assert limits.verifier.network_declared and limits.agent.network_declared


# --------------------------------------------------------------------------- memory


@pytest.mark.bwrap
@pytest.mark.parametrize(
    ("declared", "kib"),
    [("memory_mb = 512", 524288), ('memory = "768M"', 786432), ('memory = "1G"', 1048576)],
)
def test_audit_bwrap_trial_sees_the_declared_memory(
    sandboxed: None, tmp_path: Path, declared: str, kib: int
) -> None:
    task = write_task(tmp_path / "mem", f"\n[environment]\n{declared}\n")
    result = audit(task)
    assert result.backend == "bubblewrap"
    assert seen(result.oracle.log, "solve-as-kb") == str(kib)
    assert seen(result.oracle.log, "verifier-as-kb") == str(kib)
    assert seen(result.null_agent.log, "verifier-as-kb") == str(kib)


# --------------------------------------------------------------------------- storage

FILL = "\n[environment]\nstorage_mb = 16\n"
REWARD = "echo 1 > /logs/verifier/reward.txt\n"


def oracle_trial(task: Path, tmp_path: Path) -> TrialResult:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    config = tomllib.loads((task / "task.toml").read_text())
    oracle = TrialAgent(get_agent("oracle"))
    return run_trial(
        task, BwrapBackend(), limits=trial_limits(config), scratch=scratch, agent=oracle
    )


@pytest.mark.bwrap
@pytest.mark.parametrize(
    ("solve", "reason"),
    [
        # one big file in the tmpfs /tmp: the kernel stops it at the size, the phase fails
        ("dd if=/dev/zero of=/tmp/fill bs=1M count=64", "wrote more than 16 MiB to /tmp"),
        (
            "for i in $(seq 10); do head -c 10485760 /dev/zero > /dev/shm/f$i; done",
            "wrote more than 64 MiB to /dev/shm",
        ),
        # one big file in /app (a host directory): RLIMIT_FSIZE stops it at the cap
        ("dd if=/dev/zero of=/app/fill bs=1M count=64", "wrote more than 16 MiB to /app"),
        # many files in /app: the harness measures and kills the phase well before its end
        (
            "for i in $(seq 40); do head -c 1048576 /dev/zero > /app/f$i; sleep 0.05; done; "
            "sleep 20",
            "wrote more than 16 MiB to /app",
        ),
    ],
)
def test_a_phase_writing_past_storage_mb_fails_with_the_reason(
    sandboxed: None, tmp_path: Path, solve: str, reason: str
) -> None:
    probe = "df -k /tmp /dev/shm | tail -n 2; touch /dev/planted 2>&1 | tail -1\n"
    task = write_task(tmp_path / "fill", FILL, test="#!/bin/bash\n" + REWARD, solve=probe + solve)
    before = shutil.disk_usage(tmp_path).used
    result = oracle_trial(task, tmp_path)
    assert result.solve is not None and not result.solve.ok
    assert result.solve.limit_exceeded is not None
    assert result.solve.limit_exceeded.startswith(reason), result.solve.limit_exceeded
    assert f"[{reason}" in result.log  # the trial log's status line names it
    assert result.solve.duration_s < 15  # the 20 s sleep was cut off
    # The sandbox saw a 16 MiB /tmp and a 64 MiB /dev/shm, and could not write to /dev.
    sizes = re.findall(r"^tmpfs\s+(\d+)\s", result.solve.stdout, re.MULTILINE)
    assert sizes == ["16384", "65536"], result.solve.stdout
    assert "Read-only file system" in result.solve.stdout + result.solve.stderr
    # The host is unaffected: the tmpfs was the sandbox's own; in /app no file grew past the
    # cap, and a writer of many files was stopped before it wrote them all (how far it got
    # past the cap depends on the machine's load between two measurements, so it is not
    # asserted).
    app = tmp_path / "scratch" / "app"
    files = [p for p in app.rglob("*") if p.is_file()] if app.exists() else []
    assert all(p.stat().st_size <= 16 * 1024 * 1024 for p in files)
    assert len(files) < 40
    assert shutil.disk_usage(tmp_path).used - before < 64 * 1024 * 1024
    # A tmpfs is the phase's own: the tests get a fresh one and score. What the agent left in
    # /app stays over the cap for the tests too: no reward.
    assert result.passed == (not reason.endswith("/app"))


@pytest.mark.bwrap
def test_tests_writing_past_storage_mb_give_no_reward(sandboxed: None, tmp_path: Path) -> None:
    fill = "#!/bin/bash\n" + REWARD + "dd if=/dev/zero of=/tmp/fill bs=1M count=64\n"
    task = write_task(tmp_path / "fill", FILL, test=fill, solve="true")
    result = oracle_trial(task, tmp_path)
    assert result.reward is None and not result.passed
    assert result.reward_error == "the tests wrote more than 16 MiB to /tmp (it is full)"
    assert "reward: none (the tests wrote more than 16 MiB to /tmp" in result.log


def test_storage_mb_is_read_as_harbor_reads_it() -> None:
    assert trial_limits({}).storage_mb == 2048  # the documented default
    assert trial_limits({"environment": {"storage_mb": 512}}).storage_mb == 512
    assert trial_limits({"environment": {"storage": "1G"}}).storage_mb == 1024
    assert trial_limits({"environment": {"storage_mb": -1}}).storage_mb == 2048


def test_audit_container_trial_sees_the_declared_memory_and_cpus(podman, tmp_path: Path) -> None:
    task = write_task(
        tmp_path / "mem",
        "\n[environment]\nmemory_mb = 512\ncpus = 1\nallow_internet = false\n",
        dockerfile=DOCKERFILE,
    )
    result = audit(task, sandbox="podman")
    assert result.backend.startswith("podman")
    for log, phase in ((result.oracle.log, "solve"), (result.null_agent.log, "verifier")):
        assert seen(log, f"{phase}-cgroup-bytes") == "536870912"  # 512 MiB
        assert seen(log, f"{phase}-cpu-quota") == "100000"  # one CPU of a 100 ms period


@pytest.mark.bwrap
def test_audit_bwrap_trial_runs_on_the_declared_cpus(sandboxed: None, tmp_path: Path) -> None:
    assert len(os.sched_getaffinity(0)) >= 2, "one CPU here: a limit of 1 shows nothing"
    result = audit(write_task(tmp_path / "cpu", "\n[environment]\ncpus = 1\n"))
    assert seen(result.oracle.log, "solve-nproc") == "1"
    assert seen(result.null_agent.log, "verifier-nproc") == "1"


@pytest.mark.bwrap
def test_improve_verifier_and_agent_see_the_declared_memory(
    sandboxed: None, tmp_path: Path
) -> None:
    task = write_task(tmp_path / "mem", "\n[environment]\nmemory_mb = 512\n", solve=None)
    client = ScriptedClient([CommandAction(command="ulimit -v"), SubmitAction(answer="")])
    outcome = improve(task, client, tmp_path)
    assert outcome.status == "failed" and outcome.reward == 0.0, outcome.reason
    assert seen(outcome.test_log, "verifier-as-kb") == "524288"
    assert client.requests[1].observation.stdout == "524288\n"


# --------------------------------------------------------------------------- timeouts

SLOW_SOLVE = "#!/bin/bash\nsleep 30\n"
SLOW_TEST = "#!/bin/bash\nsleep 30\necho 1 > /logs/verifier/reward.txt\n"
SHORT_PHASES = "\n[agent]\ntimeout_sec = 2\n\n[verifier]\ntimeout_sec = 4\n"


def assert_killed_after(result, at_least: float) -> None:
    assert result is not None and result.timed_out, result
    assert at_least - 0.5 <= result.duration_s < 20, result.duration_s  # not the 30 s sleep


@pytest.mark.bwrap
def test_audit_bwrap_applies_each_phases_declared_timeout(sandboxed: None, tmp_path: Path) -> None:
    task = write_task(tmp_path / "slow", SHORT_PHASES, test=SLOW_TEST, solve=SLOW_SOLVE)
    result = audit(task)
    assert_killed_after(result.oracle.solve, 2)
    assert_killed_after(result.oracle.test, 4)
    assert_killed_after(result.null_agent.test, 4)
    [finding] = result.findings
    assert finding.subcategory == "ENV-RESOURCE" and "killed after 2 s" in finding.description


def test_audit_container_applies_each_phases_declared_timeout(podman, tmp_path: Path) -> None:
    toml = SHORT_PHASES + "\n[environment]\nallow_internet = false\n"
    task = write_task(
        tmp_path / "slow", toml, test=SLOW_TEST, solve=SLOW_SOLVE, dockerfile=DOCKERFILE
    )
    result = audit(task, sandbox="podman")
    assert_killed_after(result.oracle.solve, 2)
    assert_killed_after(result.null_agent.test, 4)


@pytest.mark.bwrap
def test_improve_applies_the_declared_verifier_timeout(sandboxed: None, tmp_path: Path) -> None:
    task = write_task(tmp_path / "slow", SHORT_PHASES, test=SLOW_TEST, solve=None)
    outcome = improve(task, ScriptedClient([SubmitAction(answer="")]), tmp_path)
    assert outcome.status == "failed" and outcome.reward is None
    assert "timed out" in outcome.test_log
    assert outcome.duration_s < 20  # the 30 s sleep was cut off


# --------------------------------------------------------------------------- network

VERIFIER_ONLY = (
    '\n[environment]\nnetwork_mode = "no-network"\n\n[verifier]\nnetwork_mode = "public"\n'
)
AGENT_ONLY = '\n[environment]\nnetwork_mode = "no-network"\n\n[agent]\nnetwork_mode = "public"\n'


@pytest.mark.bwrap
def test_audit_bwrap_gives_the_network_to_the_verifier_only(
    sandboxed: None, tmp_path: Path
) -> None:
    host = {name for _, name in socket.if_nameindex()}
    assert host - {"lo"}, "the host has no interface besides lo: nothing to observe"
    networked = {"lo", "tap0"} if network_isolation() == "own" else host
    result = audit(write_task(tmp_path / "net", VERIFIER_ONLY))
    assert seen(result.oracle.log, "solve-interfaces") == "lo"
    assert set(seen(result.oracle.log, "verifier-interfaces").split(",")) == networked
    assert set(seen(result.null_agent.log, "verifier-interfaces").split(",")) == networked


CONNECT = r"""#!/bin/bash
python3 - <<'PY'
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    print("{name}-connect=ok")
except OSError as exc:
    print("{name}-connect=refused", type(exc).__name__)
PY
"""


@pytest.mark.bwrap
@pytest.mark.parametrize("toml", ["", '\n[environment]\nnetwork_mode = "public"\n'])
def test_a_task_silent_about_the_network_cannot_reach_a_host_loopback_server(
    sandboxed: None, tmp_path: Path, toml: str
) -> None:
    """No network unless task.toml asks: a server on the host's 127.0.0.1 is out of reach of
    both phases. A task that asks for public network gets a network of its own (slirp4netns,
    as root), which does not reach the host's loopback either; only where that is not
    available does it share the host's network, loopback services included (what the
    README's security table says)."""
    expected = "ok" if toml and network_isolation() == "host" else "refused"
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        test = CONNECT.format(port=port, name="verifier") + "echo 1 > /logs/verifier/reward.txt\n"
        solve = CONNECT.format(port=port, name="solve")
        result = audit(write_task(tmp_path / "net", toml, test=test, solve=solve))
    assert seen(result.oracle.log, "solve-connect").startswith(expected)
    assert seen(result.oracle.log, "verifier-connect").startswith(expected)


HOSTILE_NET = r"""#!/bin/bash
ip -4 route get 169.254.169.254 2>&1 | head -1 | sed 's/^/{name}-metadata=/'
ip -4 route get 192.168.1.1 2>&1 | head -1 | sed 's/^/{name}-lan=/'
ip -6 route get fd00:ec2::254 2>&1 | head -1 | sed 's/^/{name}-metadata6=/'
echo "{name}-default=$(ip -4 route show default)"
python3 - <<'PY'
import socket
try:
    socket.create_connection(("10.0.2.2", {port}), timeout=3).close()
    print("{name}-hostloop=ok")
except OSError as exc:
    print("{name}-hostloop=refused", type(exc).__name__)
PY
"""


@pytest.mark.bwrap
def test_a_networked_phase_gets_a_network_of_its_own(sandboxed: None, tmp_path: Path) -> None:
    """With slirp4netns (as root): a default route out through tap0, but the host's loopback
    (slirp's 10.0.2.2 alias), the cloud metadata address, the LAN and all of IPv6 are
    refused inside the namespace, before any packet leaves (checked with `ip route get`:
    the test sends nothing to a non-loopback address)."""
    if network_isolation() != "own":
        pytest.skip("no network of its own here (needs root and slirp4netns, nsenter, ip)")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        test = HOSTILE_NET.format(port=port, name="verifier") + REWARD
        toml = '\n[environment]\nnetwork_mode = "public"\n'
        result = audit(write_task(tmp_path / "net", toml, test=test, solve="true"))
    log = result.oracle.log
    assert seen(log, "verifier-default").startswith("default via 10.0.2.2 dev tap0")
    assert seen(log, "verifier-metadata") == "RTNETLINK answers: Permission denied"
    assert seen(log, "verifier-lan") == "RTNETLINK answers: Permission denied"
    assert seen(log, "verifier-metadata6") == "RTNETLINK answers: Network is unreachable"
    assert seen(log, "verifier-hostloop").startswith("refused")


@pytest.mark.parametrize(
    ("toml", "solve_net", "verifier_net"),
    [(VERIFIER_ONLY, "lo", "lo,eth0"), (AGENT_ONLY, "lo,eth0", "lo")],
)
def test_audit_container_attaches_the_network_per_phase(
    podman, tmp_path: Path, toml: str, solve_net: str, verifier_net: str
) -> None:
    result = audit(write_task(tmp_path / "net", toml, dockerfile=DOCKERFILE), sandbox="podman")
    assert seen(result.oracle.log, "solve-interfaces") == solve_net
    assert seen(result.oracle.log, "verifier-interfaces") == verifier_net
    assert seen(result.null_agent.log, "verifier-interfaces") == verifier_net


@pytest.mark.bwrap
def test_improve_verifier_gets_its_network_and_the_agent_never_does(
    sandboxed: None, tmp_path: Path
) -> None:
    both = '\n[agent]\nnetwork_mode = "public"\n\n[verifier]\nnetwork_mode = "public"\n'
    task = write_task(tmp_path / "net", both, solve=None)
    probe = "python3 -c 'import socket; print([n for _, n in socket.if_nameindex()])'"
    client = ScriptedClient([CommandAction(command=probe), SubmitAction(answer="")])
    outcome = improve(task, client, tmp_path)
    assert client.requests[1].observation.stdout == "['lo']\n"
    interface = "tap0" if network_isolation() == "own" else "eth0"
    assert interface in seen(outcome.test_log, "verifier-interfaces").split(",")


# --------------------------------------------------------------------------- the reward


def test_container_reward_is_what_the_tests_wrote_not_the_solve_step(
    podman, tmp_path: Path
) -> None:
    forge = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"
    silent = "#!/bin/bash\necho checked /app/answer.txt\n"
    toml = "\n[environment]\nallow_internet = false\n"
    task = write_task(tmp_path / "forge", toml, test=silent, solve=forge, dockerfile=DOCKERFILE)
    result = audit(task, sandbox="podman")
    assert result.oracle.solve is not None and result.oracle.solve.returncode == 0
    assert result.oracle.reward is None and "reward: none" in result.oracle.log
