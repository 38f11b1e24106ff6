"""Drive a real two-node Ray cluster on 127.0.0.1 through metaeval's CLI (used by
tests/test_executor_ray.py; not a test module itself).

Run it inside a loopback-only network namespace, so Ray advertises 127.0.0.1:

    unshare -n sh -c 'ip link set lo up; exec python tests/ray_cluster.py WORKDIR [MANIFEST]'

It starts a head node and a second worker node as separate `ray start --block` processes
(each in its own process group, so they are stopped by process group, never by name), runs
the scenarios below with `metaeval --executor ray`, and writes WORKDIR/result.json:

* audit:         `audit run examples/audit-bench --static-only`
* buildfind:     `buildfind run examples/buildfind-reference.yaml`
* kill_worker:   the same buildfind run; the worker node is SIGKILLed once a few finds are in
* kill_driver:   the same buildfind run; the driver is SIGKILLed mid-run, then re-run
* improve:       `improve run MANIFEST --budget 2` when a manifest is given (second argument)

With `--without-sandbox` as the second argument it instead starts both nodes without the
`sandbox` resource and runs the static audit once, which must fail at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PORT = 6391  # below 10002, where Ray's worker port range starts
ADDRESS = f"127.0.0.1:{PORT}"
NODE_ARGS = [
    "--num-cpus",
    "1",
    "--object-store-memory",
    str(80 * 1024 * 1024),
    "--disable-usage-stats",
    "--node-ip-address",
    "127.0.0.1",
    "--block",
]
SANDBOX_ARGS = ["--resources", json.dumps({"sandbox": 1})]
BUILDFIND = str(ROOT / "examples" / "buildfind-reference.yaml")


def env() -> dict[str, str]:
    return {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        # a loopback-only cluster in a private network namespace: no token to distribute
        "RAY_AUTH_MODE": "disabled",
        "METAEVAL_EXECUTOR": "ray",
        "METAEVAL_RAY_ADDRESS": ADDRESS,
        "PYTHONUNBUFFERED": "1",
    }


def start_node(args: list[str], log: Path, temp_dir: str, sandbox: bool = True) -> subprocess.Popen:
    """A `ray start --block` node; `sandbox=False` starts it as Ray's docs do, without
    metaeval's `sandbox` resource."""
    extra = SANDBOX_ARGS if sandbox else []
    return subprocess.Popen(
        [str(BIN / "ray"), "start", *args, "--temp-dir", temp_dir, *NODE_ARGS, *extra],
        env=env(),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for_nodes(count: int, nodes: list[subprocess.Popen], timeout_s: float = 240) -> None:
    """Poll the cluster until `count` nodes are alive (fail at once if a node process exits)."""
    import ray

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(node.poll() is not None for node in nodes):
            raise RuntimeError("a `ray start` process exited; see head.log / worker.log")
        try:
            ray.init(address=ADDRESS, log_to_driver=False, configure_logging=False)
            alive = [n for n in ray.nodes() if n.get("Alive")]
            ray.shutdown()
            if len(alive) >= count:
                return
        except Exception:  # noqa: BLE001 - not up yet
            with contextlib.suppress(Exception):
                ray.shutdown()
        time.sleep(2)
    raise RuntimeError(f"the Ray cluster did not reach {count} nodes in {timeout_s}s")


def metaeval(*args: str) -> list[str]:
    return [str(BIN / "metaeval"), *args]


def run(argv: list[str], timeout_s: float = 600) -> dict:
    done = subprocess.run(argv, env=env(), capture_output=True, text=True, timeout=timeout_s)
    return {"rc": done.returncode, "stderr": done.stderr[-3000:]}


def lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


def running_jobs(node: subprocess.Popen) -> int:
    """How many metaeval jobs a node is executing now (Ray titles a busy worker process
    `ray::metaeval:<job key>`, the task name the executor gives it)."""
    busy = 0
    for pid in session_pids(node.pid):
        with contextlib.suppress(OSError):
            if b"ray::metaeval:" in Path(f"/proc/{pid}/cmdline").read_bytes():
                busy += 1
    return busy


def run_and_kill(argv: list[str], watch: Path, at_lines: int, kill, ready=lambda: True) -> dict:
    """Start `argv`; once `watch` has `at_lines` lines and `ready()` holds, call `kill(proc)`;
    wait for the end."""
    proc = subprocess.Popen(
        argv, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    killed_at = None
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        if killed_at is None and lines(watch) >= at_lines and ready():
            killed_at = lines(watch)
            kill(proc)
        time.sleep(0.01)
    stderr = proc.communicate(timeout=600)[1]
    return {"rc": proc.returncode, "killed_at_lines": killed_at, "stderr": stderr[-3000:]}


def session_pids(leader: int) -> list[int]:
    """Processes of the session `leader` started (Ray's worker processes get their own process
    group, but stay in the session of the `ray start` that launched their node)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError, ProcessLookupError):
                if os.getsid(int(entry.name)) == leader:
                    pids.append(int(entry.name))
    return pids


def stop_group(proc: subprocess.Popen) -> None:
    """SIGKILL a node: every process of its session (raylet, its workers, `ray start`)."""
    for pid in session_pids(proc.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def kill_leftovers(temp_dir: str, groups: list[int]) -> list[int]:
    """SIGKILL any process still in one of our nodes' sessions or naming our temp dir."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            sid = os.getsid(pid)
        except (OSError, ProcessLookupError):
            continue
        if sid in groups or temp_dir in cmdline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def main(work: Path, improve_manifest: str | None = None) -> None:
    work.mkdir(parents=True, exist_ok=True)
    temp_dir = tempfile.mkdtemp(prefix="mray", dir="/tmp")  # short: Ray's socket paths are capped
    result: dict = {}
    head = start_node(
        ["--head", "--port", str(PORT), "--include-dashboard=false"], work / "head.log", temp_dir
    )
    nodes = [head]
    try:
        wait_for_nodes(1, nodes)
        worker = start_node(["--address", ADDRESS], work / "worker.log", temp_dir)
        nodes.append(worker)
        wait_for_nodes(2, nodes)
        started = time.monotonic()
        result["audit"] = run(
            metaeval(
                "audit",
                "run",
                str(ROOT / "examples" / "audit-bench"),
                "--static-only",
                "-o",
                str(work / "audit"),
            )
        )
        result["audit"]["s"] = round(time.monotonic() - started, 1)
        started = time.monotonic()
        result["buildfind"] = run(metaeval("buildfind", "run", BUILDFIND, "-o", str(work / "bf")))
        result["buildfind"]["s"] = round(time.monotonic() - started, 1)

        # Kill the worker node mid-run, while it runs a job: that job is lost and must be
        # retried on the head. Jobs are short, so a run may end before the worker is seen busy;
        # then try once more in a fresh directory.
        for attempt in range(3):
            out = work / f"bf-kill-worker-{attempt}"
            result["kill_worker"] = run_and_kill(
                metaeval("buildfind", "run", BUILDFIND, "-o", str(out)),
                out / "finds.jsonl",
                1,
                lambda _proc: stop_group(worker),
                ready=lambda: running_jobs(worker) > 0,
            )
            result["kill_worker"]["dir"] = str(out)
            if result["kill_worker"]["killed_at_lines"] is not None:
                break

        # Kill the driver mid-run, then run the same command again.
        result["kill_driver"] = run_and_kill(
            metaeval("buildfind", "run", BUILDFIND, "-o", str(work / "bf-kill-driver")),
            work / "bf-kill-driver" / "finds.jsonl",
            4,
            lambda proc: proc.send_signal(signal.SIGKILL),
        )
        result["kill_driver_rerun"] = run(
            metaeval("buildfind", "run", BUILDFIND, "-o", str(work / "bf-kill-driver"))
        )
        if improve_manifest:
            started = time.monotonic()
            result["improve"] = run(
                metaeval(
                    "improve", "run", improve_manifest, "-o", str(work / "improve"), "--budget", "2"
                )
            )
            result["improve"]["s"] = round(time.monotonic() - started, 1)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        for node in nodes:
            stop_group(node)
        result["leftovers_killed"] = kill_leftovers(temp_dir, [n.pid for n in nodes])
        result["node_sessions"] = [n.pid for n in nodes]
        result["temp_dir"] = temp_dir
        subprocess.run(["rm", "-rf", temp_dir], check=False)
        (work / "result.json").write_text(json.dumps(result, indent=2))


def without_sandbox(work: Path) -> None:
    """Two nodes started without the `sandbox` resource: an audit whose static cells need it
    must fail at once (not wait forever) and say how to start the nodes."""
    work.mkdir(parents=True, exist_ok=True)
    temp_dir = tempfile.mkdtemp(prefix="mray", dir="/tmp")
    result: dict = {}
    head = start_node(
        ["--head", "--port", str(PORT), "--include-dashboard=false"],
        work / "head.log",
        temp_dir,
        sandbox=False,
    )
    nodes = [head]
    try:
        wait_for_nodes(1, nodes)
        nodes.append(start_node(["--address", ADDRESS], work / "worker.log", temp_dir, False))
        wait_for_nodes(2, nodes)
        started = time.monotonic()
        argv = metaeval(
            "audit", "run", str(ROOT / "examples" / "audit-bench"), "--static-only",
            "-o", str(work / "audit"),
        )  # fmt: skip
        result["audit"] = run(argv, timeout_s=300)
        result["audit"]["s"] = round(time.monotonic() - started, 1)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        for node in nodes:
            stop_group(node)
        result["leftovers_killed"] = kill_leftovers(temp_dir, [n.pid for n in nodes])
        subprocess.run(["rm", "-rf", temp_dir], check=False)
        (work / "result.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    if sys.argv[2:] == ["--without-sandbox"]:
        without_sandbox(Path(sys.argv[1]))
    else:
        main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
