"""`audit agent-run --sandbox podman` (issue 42, item 1): the toolloop agent works inside a
fresh container of the task's own image through the room's `Environment`, the task's tests
score what it left, and `program.diff` shows its changes to /app.

Real Podman (runc) and the offline base image scripts/container-base-image.sh tags
python:3.11-slim; skipped without them unless METAEVAL_REQUIRE_CONTAINER=1. The task passes
only where its Dockerfile ran: /opt/marker exists in its image alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metaeval.agents.toolloop import ToolLoopAgent
from metaeval.models.scripted import ScriptedModel
from metaeval.protocols.audit.cells.agent_run import AgentRuns, AgentRunSettings
from metaeval.sandbox.container import find_engine
from metaeval.tasks.images import image_exists

IMAGE = "python:3.11-slim"
MARKER = "made by the Dockerfile of stamp"


@pytest.fixture(scope="module")
def podman() -> None:
    found, problem = find_engine("podman")
    if found is not None and not image_exists(found, IMAGE):
        problem = f"base image {IMAGE} missing (run scripts/container-base-image.sh)"
    if problem:
        if os.environ.get("METAEVAL_REQUIRE_CONTAINER") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_CONTAINER=1 but {problem}")
        pytest.skip(problem)


def stamp_bench(root: Path) -> Path:
    task = root / "bench" / "stamp"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text(
        f"FROM {IMAGE}\nWORKDIR /app\nCOPY seed.txt /app/seed.txt\n"
        f"RUN echo '{MARKER}' > /opt/marker\n"
    )
    (task / "environment" / "seed.txt").write_text("seeded by the image\n")
    (task / "instruction.md").write_text("Copy /opt/marker to /app/stamp.txt.\n")
    (task / "task.toml").write_text(
        'version = "1.0"\n[agent]\ntimeout_sec = 120.0\n[verifier]\ntimeout_sec = 60.0\n'
        "[environment]\nallow_internet = false\n"
    )
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\nif [ -s /opt/marker ] && cmp -s /opt/marker /app/stamp.txt; then\n"
        "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\n"
    )
    (task / "solution").mkdir()
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\ncp /opt/marker /app/stamp.txt\n")
    return task.parent


def call(name: str, **arguments: object) -> dict:
    return {"tool_calls": [{"id": name, "name": name, "arguments": arguments}]}


def test_toolloop_runs_in_the_tasks_own_image_and_is_scored(podman: None, tmp_path: Path) -> None:
    bench = stamp_bench(tmp_path)
    model = ScriptedModel(
        [
            call("bash", command="cp /opt/marker /app/stamp.txt && id -un && pwd"),
            call("read_file", path="/app/stamp.txt"),
            call("list_dir", path="/app"),
            call("grep", pattern="Dockerfile of", path="/app"),
            call("write_file", path="/app/notes/plan.txt", content="copied the marker\n"),
            call("submit", answer="done"),
        ],
        name="scripted/toolloop",
    )
    out = tmp_path / "runs"
    settings = AgentRunSettings(bench_dir=bench, out_dir=out, agent="toolloop", sandbox="podman")
    settings.progress = False
    AgentRuns(settings, agent=ToolLoopAgent(model)).run()
    (record,) = [json.loads(line) for line in (out / "agent_runs.jsonl").read_text().splitlines()]
    assert record["classification"] == "ok" and record["reward"] == 1.0, record
    assert sorted(record["files_produced"]) == ["notes/plan.txt", "stamp.txt"]
    summary = (out / "stamp" / "transcript.md").read_text()
    assert "[exit code 0] root /app" in summary  # as the image's user, in its WORKDIR
    assert f"-> 32 bytes: {MARKER}" in summary  # read_file, inside the container
    assert "-> 19 bytes: seed.txt stamp.txt" in summary  # list_dir: the image's /app
    assert f"/app/stamp.txt:1:{MARKER}" in summary  # grep
    diff = (out / "stamp" / "program.diff").read_text()
    assert "+++ b/stamp.txt" in diff and f"+{MARKER}" in diff
    assert "+copied the marker" in diff
    assert "seed.txt" not in diff  # the image's /app before the agent is the diff's start
    tests_log = (out / "stamp" / "tests.log").read_text()
    assert tests_log.startswith("[podman ") and "reward: 1" in tests_log


@pytest.mark.parametrize(("name", "reward"), [("oracle", 1.0), ("null", 0.0)])
def test_the_reference_agents_run_in_the_tasks_own_image_by_name(
    podman: None, tmp_path: Path, name: str, reward: float
) -> None:
    """`--agent oracle` is shown /solution in the container and its solve.sh copies what only
    the image holds; `--agent null` leaves /app as the image made it."""
    bench = stamp_bench(tmp_path)
    out = tmp_path / "runs"
    settings = AgentRunSettings(bench_dir=bench, out_dir=out, agent=name, sandbox="podman")
    settings.progress = False
    AgentRuns(settings).run()
    (record,) = [json.loads(line) for line in (out / "agent_runs.jsonl").read_text().splitlines()]
    assert record["classification"] == "ok" and record["reward"] == reward, record
    assert record["files_produced"] == (["stamp.txt"] if name == "oracle" else [])
    diff = (out / "stamp" / "program.diff").read_text()
    assert (f"+{MARKER}" in diff) == (name == "oracle"), diff


def test_a_cli_agent_in_a_container_is_refused_naming_the_option(tmp_path: Path) -> None:
    bench = stamp_bench(tmp_path)
    command = "from metaeval.cli import main; import sys; sys.argv = sys.argv[1:]; main()"
    done = subprocess.run(
        [sys.executable, "-c", command, "metaeval", "audit", "agent-run", str(bench)]
        + ["--agent", "codex:local/smollm2", "--sandbox", "podman", "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "--sandbox podman runs the built-in agents only" in done.stderr
    assert not (tmp_path / "out" / "agent_runs.jsonl").exists()


def test_a_task_without_an_image_is_an_infra_error_retried_on_resume(
    podman: None, tmp_path: Path
) -> None:
    bench = stamp_bench(tmp_path)
    task = bench / "stamp"
    (task / "environment" / "Dockerfile").unlink()
    missing = "localhost/metaeval-missing:none"
    (task / "task.toml").write_text(
        (task / "task.toml").read_text() + f'docker_image = "{missing}"\n'
    )
    out = tmp_path / "runs"
    model = ScriptedModel([call("submit", answer="done")] * 2, name="scripted/toolloop")
    settings = AgentRunSettings(bench_dir=bench, out_dir=out, agent="toolloop", sandbox="podman")
    settings.progress = False
    for _ in range(2):  # the second run retries the task: an infra error is never final
        summary = AgentRuns(settings, agent=ToolLoopAgent(model)).run()
        assert summary["ran"] == 1 and summary["classifications"] == {"infra_error": 1}
    records = [json.loads(line) for line in (out / "agent_runs.jsonl").read_text().splitlines()]
    assert len(records) == 2
    assert all(f"image {missing} is not present locally" in r["error"] for r in records)
    assert all(r.get("reward") is None for r in records)
