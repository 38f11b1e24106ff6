"""Image names (`metaeval.tasks.images`): one spelling for stand-in matching, one key for
availability, and which local images count as stand-ins on a real engine."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from metaeval.sandbox.container import find_engine
from metaeval.tasks.images import (
    build_network,
    ensure_image,
    image_exists,
    local_image_key,
    pull_image,
    short_image_name,
    stand_in_images,
)


@pytest.mark.parametrize(
    ("ref", "short", "key"),
    [
        ("python:3.11-slim", "python:3.11-slim", "python:3.11-slim"),
        ("docker.io/library/python:3.11-slim", "python:3.11-slim", "python:3.11-slim"),
        ("library/python:3.11-slim", "python:3.11-slim", "python:3.11-slim"),
        ("docker.io/bitnami/redis", "bitnami/redis:latest", "bitnami/redis:latest"),
        ("python", "python:latest", "python:latest"),
        ("ghcr.io/org/tool:1.2", "ghcr.io/org/tool:1.2", "ghcr.io/org/tool:1.2"),
        (
            "registry:5000/team/app",
            "registry:5000/team/app:latest",
            "registry:5000/team/app:latest",
        ),
        ("python@sha256:" + "a" * 64, "python@sha256:" + "a" * 64, "python@sha256:" + "a" * 64),
        # podman's spelling of a locally tagged image: the same image for availability, but
        # a name of its own for stand-in matching
        ("localhost/python:3.11-slim", "localhost/python:3.11-slim", "python:3.11-slim"),
        (
            "localhost/metaeval-base:bookworm",
            "localhost/metaeval-base:bookworm",
            "metaeval-base:bookworm",
        ),
    ],
)
def test_image_names(ref: str, short: str, key: str) -> None:
    assert short_image_name(ref) == short
    assert local_image_key(ref) == key


@pytest.fixture(scope="module")
def engine():
    found, problem = find_engine("podman")
    if found is not None and not image_exists(found, "localhost/metaeval-base:bookworm"):
        problem = "the offline base image is missing (run scripts/container-base-image.sh)"
    if problem:
        if os.environ.get("METAEVAL_REQUIRE_CONTAINER") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_CONTAINER=1 but {problem}")
        pytest.skip(problem)
    return found


def test_which_local_images_count_as_stand_ins(engine) -> None:
    # scripts/container-base-image.sh labels localhost/metaeval-base:bookworm as a stand-in
    # for python:3.11-slim (and others) and tags it with those names
    refs = [
        "python:3.11-slim",
        "debian:bookworm",
        "localhost/metaeval-base:bookworm",  # the image under its own name: the real thing
        "localhost/python:3.11-slim",  # spelt with localhost/: not matched (see short_image_name)
    ]
    assert stand_in_images(engine, refs) == refs[:2]


def test_an_image_name_starting_with_a_dash_is_never_an_option(engine) -> None:
    # without `--`, podman reads "--help" as its own option and answers 0 ("exists", "pulled")
    assert not image_exists(engine, "--help")
    assert pull_image(engine, "--help", timeout_s=60) is not None
    assert not image_exists(engine, "-q")


# a build step that passes only where the build has no network interface but loopback
OFFLINE_PROBE = 'RUN test "$(ls /sys/class/net)" = "lo"'


@pytest.mark.parametrize(("setting", "offline"), [("allow_internet = false", True), ("", False)])
def test_an_image_build_gets_no_network_when_the_task_denies_it(
    engine, tmp_path: Path, setting: str, offline: bool
) -> None:
    task = tmp_path / "task"
    (task / "environment").mkdir(parents=True)
    (task / "task.toml").write_text(f'version = "1.0"\n\n[environment]\n{setting}\n')
    # the setting in the Dockerfile too: each case builds its own image (tags are by content)
    (task / "environment" / "Dockerfile").write_text(
        f"FROM localhost/metaeval-base:bookworm\n# {setting or 'default'}\n{OFFLINE_PROBE}\n"
    )
    config = tomllib.loads((task / "task.toml").read_text())
    assert build_network(config) is not offline
    outcome = ensure_image(engine, task, None, network=build_network(config))
    try:
        assert outcome.status == ("ok" if offline else "task"), outcome.log
    finally:
        if outcome.image:
            subprocess.run(engine.command("rmi", outcome.image), capture_output=True, check=False)


def test_trials_run_the_image_id_resolved_once_not_a_tag_moved_since(engine, tmp_path) -> None:
    from metaeval.sandbox.container import Container, Limits

    task = tmp_path / "task"
    (task / "environment").mkdir(parents=True)
    marker = f"first-{tmp_path.name}"
    (task / "environment" / "Dockerfile").write_text(
        f"FROM localhost/metaeval-base:bookworm\nRUN echo {marker} > /marker\n"
    )
    other = tmp_path / "other"
    other.mkdir()
    (other / "Dockerfile").write_text(
        "FROM localhost/metaeval-base:bookworm\nRUN echo moved > /marker\n"
    )
    outcome = ensure_image(engine, task, None)
    moved = "localhost/metaeval-test-moved:1"
    try:
        assert outcome.status == "ok" and outcome.image and outcome.image_id, outcome.log
        assert outcome.run_ref == outcome.image_id != outcome.image
        built = subprocess.run(
            engine.command("build", "--pull=never", "-t", moved, str(other)),
            capture_output=True,
            check=False,
        )
        assert built.returncode == 0, built.stderr
        # the tag moves to another image, as a registry pull or a rebuild would move it
        subprocess.run(engine.command("tag", moved, outcome.image), check=True)

        def marker_in(ref: str) -> str:
            container = Container(engine, ref, Limits(network=False))
            try:
                return container.exec("cat /marker", timeout_s=60).stdout.strip()
            finally:
                container.remove()

        assert marker_in(outcome.image) == "moved"  # the tag now names the other image
        assert marker_in(outcome.run_ref) == marker  # what trials run did not move
    finally:
        for ref in (outcome.image_id, moved, outcome.image):
            if ref:
                subprocess.run(engine.command("rmi", "-f", ref), capture_output=True, check=False)
