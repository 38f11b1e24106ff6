"""Improve in containers (issue 28, item 7): `--sandbox podman` runs each Harbor task whose
environment is a Dockerfile in a fresh container of its own image, episodes and verifiers alike.

Real Podman (runc) and the offline base image scripts/container-base-image.sh tags
python:3.12-slim; the tests skip without them unless METAEVAL_REQUIRE_CONTAINER=1. The suite's
tasks pass only where their Dockerfile ran: the reference solution copies /opt/marker, a file
the Dockerfile's RUN step wrote, and the tests compare against that file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from improve_experiment import experiment, ledger
from metaeval.exit_codes import BAD_INPUT
from metaeval.protocols.improve.evaluate import evaluate_task
from metaeval.protocols.improve.meta_agents import ScriptedMetaAgent
from metaeval.protocols.improve.pact.protocol import CommandAction, WriteFileAction
from metaeval.protocols.improve.run import run_experiment
from metaeval.protocols.improve.scripted_steps import improve
from metaeval.sandbox.container import find_engine
from metaeval.tasks.images import image_exists, image_id
from test_improve_evaluate import ScriptedClient

BASE = "python:3.12-slim"
OPTIMIZE = ("stamp-alpha", "stamp-beta")
HELD_OUT = ("stamp-gamma",)
PROBE = "ls /tests /solution /logs/verifier/reward.txt 2>&1 | sed 's/^/probe: /'"


@pytest.fixture(scope="module")
def podman():
    found, problem = find_engine("podman")
    if found is not None and not image_exists(found, BASE):
        problem = f"base image {BASE} missing (run scripts/container-base-image.sh)"
    if problem:
        if os.environ.get("METAEVAL_REQUIRE_CONTAINER") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_CONTAINER=1 but {problem}")
        pytest.skip(problem)
    return found


def stamp_task(suite: Path, name: str) -> Path:
    """A task that passes only in its own image: /opt/marker exists there alone."""
    task = suite / name
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text(
        f"FROM {BASE}\nWORKDIR /app\nRUN echo 'made by the Dockerfile of {name}' > /opt/marker\n"
    )
    (task / "instruction.md").write_text(
        f"# Stamp marker {name}\n\nCopy /opt/marker to stamp.txt.\n"
    )
    (task / "task.toml").write_text(
        'version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 120.0\n'
        "[environment]\ncpus = 1\nmemory_mb = 512\nallow_internet = false\n"
    )
    (task / "solution").mkdir()
    (task / "solution" / "solve.sh").write_text(
        f"#!/bin/bash\n{PROBE}\ncp /opt/marker /app/stamp.txt\n"
    )
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\nif [ -s /opt/marker ] && cmp -s /opt/marker /app/stamp.txt; then\n"
        "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\n"
    )
    return task


def stamp_experiment(tmp_path: Path) -> tuple[Path, Path]:
    """The scripted demo experiment pointed at a suite of stamp tasks; (manifest, suite)."""
    manifest = experiment(tmp_path, budget=1)
    suite = tmp_path / "stamp-suite"
    for name in (*OPTIMIZE, *HELD_OUT):
        stamp_task(suite, name)
    (suite / "suite.json").write_text(
        json.dumps(
            {"name": "stamp", "splits": {"optimize": list(OPTIMIZE), "held_out": list(HELD_OUT)}}
        )
    )
    for config in (manifest.parent / "suites").glob("*.json"):
        data = json.loads(config.read_text())
        config.write_text(json.dumps({**data, "tasks_dir": str(suite)}))
    return manifest, suite


@pytest.mark.bwrap
def test_an_improve_run_evaluates_dockerfile_tasks_in_their_own_podman_image(podman, tmp_path):
    manifest, suite = stamp_experiment(tmp_path)
    summary = run_experiment(
        manifest, meta_agent=ScriptedMetaAgent([improve(suite, OPTIMIZE)]), sandbox="podman"
    )
    bundle = tmp_path / "runs" / "improve-demo"
    (entry,) = ledger(bundle)
    # the recipe copies a file only the image has: 0/2 before, 2/2 after, held-out unchanged
    baseline = json.loads((bundle / "baseline_evaluation.json").read_text())
    assert baseline["optimize"]["score"] == 0.0 and baseline["held_out"]["score"] == 0.0
    assert entry["decision"] == "promoted" and entry["optimize_score"] == 1.0
    assert entry["held_out_score"] == 0.0 and summary.trials_consumed == 1
    evaluation = json.loads(
        (bundle / "trials" / "001" / "artifacts" / "candidates" / "evaluation.json").read_text()
    )
    rows = evaluation["optimize"]["tasks"] + evaluation["held_out"]["tasks"]
    assert [r["status"] for r in rows] == ["passed", "passed", "failed"]
    ids = {r["task_id"]: r["image_id"] for r in baseline["optimize"]["tasks"]}
    for row in rows:
        # the tag names the task's image; the id is what ran, the same as for the baseline
        assert row["backend"].startswith("podman ") and "localhost/metaeval-env:" in row["backend"]
        assert row["image_id"] and f"(id {row['image_id']})" in row["backend"]
        assert ids.get(row["task_id"], row["image_id"]) == row["image_id"]
        log = (bundle / row["test_log"]).read_text()
        assert log.startswith("[podman ") and "reward: " in log
        assert f"(id {row['image_id']})]" in log.splitlines()[0]
    assert len(ids) == 2 and all(ids.values())
    # sealed in the container too: the agent's phase sees neither tests, solution nor reward
    trace = (bundle / evaluation["optimize"]["tasks"][0]["trace"]).read_text()
    for path in ("/tests", "/solution", "/logs/verifier/reward.txt"):
        assert f"probe: ls: cannot access '{path}': No such file or directory" in trace
    resolved = json.loads((bundle / "resolved_manifest.json").read_text())
    assert resolved["sandbox"] == "podman"


@pytest.mark.bwrap
def test_a_resume_with_another_sandbox_is_refused(podman, tmp_path):
    from metaeval.errors import RecordIntegrityError

    manifest, suite = stamp_experiment(tmp_path)
    run_experiment(manifest, meta_agent=ScriptedMetaAgent([improve(suite, OPTIMIZE)]))
    with pytest.raises(RecordIntegrityError, match="setting 'sandbox' changed: bwrap -> podman"):
        run_experiment(manifest, meta_agent=ScriptedMetaAgent([]), sandbox="podman")


def copy_marker() -> list:
    return [
        CommandAction(command="cp /opt/marker stamp.txt && echo copied"),
        WriteFileAction(path="/app/notes/written.txt", content="by write_file\n"),
        CommandAction(command="cat /app/notes/written.txt; id -un"),
    ]


@pytest.mark.bwrap
def test_the_same_actions_pass_in_the_image_and_fail_in_bubblewrap(podman, tmp_path):
    task = stamp_task(tmp_path / "suite", "stamp-alpha")
    inside = evaluate_task(task, ScriptedClient(copy_marker()), sandbox="podman")
    assert inside.status == "passed" and inside.reward == 1.0, inside.test_log
    observations = [s["observation"] for s in inside.trace]
    assert "copied" in observations[1]["stdout"]
    assert observations[2]["kind"] == "file_written"
    assert observations[3]["stdout"].startswith("by write_file\n")
    outside = evaluate_task(task, ScriptedClient(copy_marker()), sandbox="bwrap")
    assert outside.status == "failed" and outside.reward == 0.0
    assert outside.backend == "bubblewrap" and inside.backend.startswith("podman ")


def test_an_unavailable_engine_makes_the_task_an_infra_error(tmp_path, monkeypatch):
    monkeypatch.setattr(
        "metaeval.protocols.improve.episode_room.find_engine",
        lambda kind: (None, f"no container engine: {kind} is not installed"),
    )
    task = stamp_task(tmp_path / "suite", "stamp-alpha")
    client = ScriptedClient(copy_marker())
    outcome = evaluate_task(task, client, sandbox="docker")
    assert outcome.status == "infra_error" and client.resets == []
    assert outcome.reason == "no container engine: docker is not installed"
    with pytest.raises(ValueError, match="unknown sandbox 'kvm'"):
        evaluate_task(task, client, sandbox="kvm")


@pytest.mark.bwrap
def test_auto_falls_back_to_bubblewrap_and_a_task_without_an_environment_never_needs_one(
    tmp_path, monkeypatch
):
    from metaeval.protocols.improve.episode_room import choose_backend
    from metaeval.tasks.rooms import BwrapBackend

    plain = tmp_path / "plain"
    (plain / "environment").mkdir(parents=True)
    (plain / "environment" / "data.txt").write_text("no Dockerfile here\n")
    stamped = stamp_task(tmp_path / "suite", "stamp-alpha")
    monkeypatch.setattr(
        "metaeval.protocols.improve.episode_room.find_engine",
        lambda kind: (None, "no container engine: docker is not installed"),
    )
    assert isinstance(choose_backend(plain, {}, "podman"), BwrapBackend)
    assert isinstance(choose_backend(stamped, {}, "auto"), BwrapBackend)


def test_auto_takes_a_working_engine_for_a_dockerfile_task(podman, tmp_path):
    from metaeval.protocols.improve.episode_room import choose_backend
    from metaeval.tasks.rooms import ContainerBackend

    backend = choose_backend(stamp_task(tmp_path / "suite", "stamp-alpha"), {}, "auto")
    assert isinstance(backend, ContainerBackend) and backend.engine.name in ("docker", "podman")
    assert backend.tag and backend.tag.startswith("localhost/metaeval-env:")
    assert backend.image == image_id(backend.engine, backend.tag)  # runs the id the tag named


def show_marker() -> list:
    return [CommandAction(command="cat /opt/marker && cp /opt/marker stamp.txt")]


def marker_of(outcome) -> str:
    """What the episode's `cat /opt/marker` printed (the observation its next step saw)."""
    return outcome.trace[1]["observation"]["stdout"].strip()


