"""One `Environment` (issue 42, item 1): a bubblewrap workspace, a Harbor task's root and a
trial room's agent phase (bubblewrap and Podman) answer exec, read_file, write_file and close
alike, with the same errors for a path that leaves them or a file that is not a regular file.

Real parts: bubblewrap for the sandboxed ones, Podman (runc) with the offline base image
scripts/container-base-image.sh tags python:3.11-slim for the container (skipped without it
unless METAEVAL_REQUIRE_CONTAINER=1).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from metaeval.sandbox import bwrap as bwrap_mod
from metaeval.sandbox.container import find_engine
from metaeval.sandbox.environment import Environment, PathEscapeError, WorkspaceError
from metaeval.sandbox.workspace import Workspace
from metaeval.tasks.harbor_root import harbor_sandbox_unavailable
from metaeval.tasks.images import ensure_image, image_exists
from metaeval.tasks.limits import trial_limits
from metaeval.tasks.rooms import BwrapBackend, ContainerBackend
from metaeval.tasks.task_workspace import TaskRootWorkspace
from metaeval.tasks.trial import Backend

IMAGE = "python:3.11-slim"
KINDS = ["workspace", "task-root", "bwrap-room", "podman-room"]


def need_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    reason = harbor_sandbox_unavailable()
    if reason is not None:
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_BWRAP=1 but {reason}")
        pytest.skip(reason)


def write_task(task: Path) -> Path:
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n")
    (task / "task.toml").write_text('version = "1.0"\n[environment]\nallow_internet = false\n')
    (task / "environment").mkdir()
    (task / "environment" / "Dockerfile").write_text(f"FROM {IMAGE}\nWORKDIR /app\n")
    return task


def podman_backend(task: Path) -> Backend:
    """A backend on the task's own image (built from its Dockerfile, offline)."""
    found, problem = find_engine("podman")
    if found is not None and not image_exists(found, IMAGE):
        problem = f"base image {IMAGE} missing (run scripts/container-base-image.sh)"
    if problem or found is None:
        if os.environ.get("METAEVAL_REQUIRE_CONTAINER") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_CONTAINER=1 but {problem}")
        pytest.skip(problem or "no podman")
    built = ensure_image(found, task, None, timeout_s=300)
    assert built.status == "ok" and built.image is not None, built.log
    return ContainerBackend(found, built.image)


def room_env(backend: Backend, tmp_path: Path) -> Iterator[Environment]:
    task = tmp_path / "task"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    limits = trial_limits(tomllib.loads((task / "task.toml").read_text()))
    with backend.open(task, scratch, limits) as room:
        yield room.agent_env()


@pytest.fixture(params=KINDS)
def env(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Environment]:
    kind = request.param
    need_bwrap(monkeypatch)
    if kind == "workspace":
        yield Workspace.create(tmp_path / "ws")
    elif kind == "task-root":
        (tmp_path / "app").mkdir()
        (tmp_path / "logs").mkdir()
        yield TaskRootWorkspace(tmp_path / "app", tmp_path / "logs")
    elif kind == "bwrap-room":
        write_task(tmp_path / "task")
        yield from room_env(BwrapBackend(), tmp_path)
    else:
        yield from room_env(podman_backend(write_task(tmp_path / "task")), tmp_path)


def test_every_kind_is_an_environment(env: Environment) -> None:
    assert isinstance(env, Environment)


def test_a_written_file_is_read_back_and_seen_by_commands(env: Environment) -> None:
    shown = env.write_file("notes/plan.txt", b"first line\n")
    assert shown.endswith("notes/plan.txt")
    assert env.read_file("notes/plan.txt") == b"first line\n"
    done = env.exec("cat notes/plan.txt && echo second >> notes/plan.txt", timeout_s=60)
    assert done.returncode == 0 and done.stdout == "first line\n", done.stderr
    assert env.read_file("notes/plan.txt") == b"first line\nsecond\n"


def test_variables_reach_one_command(env: Environment) -> None:
    done = env.exec('echo "[$GREETING]"', timeout_s=60, env={"GREETING": "hello there"})
    assert done.stdout == "[hello there]\n"
    assert env.exec('echo "[$GREETING]"', timeout_s=60).stdout == "[]\n"


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/metaeval-outside.txt"])
def test_a_path_leaving_the_environment_is_refused(env: Environment, path: str) -> None:
    with pytest.raises(PathEscapeError):
        env.write_file(path, b"x")
    with pytest.raises(PathEscapeError):
        env.read_file(path)


def test_a_missing_file_or_a_directory_is_a_workspace_error(env: Environment) -> None:
    env.exec("mkdir -p made", timeout_s=60)
    for path in ("missing.txt", "made"):
        with pytest.raises(WorkspaceError):
            env.read_file(path)
    with pytest.raises(WorkspaceError):
        env.write_file("made", b"x")


@pytest.mark.parametrize(
    "make", ["ln -s /etc/passwd link.txt", "mkfifo link.txt", "ln -s /etc link.txt"]
)
def test_links_out_and_special_files_are_never_read(env: Environment, make: str) -> None:
    done = env.exec(make, timeout_s=60)
    assert done.returncode == 0, done.stderr
    with pytest.raises(WorkspaceError):
        env.read_file("link.txt")


def test_the_agent_phase_of_a_room_never_writes_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In bubblewrap /app is a host directory: a link the agent made there must not carry a
    write_file onto the host."""
    need_bwrap(monkeypatch)
    target = tmp_path / "host-file.txt"
    target.write_text("host\n")
    write_task(tmp_path / "task")
    for room in room_env(BwrapBackend(), tmp_path):
        room.exec(f"ln -s {target} out.txt && ln -s {tmp_path} dir", timeout_s=60)
        for path in ("out.txt", "dir/host-file.txt"):
            with pytest.raises(PathEscapeError):
                room.write_file(path, b"forged\n")
    assert target.read_text() == "host\n"


def test_the_task_root_shows_files_at_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_bwrap(monkeypatch)
    (tmp_path / "app").mkdir()
    (tmp_path / "logs").mkdir()
    env = TaskRootWorkspace(tmp_path / "app", tmp_path / "logs")
    assert env.write_file("/app/answer.txt", b"42\n") == "/app/answer.txt"
    assert env.exec("cat /app/answer.txt", timeout_s=60).stdout == "42\n"
    assert env.read_file("/app/answer.txt") == b"42\n"


def test_files_are_listed_searched_and_read_alike(env: Environment) -> None:
    """The file tools' views (`metaeval.sandbox.file_views`): the same answers whether the
    environment reads a host directory or runs commands inside."""
    env.write_file("src/a.txt", b"alpha\nbeta\n")
    env.write_file("b.txt", b"gamma beta\n")
    assert {"src/", "b.txt"} <= set(env.list_dir("."))
    assert env.list_dir("src") == ["a.txt"]
    assert sorted(env.grep("be+ta", ".", 10).hits) == ["b.txt:1:gamma beta", "src/a.txt:2:beta"]
    assert env.grep("zeta", ".", 10).hits == []
    head = env.read_head("src/a.txt", 3)
    assert (head.data, head.longer, head.path) == (b"alp", True, "src/a.txt")
    assert {"b.txt", "src/a.txt"} <= set(env.list_files())
    assert "src" not in env.list_files()  # directories are not files
