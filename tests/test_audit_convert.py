"""Terminal-Bench 1 -> Harbor conversion: layout, task.toml, notes, the reward-writing test.sh."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from metaeval.agents.in_trial import TrialAgent
from metaeval.agents.registry import get_agent
from metaeval.errors import ConfigError
from metaeval.protocols.audit.task_view import load_task
from metaeval.sandbox import bwrap as bwrap_mod
from metaeval.sandbox.bwrap import bwrap_available
from metaeval.tasks.limits import trial_limits
from metaeval.tasks.rooms import BwrapBackend
from metaeval.tasks.sources.terminal_bench import convert_tb1_benchmark, convert_tb1_task
from metaeval.tasks.trial import run_trial

INSTRUCTION = (
    "Create a file named hello.txt in the working directory.\n"
    'It must contain exactly the line "Hello, world!".\n'
)

TASK_YAML = f"""# Terminal-Bench Canary String, DO NOT REMOVE:
instruction: |-
{"".join("  " + line + chr(10) for line in INSTRUCTION.splitlines())}author_name: Test Author
author_email: author@example.com
difficulty: easy
category: file-operations
tags:
  - file-operations
  - beginner
parser_name: pytest
max_agent_timeout_sec: 120
max_test_timeout_sec: 30
run_tests_in_same_shell: false
expert_time_estimate_min: 1
"""

RUN_TESTS = """#!/bin/bash
python3 "$TEST_DIR/test_outputs.py"
"""

TEST_OUTPUTS = """from pathlib import Path
import sys

path = Path("hello.txt")
if not path.is_file() or path.read_text().strip() != "Hello, world!":
    print("hello.txt is missing or wrong")
    sys.exit(1)
print("ok")
"""

SOLUTION = """#!/bin/bash
echo "Hello, world!" > hello.txt
"""

DOCKERFILE = """FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620
WORKDIR /app
COPY data.txt /app/data.txt
"""

COMPOSE = """services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
"""


def tb1_task(root: Path, **overrides: str | None) -> Path:
    files: dict[str, str | None] = {
        "task.yaml": TASK_YAML,
        "run-tests.sh": RUN_TESTS,
        "solution.sh": SOLUTION,
        "tests/test_outputs.py": TEST_OUTPUTS,
        "Dockerfile": DOCKERFILE,
        "docker-compose.yaml": COMPOSE,
        "data.txt": "some input\n",
    }
    files.update(overrides)
    for rel, text in files.items():
        if text is None:
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_converted_task_loads_with_instruction_and_layout(tmp_path: Path) -> None:
    src = tb1_task(tmp_path / "tb1" / "hello-world")
    dst = tmp_path / "harbor" / "hello-world"
    notes = convert_tb1_task(src, dst)

    task = load_task(dst, bench_root=tmp_path / "harbor")
    assert task.task_id == "hello-world"
    assert task.config_error is None and task.unknown_keys == [] and task.missing_files == []
    assert task.file("instruction.md").text == INSTRUCTION
    assert task.config["version"] == "1.0"
    assert task.config["agent"] == {"timeout_sec": 120.0}
    assert task.config["verifier"] == {"timeout_sec": 30.0}
    assert task.config["metadata"] == {
        "author_name": "Test Author",
        "author_email": "author@example.com",
        "difficulty": "easy",
        "category": "file-operations",
        "tags": ["file-operations", "beginner"],
        "expert_time_estimate_min": 1,
        "converted_from": "terminal-bench-1",
    }
    assert [f.path for f in task.files] == [
        "instruction.md",
        "task.toml",
        "tests/test.sh",
        "tests/run-tests.sh",
        "tests/test_outputs.py",
        "solution/solve.sh",
        "environment/Dockerfile",
        "environment/data.txt",
    ]  # the compose file is the standard client service: Harbor provides it
    assert task.file("solution/solve.sh").text == SOLUTION
    assert task.file("tests/run-tests.sh").text == RUN_TESTS
    assert task.file("environment/Dockerfile").text == DOCKERFILE
    test_sh = task.file("tests/test.sh").text
    assert 'bash "$TEST_DIR/run-tests.sh"' in test_sh
    assert 'echo 1 > "$LOGS_DIR/reward.txt"' in test_sh
    assert 'LOGS_DIR="/logs/verifier"' in test_sh
    assert os.access(dst / "tests" / "test.sh", os.X_OK)
    assert os.access(dst / "solution" / "solve.sh", os.X_OK)
    assert any("t-bench" in n and "base image" in n for n in notes)
    assert any(
        n.startswith("docker-compose.yaml: the standard Terminal-Bench client service")
        for n in notes
    )
    assert "copied to environment/ as build context: data.txt" in notes
    assert not any("run_tests_in_same_shell" in n for n in notes)


def _run_test_sh(task: Path, app: Path, logs: Path) -> subprocess.CompletedProcess[str]:
    """Run the generated test.sh with bash on the host, container paths swapped for temp dirs."""
    script = (task / "tests" / "test.sh").read_text().replace("/logs/verifier", str(logs))
    # the task's python3 is the running interpreter (CI's PATH has no python at all)
    path = os.pathsep.join(
        [os.path.dirname(sys.executable), os.environ.get("PATH", "/usr/bin:/bin")]
    )
    env = {"PATH": path, "TEST_DIR": str(task / "tests")}
    return subprocess.run(
        ["bash", "-c", script], cwd=app, env=env, capture_output=True, text=True, timeout=60
    )


def test_generated_test_sh_writes_reward_from_run_tests_status(tmp_path: Path) -> None:
    dst = tmp_path / "harbor"
    convert_tb1_task(tb1_task(tmp_path / "tb1"), dst)

    app, logs = tmp_path / "app", tmp_path / "logs"
    app.mkdir()
    logs.mkdir()
    done = _run_test_sh(dst, app, logs)  # nothing solved yet
    assert done.returncode == 0
    assert (logs / "reward.txt").read_text().strip() == "0"
    assert "run-tests exit status: 1" in done.stdout

    subprocess.run(["bash", str(dst / "solution" / "solve.sh")], cwd=app, check=True)
    done = _run_test_sh(dst, app, logs)
    assert (logs / "reward.txt").read_text().strip() == "1", done.stdout + done.stderr


@pytest.mark.bwrap
def test_converted_task_runs_in_the_container_like_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    if not bwrap_available():
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail("METAEVAL_REQUIRE_BWRAP=1 but bubblewrap cannot run here")
        pytest.skip("bubblewrap (bwrap) is not usable on this machine")
    dst = tmp_path / "harbor"
    convert_tb1_task(tb1_task(tmp_path / "tb1"), dst)
    limits = trial_limits(load_task(dst, bench_root=tmp_path).config)
    for name, expected in (("null", 0.0), ("oracle", 1.0)):
        (tmp_path / name).mkdir()
        agent = TrialAgent(get_agent(name))
        trial = run_trial(dst, BwrapBackend(), limits=limits, scratch=tmp_path / name, agent=agent)
        assert trial.solve is None or trial.solve.ok, trial.log
        assert trial.test is not None and trial.test.ok, trial.log
        assert (trial.reward, trial.reward_source) == (expected, "reward.txt"), trial.log


def test_descriptions_form_and_solution_yaml(tmp_path: Path) -> None:
    task_yaml = """descriptions:
  - key: base
    description: Print the date.
  - key: hard
    description: Print the date in ISO format.