@pytest.mark.bwrap
def test_evaluations_run_the_image_id_pinned_once_not_a_tag_moved_between_them(podman, tmp_path):
    from metaeval.protocols.improve.image_pins import ImagePins

    stamp = f"pinned-{uuid.uuid4().hex[:12]}"  # a tag of this test's own: nobody else moves it
    task = stamp_task(tmp_path / "suite", stamp)
    other = tmp_path / "other"
    other.mkdir()
    (other / "Dockerfile").write_text(f"FROM {BASE}\nRUN echo moved-{stamp} > /opt/marker\n")
    moved = f"localhost/metaeval-test-moved:{stamp}"
    pins = ImagePins(tmp_path / "image_pins.jsonl")
    first = evaluate_task(task, ScriptedClient(show_marker()), sandbox="podman", pins=pins)
    tag = first.backend.partition("(image ")[2].partition(" ")[0]
    try:
        assert first.status == "passed" and first.image_id, first.reason
        assert marker_of(first) == f"made by the Dockerfile of {stamp}"
        built = subprocess.run(
            podman.command("build", "--pull=never", "-t", moved, str(other)),
            capture_output=True,
            check=False,
        )
        assert built.returncode == 0, built.stderr
        subprocess.run(podman.command("tag", moved, tag), check=True)  # the tag moves
        assert image_id(podman, tag) != first.image_id
        # the next evaluation of the same run: the pinned id, not what the tag names now
        second = evaluate_task(task, ScriptedClient(show_marker()), sandbox="podman", pins=pins)
        assert second.image_id == first.image_id and second.backend == first.backend
        assert marker_of(second) == marker_of(first)
        # without the pin the moved tag would have been run: the pin is what kept them together
        fresh = evaluate_task(task, ScriptedClient(show_marker()), sandbox="podman")
        assert fresh.image_id == image_id(podman, tag) != first.image_id
        assert marker_of(fresh) == f"moved-{stamp}"
        # the pins read back from their record (a later evaluation, a resumed run): the
        # moved tag is refused for that task, naming the tag and both ids, and nothing runs
        reread = ImagePins(tmp_path / "image_pins.jsonl")
        again = evaluate_task(task, ScriptedClient(show_marker()), sandbox="podman", pins=reread)
        assert again.status == "infra_error" and not again.trace, again
        for part in (tag, first.image_id, fresh.image_id):
            assert part in again.reason, (part, again.reason)
    finally:
        for ref in (first.image_id, moved, tag):
            if ref:
                subprocess.run(podman.command("rmi", "-f", ref), capture_output=True, check=False)


