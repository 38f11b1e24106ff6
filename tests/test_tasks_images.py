"""Image names (`metaeval.tasks.images`): one spelling for stand-in matching, one key for
availability, and which local images count as stand-ins on a real engine."""

from __future__ import annotations

import os

import pytest

from metaeval.sandbox.container import find_engine
from metaeval.tasks.images import (
    image_exists,
    local_image_key,
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