difficulty: medium
run_tests_in_same_shell: true
parser_name: swebench
colour: red
"""
    solution_yaml = """- command: date > out.txt
  min_timeout_sec: 0.1
- command: cat out.txt
"""
    src = tb1_task(
        tmp_path / "tb1",
        **{
            "task.yaml": task_yaml,
            "solution.sh": None,
            "solution.yaml": solution_yaml,
            "run-tests.sh": None,
            "docker-compose.yaml": None,
        },
    )
    dst = tmp_path / "harbor"
    notes = convert_tb1_task(src, dst)
    task = load_task(dst, bench_root=tmp_path)
    assert task.file("instruction.md").text == "Print the date.\n"
    solve = task.file("solution/solve.sh").text
    assert solve.startswith("#!/bin/bash\n")
    assert solve.endswith("date > out.txt\ncat out.txt\n")
    assert task.config["agent"] == {"timeout_sec": 360.0}  # TB1 defaults written out
    assert task.config["verifier"] == {"timeout_sec": 60.0}
    assert "pytest" in task.file("tests/run-tests.sh").text
    joined = "\n".join(notes)
    for fragment in (
        "2 descriptions (base, hard)",
        "run_tests_in_same_shell is true",
        "parser_name 'swebench' not mapped",
        "unknown key 'colour' not mapped",
        "max_agent_timeout_sec not set",
        "solution.yaml: block/min_timeout_sec/append_enter",
        "no run-tests.sh",
    ):
        assert fragment in joined, fragment


@pytest.mark.parametrize(
    ("task_yaml", "field"),
    [
        ("- just\n- a list\n", None),
        ("author_name: x\ndifficulty: easy\n", "instruction"),
        ("instruction: ''\n", "instruction"),
        ("instruction: hi\nmax_agent_timeout_sec: soon\n", "max_agent_timeout_sec"),
        ("instruction: hi\nmax_test_timeout_sec: -5\n", "max_test_timeout_sec"),
        ("instruction: hi\ntags: file-ops\n", "tags"),
        ("instruction: hi\nrun_tests_in_same_shell: sometimes\n", "run_tests_in_same_shell"),
        ("descriptions: [{key: base}]\n", "descriptions[0]"),
        ("instruction: [unclosed\n", None),
    ],
)
def test_malformed_task_yaml_raises_config_error(
    tmp_path: Path, task_yaml: str, field: str | None
) -> None:
    src = tb1_task(tmp_path / "tb1", **{"task.yaml": task_yaml})
    with pytest.raises(ConfigError) as info:
        convert_tb1_task(src, tmp_path / "out")
    assert info.value.field == field
    assert info.value.file == str(src / "task.yaml")
    assert "task.yaml" in str(info.value)
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_malformed_solution_yaml(tmp_path: Path) -> None:
    src = tb1_task(
        tmp_path / "tb1", **{"solution.sh": None, "solution.yaml": "- command: ls\n- 42\n"}
    )
    with pytest.raises(ConfigError) as info:
        convert_tb1_task(src, tmp_path / "out")
    assert info.value.field == "[1].command"
    assert info.value.file.endswith("solution.yaml")


def test_destination_must_be_new_or_empty(tmp_path: Path) -> None:
    src = tb1_task(tmp_path / "tb1")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    with pytest.raises(ConfigError, match="not an empty directory"):
        convert_tb1_task(src, tmp_path / "out")
    assert (tmp_path / "out" / "keep.txt").read_text() == "x"
    convert_tb1_task(src, tmp_path / "empty-is-fine")


def test_missing_files_are_noted(tmp_path: Path) -> None:
    src = tb1_task(
        tmp_path / "tb1",
        **{"solution.sh": None, "Dockerfile": None, "docker-compose.yaml": None, "data.txt": None},
    )
    shutil.rmtree(src / "tests")
    notes = convert_tb1_task(src, tmp_path / "out")
    assert "no solution.sh or solution.yaml: solution/solve.sh not written" in notes
    assert "no Dockerfile: environment/ has no image definition" in notes
    assert "no tests/ directory in the source task" in notes
    task = load_task(tmp_path / "out", bench_root=tmp_path)
    assert task.missing_files == ["solution/solve.sh"]
    assert task.file("tests/test.sh") is not None


def test_convert_benchmark_keeps_going_past_a_bad_task(tmp_path: Path) -> None:
    src_root = tmp_path / "tb1"
    tb1_task(src_root / "good")
    tb1_task(src_root / "nested" / "also-good")
    tb1_task(src_root / "bad", **{"task.yaml": "instruction: hi\nmax_test_timeout_sec: x\n"})
    (src_root / "not-a-task").mkdir()
    results = convert_tb1_benchmark(src_root, tmp_path / "harbor")
    assert sorted(results) == ["bad", "good", "nested/also-good"]
    assert results["bad"][0].startswith("not converted: ")
    assert "max_test_timeout_sec" in results["bad"][0]
    assert not (tmp_path / "harbor" / "bad").exists()
    assert load_task(
        tmp_path / "harbor" / "nested" / "also-good", bench_root=tmp_path / "harbor"
    ).task_id == ("nested/also-good")
    with pytest.raises(ConfigError):
        convert_tb1_benchmark(src_root, tmp_path / "strict", strict=True)


# The client-service template Terminal-Bench 1 shipped with every task (written out here),
# and shapes that go beyond it.
TEMPLATE_COMPOSE = """# You usually don't need to modify anything in this file.

