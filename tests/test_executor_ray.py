"""The Ray executor backend: worker-side job handling, and a real two-node Ray cluster on
127.0.0.1 (head and worker as separate `ray start` processes in a loopback-only network
namespace) running audit and build-and-find, with a worker node and a driver killed mid-run.

Under `make test` (METAEVAL_REQUIRE_EXTRAS=1) a missing `ray` extra or an unusable
`unshare -n` fails instead of skipping.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from metaeval.engine.executor import Job, JobResources
from metaeval.records import RunDir
from test_improve_run import experiment

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
BENCH = ROOT / "examples" / "audit-bench"
BUILDFIND = ROOT / "examples" / "buildfind-reference.yaml"
REQUIRED = os.environ.get("METAEVAL_REQUIRE_EXTRAS") == "1"


def _netns_usable() -> bool:
    if not shutil.which("unshare") or not shutil.which("ip"):
        return False
    probe = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


if importlib.util.find_spec("ray") is None:
    if REQUIRED:
        raise RuntimeError("the `ray` extra is required: pip install -e '.[ray]'")
    pytest.skip("ray is not installed (extra `ray`)", allow_module_level=True)

from metaeval.engine.ray_backend import (  # noqa: E402 - after the extra check
    START_LINE,
    RayUnavailable,
    check_cluster_offers,
    ray_options,
)
from metaeval.engine.ray_worker import pickle_job, run_payload, store_blobs  # noqa: E402

# --------------------------------------------------------------------------- worker side


def _open_run(path: Path) -> RunDir:
    return RunDir.open(path, protocol="test", config={}, hashes={"x": "1"}, seeds={})


def test_job_closing_over_a_run_dir_returns_its_blobs_and_writes_nothing_on_the_worker(tmp_path):
    run = _open_run(tmp_path / "run")
    try:

        def job() -> dict:
            return {"cell": 1, "log_blob": run.blobs.put("a long transcript\n" * 50)}

        payload, runs = pickle_job(job)
        assert runs == [run]
        result = run_payload(payload, timeout_s=30)
        assert result["status"] == "done"
        ref = result["value"]["log_blob"]
        assert result["blobs"] == {ref: b"a long transcript\n" * 50}
        assert not (tmp_path / "run" / "blobs").exists() or not any(
            (tmp_path / "run" / "blobs").rglob("*")
        ), "the worker must not write into the run directory"
        value = store_blobs(result["blobs"], {str(run.path): run.blobs}, result["value"])
        assert run.blobs.get(value["log_blob"]) == b"a long transcript\n" * 50
    finally:
        run.close()


def test_a_job_cannot_write_records_from_a_worker(tmp_path):
    run = _open_run(tmp_path / "run")
    try:
        payload, _ = pickle_job(lambda: run.records("cells").append({"x": 1}))
        result = run_payload(payload, timeout_s=30)
    finally:
        run.close()
    assert result["status"] == "failed"
    assert "cannot write records (cells.jsonl)" in result["error"]
    assert not (tmp_path / "run" / "cells.jsonl").exists()


def test_the_timeout_holds_on_the_worker():
    payload, _ = pickle_job(lambda: time.sleep(60))
    started = time.monotonic()
    result = run_payload(payload, timeout_s=0.5)
    assert result["status"] == "timeout"
    assert "exceeded 0.5s" in result["error"]
    assert time.monotonic() - started < 10


def test_job_resources_map_to_ray_options():
    options = ray_options(JobResources(cpus=2, memory_mb=512, sandbox=True), max_retries=4)
    assert options["num_cpus"] == 2
    assert options["memory"] == 512 * 1024 * 1024
    assert options["resources"]["sandbox"] > 0
    assert options["max_retries"] == 4 and options["retry_exceptions"] is False
    plain = ray_options(None, max_retries=1)
    assert plain["num_cpus"] == 1 and "resources" not in plain and "memory" not in plain


def test_unknown_executor_is_a_clear_error(tmp_path):
    done = subprocess.run(
        [str(BIN / "metaeval"), "--executor", "spark", "audit", "run", str(BENCH), "-o", "x"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "--executor: choose one of local, ray" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "x").exists()


# --------------------------------------------------------------------------- a real cluster

_VOLATILE = {"created_at", "attempt", "build_attempt", "wall_clock_seconds", "layer"}
_TIMING = re.compile(r"\d+(?:\.\d+)? s\]")
_ATTEMPT_DIR = re.compile(r"-[0-9a-f]{10}$")


def _normal(value, blobs: Path, key: str = ""):
    """A record with ids, timestamps and durations removed; blob refs (fields named *blob)
    replaced by their timing-normalised content, read from the run's own blob store."""
    if isinstance(value, dict):
        return {k: _normal(v, blobs, k) for k, v in sorted(value.items()) if k not in _VOLATILE}
    if isinstance(value, list):
        return [_normal(v, blobs, key) for v in value]
    if isinstance(value, str):
        if key.endswith("blob") and re.fullmatch(r"sha256:[0-9a-f]{64}", value):
            hexd = value.split(":", 1)[1]
            data = (blobs / hexd[:2] / hexd).read_text(errors="replace")  # must be there
            return "blob:" + _TIMING.sub("T s]", data)
        return _ATTEMPT_DIR.sub("-ATTEMPT", _TIMING.sub("T s]", value))
    return value


