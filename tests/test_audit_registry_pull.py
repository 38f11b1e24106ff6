"""`audit run --pull`, for real: a registry process on 127.0.0.1 (Debian's `docker-registry`),
the offline base image pushed to it with Podman, and `metaeval audit run` as a subprocess.

Skips when Podman, the base image or /usr/bin/docker-registry is missing, unless
METAEVAL_REQUIRE_CONTAINER=1, in which case it fails (scripts/install-system-deps.sh installs
the registry, scripts/container-base-image.sh builds the base image).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from metaeval.exit_codes import CELLS_FAILED
from metaeval.sandbox.container import Engine, find_engine
from metaeval.tasks.images import image_exists, is_loopback_registry, registry_host

BASE = "localhost/metaeval-base:bookworm"
REGISTRY_BINARY = "/usr/bin/docker-registry"

TASK_TOML = """version = "1.0"

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 120.0

[environment]
allow_internet = false
docker_image = "{image}"
"""
# the oracle leaves a file the tests look for; the null agent does nothing, so it gets 0
SOLVE = "#!/bin/bash\necho solved > /tmp/solved\n"
TEST = (
    "#!/bin/bash\nmkdir -p /logs/verifier\n"
    "if [ -f /tmp/solved ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
)


def unavailable(problem: str) -> None:
    if os.environ.get("METAEVAL_REQUIRE_CONTAINER") == "1":
        pytest.fail(f"METAEVAL_REQUIRE_CONTAINER=1 but {problem}")
    pytest.skip(problem)


@pytest.fixture(scope="module")
def engine() -> Engine:
    found, why = find_engine("podman")
    if found is None:
        unavailable(why or "no podman")
    assert found is not None
    if not image_exists(found, BASE):
        unavailable(f"base image {BASE} missing (run scripts/container-base-image.sh)")
    if not os.access(REGISTRY_BINARY, os.X_OK):
        unavailable(f"{REGISTRY_BINARY} missing (apt-get install docker-registry)")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def registry(engine: Engine, tmp_path: Path) -> Iterator[str]:
    """A real registry process on 127.0.0.1, its storage under tmp_path; yields host:port."""
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {tmp_path / 'registry-data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = (tmp_path / "registry.log").open("wb")
    process = subprocess.Popen([REGISTRY_BINARY, "serve", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(
                        f"registry did not start: {(tmp_path / 'registry.log').read_text()}"
                    )
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        listed = podman(engine, "images", "--format", "{{.Repository}}:{{.Tag}}").stdout
        for ref in listed.split():  # what the test pulled from this registry
            if ref.startswith(f"127.0.0.1:{port}/"):
                podman(engine, "rmi", ref)
        process.terminate()
        process.wait(timeout=30)
        log.close()


def podman(engine: Engine, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        engine.command(*args), capture_output=True, text=True, timeout=300, check=False
    )


def write_task(bench: Path, name: str, image: str) -> None:
    task = bench / name
    (task / "tests").mkdir(parents=True)
    (task / "solution").mkdir()
    (task / "instruction.md").write_text("Leave /tmp/solved behind.\n")
    (task / "task.toml").write_text(TASK_TOML.format(image=image))
    (task / "solution" / "solve.sh").write_text(SOLVE)
    (task / "tests" / "test.sh").write_text(TEST)


def audit(bench: Path, run_dir: Path, pull: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "metaeval.cli", "audit", "run", str(bench), "--static-only"]
    argv += ["--sandbox", "podman", "--pull", pull, "-o", str(run_dir)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


def executions(run_dir: Path) -> dict[str, dict]:
    cells = [json.loads(line) for line in (run_dir / "audits.jsonl").read_text().splitlines()]
    return {c["task_id"]: c["execution"] for c in cells if c.get("source") == "static"}


def test_loopback_registries_are_told_apart() -> None:
    assert registry_host("python:3.11-slim") is None
    assert registry_host("library/python") is None
    assert registry_host("127.0.0.1:5000/a/b:1") == "127.0.0.1"
    assert registry_host("[::1]:5000/a:1") == "::1"
    assert registry_host("ghcr.io/org/image:tag") == "ghcr.io"
    loopback = ["127.0.0.1:5000/a:1", "127.8.9.1/a", "localhost:5000/a", "[::1]:5000/a:1"]
    assert all(is_loopback_registry(ref) for ref in loopback)
    others = ["ghcr.io/a/b", "10.0.0.1:5000/a", "python:3.11", "127.0.0.1.example.com/a"]
    assert not any(is_loopback_registry(ref) for ref in others)


def test_pull_missing_fetches_the_image_from_a_local_registry(
    engine: Engine, registry: str, tmp_path: Path
) -> None:
    image = f"{registry}/metaeval-test/base:1"
    absent = f"{registry}/metaeval-test/absent:1"
    pushed = podman(engine, "push", "--tls-verify=false", BASE, image)
    assert pushed.returncode == 0, pushed.stderr
    podman(engine, "rmi", image)  # the push may leave the tag locally: the pull must fetch it
    assert not image_exists(engine, image)
    bench = tmp_path / "bench"
    write_task(bench, "pulled", image)

    # --pull never (the default): the task is skipped, naming the image; nothing is pulled
    never = audit(bench, tmp_path / "never", "never")
    assert never.returncode == CELLS_FAILED, never.stderr  # an infra error, retried on resume
    skipped = executions(tmp_path / "never")["pulled"]["skipped"]
    assert (
        skipped == f"podman: image {image} is not available here (not present locally, not pulled)"
    )
    assert f"1 need an image that is not available here ({image})" in never.stdout
    assert not image_exists(engine, image)

    # --pull missing: pulled from the registry, then the oracle and the null agent run there
    write_task(bench, "not-in-registry", absent)
    started = time.monotonic()
    missing = audit(bench, tmp_path / "missing", "missing")
    took = time.monotonic() - started
    assert missing.returncode == CELLS_FAILED, missing.stderr  # the absent image: infra
    ran = executions(tmp_path / "missing")
    assert ran["pulled"]["skipped"] is None, ran["pulled"]
    assert ran["pulled"]["backend"].startswith("podman")
    assert ran["pulled"]["oracle"]["ran"] and ran["pulled"]["oracle"]["reward"] == 1
    assert ran["pulled"]["null_agent"]["ran"] and ran["pulled"]["null_agent"]["reward"] == 0
    assert image_exists(engine, image)
    # an image the registry does not have: a skip naming it and the pull's error, said once
    failed = ran["not-in-registry"]["skipped"]
    assert failed.startswith(f"podman: image {absent} could not be pulled: ")
    assert "manifest unknown" in failed.lower() or "not found" in failed.lower(), failed
    assert f"1 need an image that could not be pulled ({absent}: " in missing.stdout
    print(f"audit run --pull missing took {took:.1f} s")

    # the policy is a run setting: a rerun with another one is refused, naming it
    again = audit(bench, tmp_path / "missing", "always")
    assert again.returncode != 0
    assert "setting 'pull' changed: missing -> always" in again.stdout + again.stderr
    check_pull_always(engine, image, bench, tmp_path)


def image_id(engine: Engine, ref: str) -> str:
    done = podman(engine, "image", "inspect", "--format", "{{.Id}}", ref)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def check_pull_always(engine: Engine, image: str, bench: Path, tmp_path: Path) -> None:
    """A newer image under the same tag in the registry: `missing` keeps the held one,
    `always` fetches the new one."""
    shutil.rmtree(bench / "not-in-registry")
    held = image_id(engine, image)
    context = tmp_path / "v2"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {BASE}\nLABEL org.metaeval.test=v2\n")
    newer = "localhost/metaeval-test-v2:1"
    built = podman(engine, "build", "--pull=never", "-t", newer, str(context))
    assert built.returncode == 0, built.stderr
    try:
        pushed = podman(engine, "push", "--tls-verify=false", newer, image)
        assert pushed.returncode == 0, pushed.stderr
        kept = audit(bench, tmp_path / "missing-again", "missing")
        assert kept.returncode == 0, kept.stderr
        assert image_id(engine, image) == held  # held already: not pulled again
        write_task(bench, "local-name", BASE)  # built here, in no registry: never pulled
        always = audit(bench, tmp_path / "always", "always")
        assert always.returncode == 0, always.stderr
        assert image_id(engine, image) == image_id(engine, newer) != held
        ran = executions(tmp_path / "always")
        assert ran["pulled"]["oracle"]["reward"] == 1
        assert ran["local-name"]["skipped"] is None and ran["local-name"]["oracle"]["reward"] == 1
    finally:
        podman(engine, "rmi", newer)


def test_an_unknown_pull_policy_is_refused_naming_the_option(tmp_path: Path) -> None:
    write_task(tmp_path / "bench", "pulled", BASE)
    done = audit(tmp_path / "bench", tmp_path / "run", "sometimes")
    assert done.returncode != 0
    assert "unknown pull policy 'sometimes' (never, missing, always)" in done.stdout + done.stderr
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_an_image_pinned_by_digest_is_pulled_by_that_digest(
    engine: Engine, registry: str, tmp_path: Path
) -> None:
    # an image of its own (a label), pushed, then removed here: only the registry holds it
    context = tmp_path / "pinned"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {BASE}\nLABEL org.metaeval.test={tmp_path.name}\n")
    local = "localhost/metaeval-test-pinned:1"
    built = podman(engine, "build", "--pull=never", "-t", local, str(context))
    assert built.returncode == 0, built.stderr
    name = f"{registry}/metaeval-test/pinned"
    digest_file = tmp_path / "digest"
    pushed = podman(
        engine, "push", "--tls-verify=false", "--digestfile", str(digest_file), local, f"{name}:1"
    )
    podman(engine, "rmi", local)
    assert pushed.returncode == 0, pushed.stderr
    pinned = f"{name}@{digest_file.read_text().strip()}"
    try:
        assert not image_exists(engine, pinned)
        bench = tmp_path / "bench"
        write_task(bench, "pinned", pinned)
        done = audit(bench, tmp_path / "run", "missing")
        assert done.returncode == 0, done.stderr
        ran = executions(tmp_path / "run")["pinned"]
        assert ran["skipped"] is None, ran
        assert ran["oracle"]["reward"] == 1 and ran["null_agent"]["reward"] == 0
        assert image_exists(engine, pinned)
        assert ran["image_id"] == image_id(engine, pinned)  # the cell names what both ran
    finally:
        podman(engine, "rmi", pinned)