services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
      - ${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}
"""
OFFLINE_COMPOSE = TEMPLATE_COMPOSE.replace(
    "    environment:\n      - TEST_DIR=${T_BENCH_TEST_DIR}\n",
    "    network_mode: none\n    environment:\n      - TEST_DIR=${T_BENCH_TEST_DIR}\n"
    "      - PYTHONHASHSEED=0\n      - TZ=UTC\n",
)
SIDECAR_COMPOSE = (
    TEMPLATE_COMPOSE
    + """  redis:
    image: redis:7
"""
)
HOST_VALUE_COMPOSE = TEMPLATE_COMPOSE.replace(
    "      - TEST_DIR=${T_BENCH_TEST_DIR}\n",
    "      - TEST_DIR=${T_BENCH_TEST_DIR}\n      - OPENAI_API_KEY\n",
)
PORTS_COMPOSE = TEMPLATE_COMPOSE + '    ports:\n      - "8080:8080"\n'


def test_the_template_compose_file_is_left_to_harbor(tmp_path: Path) -> None:
    dst = tmp_path / "harbor" / "t"
    convert_tb1_task(
        tb1_task(tmp_path / "tb1" / "t", **{"docker-compose.yaml": TEMPLATE_COMPOSE}), dst
    )
    assert not (dst / "environment" / "docker-compose.yaml").exists()
    task = load_task(dst, bench_root=dst.parent)
    assert "env" not in task.config.get("environment", {})


def test_the_templates_variables_and_no_network_move_into_task_toml(tmp_path: Path) -> None:
    dst = tmp_path / "harbor" / "t"
    notes = convert_tb1_task(
        tb1_task(tmp_path / "tb1" / "t", **{"docker-compose.yaml": OFFLINE_COMPOSE}), dst
    )
    assert not (dst / "environment" / "docker-compose.yaml").exists()
    task = load_task(dst, bench_root=dst.parent)
    assert task.config_error is None and task.unknown_keys == []
    assert task.config["environment"] == {
        "allow_internet": False,
        "env": {"PYTHONHASHSEED": "0", "TZ": "UTC"},
    }
    assert (
        "docker-compose.yaml: its variables (PYTHONHASHSEED, TZ) became [environment.env]" in notes
    )


@pytest.mark.parametrize(
    "compose", [SIDECAR_COMPOSE, HOST_VALUE_COMPOSE, PORTS_COMPOSE, "services: [\n"]
)
def test_anything_beyond_the_template_is_kept_for_review(tmp_path: Path, compose: str) -> None:
    dst = tmp_path / "harbor" / "t"
    notes = convert_tb1_task(
        tb1_task(tmp_path / "tb1" / "t", **{"docker-compose.yaml": compose}), dst
    )
    assert (dst / "environment" / "docker-compose.yaml").read_text() == compose
    assert any(n.startswith("docker-compose.yaml: copied as is") for n in notes)
    assert "env" not in load_task(dst, bench_root=dst.parent).config.get("environment", {})


# --------------------------------------------------------------------------- duplicate keys
# Python's YAML loader keeps the last of two equal keys without a word; every YAML file of
# a source task is read with the strict loader of `metaeval.config_files` instead.


def test_a_key_given_twice_in_task_yaml_is_refused(tmp_path: Path) -> None:
    src = tb1_task(tmp_path / "tb1", **{"task.yaml": TASK_YAML + "max_test_timeout_sec: 300\n"})
    with pytest.raises(ConfigError) as info:
        convert_tb1_task(src, tmp_path / "out")
    assert info.value.file == str(src / "task.yaml")
    # TASK_YAML has 16 lines: the repeated key is line 17
    assert "line 17, column 1: found duplicate key 'max_test_timeout_sec'" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_a_key_given_twice_in_solution_yaml_is_refused(tmp_path: Path) -> None:
    solution_yaml = "- command: ls\n  block: true\n  block: false\n"
    src = tb1_task(tmp_path / "tb1", **{"solution.sh": None, "solution.yaml": solution_yaml})
    with pytest.raises(ConfigError) as info:
        convert_tb1_task(src, tmp_path / "out")
    assert info.value.file == str(src / "solution.yaml")
    assert "line 3, column 3: found duplicate key 'block'" in str(info.value)


def test_a_compose_file_with_a_key_given_twice_is_kept_for_review(tmp_path: Path) -> None:
    # read loosely, the last network_mode (none) would make this the offline template and
    # move "no network" into task.toml; Docker Compose itself refuses the file
    compose = TEMPLATE_COMPOSE + "    network_mode: bridge\n    network_mode: none\n"
    dst = tmp_path / "harbor" / "t"
    notes = convert_tb1_task(
        tb1_task(tmp_path / "tb1" / "t", **{"docker-compose.yaml": compose}), dst
    )
    assert (dst / "environment" / "docker-compose.yaml").read_text() == compose
    assert any(n.startswith("docker-compose.yaml: copied as is") for n in notes)
    assert "network_mode" not in load_task(dst, bench_root=dst.parent).config.get("environment", {})


def test_convert_command_exits_2_naming_the_file_with_a_key_given_twice(tmp_path: Path) -> None:
    src = tb1_task(tmp_path / "tb1", **{"task.yaml": TASK_YAML + "difficulty: hard\n"})
    result = subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "audit", "convert", str(src), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    message = " ".join(result.stderr.split())  # the console may wrap a long path
    assert str(src / "task.yaml") in message and "duplicate key 'difficulty'" in message
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