def improve_cli(manifest: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "metaeval.cli", "improve", "run", str(manifest)]
    argv += ["--sandbox", "podman"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.bwrap
def test_a_run_killed_and_resumed_runs_the_image_ids_in_its_bundle_or_refuses(podman, tmp_path):
    """Issue 43: the id each task's tag named is written to the bundle before it runs; a run
    resumed after SIGKILL checks every tag against it and refuses a moved one, naming the
    image, the tag and both ids; with the tag restored it resumes and runs those ids."""
    from metaeval.protocols.improve.image_pins import IMAGE_PINS

    manifest, _ = stamp_experiment(tmp_path)
    bundle = tmp_path / "runs" / "improve-demo"
    pins = bundle / IMAGE_PINS
    proc = improve_cli(manifest)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if pins.exists() and pins.read_bytes().endswith(b"\n"):
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL  # killed, not finished
    [pin, *_] = [json.loads(line) for line in pins.read_text().splitlines()]
    assert pin["engine"] == "podman" and image_id(podman, pin["image"]) == pin["image_id"]

    other = tmp_path / "other"
    other.mkdir()
    (other / "Dockerfile").write_text(f"FROM {BASE}\nRUN echo moved > /opt/marker\n")
    moved = f"localhost/metaeval-test-moved:{uuid.uuid4().hex[:12]}"
    built = subprocess.run(
        podman.command("build", "--pull=never", "-t", moved, str(other)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    try:
        subprocess.run(podman.command("tag", moved, pin["image"]), check=True)  # the tag moves
        now = image_id(podman, pin["image"])
        assert now is not None and now != pin["image_id"]
        refused = improve_cli(manifest)
        output = refused.communicate(timeout=600)[0]
        assert refused.returncode == BAD_INPUT, output
        for part in (str(pins), pin["image"], pin["image_id"], now, Path(pin["task"]).name):
            assert part in " ".join(output.split()), (part, output)
        assert not (bundle / "baseline_evaluation.json").exists()  # nothing ran

        # the tag restored: the resume runs, and every trial ran the recorded ids
        subprocess.run(podman.command("tag", pin["image_id"], pin["image"]), check=True)
        resumed = improve_cli(manifest)
        output = resumed.communicate(timeout=900)[0]
        assert resumed.returncode == 0, output
    finally:
        subprocess.run(podman.command("rmi", "-f", moved), capture_output=True, check=False)
    recorded = {
        Path(p["task"]).name: p["image_id"] for p in map(json.loads, pins.read_text().splitlines())
    }
    assert set(recorded) == {*OPTIMIZE, *HELD_OUT}  # one pin per task, none repeated
    assert len(pins.read_text().splitlines()) == len(recorded)
    baseline = json.loads((bundle / "baseline_evaluation.json").read_text())
    rows = baseline["optimize"]["tasks"] + baseline["held_out"]["tasks"]
    assert rows and all(r["image_id"] == recorded[r["task_id"]] for r in rows), rows


def test_an_image_pin_record_that_is_not_one_is_refused_naming_file_and_field(tmp_path):
    from metaeval.errors import ConfigError
    from metaeval.protocols.improve.image_pins import ImagePins

    record = tmp_path / "image_pins.jsonl"
    record.write_text('{"engine": "podman", "task": "/t", "image": "x:1"}\n{"torn": \n')
    with pytest.raises(ConfigError) as info:
        ImagePins(record)
    assert str(record) in str(info.value) and "image_id" in str(info.value)
    assert record.read_text().startswith('{"engine"')  # the record is left as it was
