"""Shared parses of shell scripts and Dockerfiles: reuse never changes a finding.

Identical files in different tasks (the same tests/test.sh boilerplate, the same
Dockerfile) are parsed once per process. These tests audit the realistic fixture tasks with a
cold cache for every task and again with a cache warmed by all the others, in both orders,
and require the same findings; and they pin what the cache key must tell apart.
"""

from __future__ import annotations

from pathlib import Path

from metaeval.protocols.audit.static.parse_cache import (
    clear_parse_cache,
    parse_cache_info,
    shared_dockerfile,
    shared_script,
)
from metaeval.protocols.audit.static_checks import run_static_checks_report
from metaeval.protocols.audit.task_view import load_task

BENCH = Path(__file__).parent / "fixtures" / "audit-real"
TASKS = sorted(
    f"{kind}/{p.name}" for kind in ("clean", "defective") for p in (BENCH / kind).iterdir()
)


def findings_of(task_id: str) -> list[dict]:
    report = run_static_checks_report(load_task(BENCH / task_id, bench_root=BENCH))
    assert report.errors == {}, report.errors
    return [f.model_dump(mode="json") for f in report.findings]


def test_warm_cache_gives_the_same_findings_as_a_cold_one() -> None:
    cold = {}
    for task_id in TASKS:
        clear_parse_cache()
        cold[task_id] = findings_of(task_id)
    clear_parse_cache()
    forward = {task_id: findings_of(task_id) for task_id in TASKS}
    backward = {task_id: findings_of(task_id) for task_id in reversed(TASKS)}
    assert forward == cold
    assert backward == cold
    hits = sum(h for h, _ in parse_cache_info().values())
    assert hits > 0  # the second pass really read from the cache
    assert any(cold.values())  # the defective tasks have findings to compare


def test_same_script_in_another_start_directory_is_parsed_again() -> None:
    clear_parse_cache()
    text = "cd data\npython3 run.py > out.txt\n"
    at_app = shared_script("tests/test.sh", text, script_path="/tests/test.sh", cwd="/app")
    at_srv = shared_script("tests/test.sh", text, script_path="/tests/test.sh", cwd="/srv")
    assert at_app is not at_srv
    assert at_app.commands[-1].simple[0].cwd == "/app/data"
    assert at_srv.commands[-1].simple[0].cwd == "/srv/data"
    again = shared_script("tests/test.sh", text, script_path="/tests/test.sh", cwd="/app")
    assert again is at_app


def test_same_text_under_another_path_keeps_its_own_file_name() -> None:
    clear_parse_cache()
    text = "pip install pytest\n"
    tests = shared_script("tests/test.sh", text, script_path="/tests/test.sh", cwd="/app")
    solve = shared_script("solution/solve.sh", text, script_path="/solution/solve.sh", cwd="/app")
    assert tests.commands[0].file == "tests/test.sh"
    assert solve.commands[0].file == "solution/solve.sh"


def test_dockerfiles_differing_in_one_line_are_not_confused() -> None:
    clear_parse_cache()
    one = shared_dockerfile("environment/Dockerfile", "FROM python:3.11-slim\nWORKDIR /app\n")
    two = shared_dockerfile("environment/Dockerfile", "FROM python:3.11-slim\nWORKDIR /srv\n")
    assert (one.workdir, two.workdir) == ("/app", "/srv")
    assert (
        shared_dockerfile("environment/Dockerfile", "FROM python:3.11-slim\nWORKDIR /app\n") is one
    )