def _records(run_dir: Path, name: str) -> list[dict]:
    out = []
    for line in (run_dir / f"{name}.jsonl").read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn line from a kill
    return out


def _normalised(run_dir: Path, name: str) -> list[str]:
    return sorted(
        json.dumps(_normal(r, run_dir / "blobs"), sort_keys=True) for r in _records(run_dir, name)
    )


def _cells(run_dir: Path, name: str, keys: tuple[str, ...]) -> Counter:
    return Counter(tuple(r.get(k) for k in keys) for r in _records(run_dir, name))


FIND_KEY = ("slice", "task", "builder", "build_trial", "finder", "find_trial")
BUILD_KEY = ("task", "builder", "build_trial")


@pytest.fixture(scope="module")
def local_runs(tmp_path_factory) -> Path:
    """Reference runs with the local executor."""
    base = tmp_path_factory.mktemp("local")
    env = {**os.environ, "METAEVAL_EXECUTOR": "local"}
    manifest = experiment(tmp_path_factory.mktemp("improve-local"))
    for argv in (
        ["audit", "run", str(BENCH), "--static-only", "-o", str(base / "audit")],
        ["buildfind", "run", str(BUILDFIND), "-o", str(base / "bf")],
        ["improve", "run", str(manifest), "-o", str(base / "improve"), "--budget", "2"],
    ):
        done = subprocess.run(
            [str(BIN / "metaeval"), *argv], capture_output=True, text=True, env=env, timeout=600
        )
        assert done.returncode == 0, done.stderr[-3000:]
    return base


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> tuple[Path, dict]:
    """Every cluster scenario, run once by tests/ray_cluster.py in a private network
    namespace (a head and a worker node, stopped by process group afterwards)."""
    if not _netns_usable():
        if REQUIRED:
            raise RuntimeError("`unshare -n` is needed for the Ray cluster tests")
        pytest.skip("cannot create a network namespace (unshare -n)")
    work = tmp_path_factory.mktemp("cluster")
    manifest = experiment(tmp_path_factory.mktemp("improve-ray"))  # its own target repository
    helper = ROOT / "tests" / "ray_cluster.py"
    script = f"ip link set lo up; exec {sys.executable} {helper} {work} {manifest}"
    done = subprocess.run(
        ["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=1500
    )
    result_path = work / "result.json"
    assert result_path.exists(), done.stderr[-4000:]
    result = json.loads(result_path.read_text())
    assert "error" not in result, (result, (work / "head.log").read_text()[-3000:])
    return work, result


def test_cluster_is_gone_afterwards(cluster):
    _, result = cluster
    assert len(result["node_sessions"]) == 2
    temp_dir = result["temp_dir"].encode()
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            sid = os.getsid(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
        if state != "Z" and (sid in result["node_sessions"] or temp_dir in cmdline):
            alive.append(entry.name)
    assert alive == []
    assert not Path(result["temp_dir"]).exists()


def test_audit_on_the_cluster_gives_the_local_records(cluster, local_runs):
    work, result = cluster
    assert result["audit"]["rc"] == 0, result["audit"]["stderr"]
    for name in ("audits", "findings"):
        assert _normalised(work / "audit", name) == _normalised(local_runs / "audit", name), name
    assert len(_records(work / "audit", "audits")) == 14


def test_buildfind_on_the_cluster_gives_the_local_records(cluster, local_runs):
    work, result = cluster
    assert result["buildfind"]["rc"] == 0, result["buildfind"]["stderr"]
    for name in ("builds", "finds"):
        assert _normalised(work / "bf", name) == _normalised(local_runs / "bf", name), name


def test_killing_the_worker_node_mid_run_loses_and_duplicates_nothing(cluster, local_runs):
    work, result = cluster
    kill = result["kill_worker"]
    assert kill["killed_at_lines"] is not None, "the worker node was killed while busy"
    assert kill["rc"] == 0, kill["stderr"]
    run = Path(kill["dir"])
    finds = _cells(run, "finds", FIND_KEY)
    assert finds == _cells(local_runs / "bf", "finds", FIND_KEY)
    assert set(finds.values()) == {1}, "one record per cell: nothing lost, nothing duplicated"
    assert _normalised(run, "finds") == _normalised(local_runs / "bf", "finds")
    assert _normalised(run, "builds") == _normalised(local_runs / "bf", "builds")


def test_killing_the_driver_then_rerunning_resumes(cluster, local_runs):
    work, result = cluster
    assert result["kill_driver"]["rc"] == -9
    assert result["kill_driver_rerun"]["rc"] == 0, result["kill_driver_rerun"]["stderr"]
    run = work / "bf-kill-driver"
    sessions = [json.loads(line) for line in (run / "sessions.jsonl").read_text().splitlines()]
    assert len({s["pid"] for s in sessions}) == 2, "one killed driver, one that resumed"
    finds = _cells(run, "finds", FIND_KEY)
    assert finds == _cells(local_runs / "bf", "finds", FIND_KEY)
    assert set(finds.values()) == {1}, "cells recorded before the kill were not run again"
    assert _normalised(run, "finds") == _normalised(local_runs / "bf", "finds")


def test_a_model_in_a_job_is_made_again_on_the_worker_without_its_api_key(monkeypatch):
    from metaeval.models.registry import get_model
    from metaeval.models.types import Message, ModelRequest
    from openai_stub import OpenAIStub

    secret = "sk-" + "d" * 32  # given to the driver's model as an option
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + "w" * 32)  # the worker's own credential
    with OpenAIStub(lambda _messages: "from the worker") as stub:
        model = get_model("openai/stub", base_url=stub.base_url, api_key=secret)
        request = ModelRequest(model=model.name, messages=[Message(role="user", content="hi")])
        payload, _ = pickle_job(lambda: model.complete(request).text)
        assert secret.encode() not in payload, "an API key passed as an option is never shipped"
        result = run_payload(payload, timeout_s=60)
    assert result["status"] == "done", result.get("error")
    assert result["value"] == "from the worker"


_COMMIT = re.compile(r"\b[0-9a-f]{40}\b|@ [0-9a-f]{12}\b")


def _bundle_text(bundle: Path, name: str) -> str:
    text = (bundle / name).read_text()
    text = re.sub(r'"wall_clock_s": ?[0-9.]+', '"wall_clock_s": 0', text)
    return _COMMIT.sub("COMMIT", text)


def test_improve_on_the_cluster_gives_the_local_bundle(cluster, local_runs):
    work, result = cluster
    assert result["improve"]["rc"] == 0, result["improve"]["stderr"]
    ray_bundle, local_bundle = work / "improve", local_runs / "improve"
    for name in (
        "trial_ledger.jsonl",
        "report.md",
        "lineage_summary.json",
        "promotion_history.json",
        "final_feedback_packet.json",
        "execution_trace.txt",
        "trials/001/selection_decision.json",
        "trials/002/feedback_packet.json",
    ):
        assert _bundle_text(ray_bundle, name) == _bundle_text(local_bundle, name), name
    ledger = [
        json.loads(line) for line in (ray_bundle / "trial_ledger.jsonl").read_text().splitlines()
    ]
    assert [e["decision"] for e in ledger] == ["promoted", "rejected"]
    # the episodes' PACT servers ran on the workers, one per episode
    assert len(list((ray_bundle / "baseline_artifacts" / "baseline").glob("server-*.log"))) >= 5


# --------------------------------------------------------------------------- missing resources


def _job(sandbox: bool, cpus: float = 1.0) -> Job:
    return Job(key="k", fn=lambda: None, resources=JobResources(cpus=cpus, sandbox=sandbox))


def test_a_job_no_node_can_take_is_refused_naming_the_resource():
    nodes = [{"Alive": True, "Resources": {"CPU": 2.0, "memory": 1e9}}]
    check_cluster_offers(nodes, [_job(False)], "h:1")  # plain jobs fit
    with pytest.raises(RayUnavailable) as refused:
        check_cluster_offers(nodes, [_job(True), _job(True), _job(False)], "h:1")
    message = str(refused.value)
    assert "the Ray cluster at h:1" in message
    assert "2 job(s) need 'sandbox' (no node offers it)" in message
    assert START_LINE in message
    with pytest.raises(
        RayUnavailable, match=r"1 job\(s\) need 4 CPU \(the largest node offers 2\)"
    ):
        check_cluster_offers(nodes, [_job(False, cpus=4)], "h:1")
    dead = [{"Alive": False, "Resources": {"CPU": 8.0, "sandbox": 8.0}}, *nodes]
    with pytest.raises(RayUnavailable, match="sandbox"):
        check_cluster_offers(dead, [_job(True)], None)  # a dead node offers nothing
    split = [*nodes, {"Alive": True, "Resources": {"CPU": 0.5, "sandbox": 1.0}}]
    with pytest.raises(RayUnavailable, match="on one node"):
        check_cluster_offers(split, [_job(True)], None)  # never both on the same node


@pytest.fixture(scope="module")
def cluster_without_sandbox(tmp_path_factory) -> tuple[Path, dict]:
    """A real two-node cluster started without the sandbox resource (tests/ray_cluster.py
    --without-sandbox, in a private network namespace)."""
    if not _netns_usable():
        if REQUIRED:
            raise RuntimeError("`unshare -n` is needed for the Ray cluster tests")
        pytest.skip("cannot create a network namespace (unshare -n)")
    work = tmp_path_factory.mktemp("nosandbox")
    helper = ROOT / "tests" / "ray_cluster.py"
    script = f"ip link set lo up; exec {sys.executable} {helper} {work} --without-sandbox"
    done = subprocess.run(
        ["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=900
    )
    result_path = work / "result.json"
    assert result_path.exists(), done.stderr[-4000:]
    result = json.loads(result_path.read_text())
    assert "error" not in result, (result, (work / "head.log").read_text()[-3000:])
    return work, result


def test_a_cluster_without_the_sandbox_resource_fails_at_once_saying_how_to_start_it(
    cluster_without_sandbox,
):
    work, result = cluster_without_sandbox
    audit = result["audit"]
    message = " ".join(audit["stderr"].split())  # the console wraps long lines
    assert audit["rc"] == 2, audit
    assert audit["s"] < 120, audit  # at once, not after a timeout
    assert "the Ray cluster at 127.0.0.1:6391" in message
    assert "14 job(s) need 'sandbox' (no node offers it)" in message
    assert 'ray start --resources "$(python -m metaeval.engine.ray_backend)"' in message
    assert "Traceback" not in audit["stderr"]
    assert not (work / "audit" / "audits.jsonl").exists()  # nothing was submitted
