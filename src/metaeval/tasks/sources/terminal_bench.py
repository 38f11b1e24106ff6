"""Convert Terminal-Bench 1 tasks into the Harbor layout the audit loader reads.

A Terminal-Bench 1 task directory holds `task.yaml` (the instruction, or an older
`descriptions` list, plus metadata and timeouts), `run-tests.sh` (optional),
`solution.sh` or `solution.yaml`, `tests/`, a `Dockerfile` and `docker-compose.yaml`, and
whatever else the Dockerfile copies into the image. The Harbor layout written here:

    task.toml            metadata, [verifier]/[agent] timeout_sec from the TB1 timeouts
    instruction.md       the instruction text, unchanged
    tests/test.sh        runs the original run-tests.sh, writes /logs/verifier/reward.txt
    tests/run-tests.sh   the original runner, next to the original tests/ files
    solution/solve.sh    solution.sh, or the commands of solution.yaml in order
    environment/         Dockerfile and the rest of the build context (plus the task files
                         above that the Dockerfile copies: TB1's context is the whole task);
                         docker-compose.yaml
                         only when it is more than the standard client-service template
                         (whose variables and `network_mode: none` go into task.toml)

Whatever has no Harbor equivalent is reported in the returned notes rather than dropped
silently. A malformed task.yaml or solution.yaml raises ConfigError naming file and field.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import Any

from metaeval.config_files import parse_yaml
from metaeval.errors import ConfigError
from metaeval.tasks.sources.tb1_environment import (
    read_source,
    special_files,
    toml_value,
    write_environment,
)

TB1_DEFAULT_AGENT_TIMEOUT = 360.0
TB1_DEFAULT_TEST_TIMEOUT = 60.0

TB1_KEYS = frozenset(
    {
        "instruction",
        "descriptions",
        "author_name",
        "author_email",
        "difficulty",
        "category",
        "tags",
        "parser_name",
        "max_agent_timeout_sec",
        "max_test_timeout_sec",
        "run_tests_in_same_shell",
        "disable_asciinema",
        "estimated_duration_sec",
        "expert_time_estimate_min",
        "junior_time_estimate_min",
    }
)
_METADATA_KEYS = (
    "author_name",
    "author_email",
    "difficulty",
    "category",
    "tags",
    "estimated_duration_sec",
    "expert_time_estimate_min",
    "junior_time_estimate_min",
)


TEST_SH = """#!/bin/bash
# Harbor verifier written by metaeval's Terminal-Bench 1 converter.
# It runs the task's original {runner} and turns its exit status into the reward
# Harbor reads: 1 when the runner succeeds, 0 otherwise.
export TEST_DIR="${{TEST_DIR:-/tests}}"
LOGS_DIR="/logs/verifier"
mkdir -p "$LOGS_DIR"

bash "$TEST_DIR/{runner}"
status=$?

if [ "$status" -eq 0 ]; then
  echo 1 > "$LOGS_DIR/reward.txt"
else
  echo 0 > "$LOGS_DIR/reward.txt"
fi
echo "run-tests exit status: $status"
exit 0
"""

DEFAULT_RUN_TESTS = """#!/bin/bash
# Written by metaeval's Terminal-Bench 1 converter: the task had no run-tests.sh, so this
# does what the Terminal-Bench 1 harness did by default, run pytest on the task's tests.
python3 -m pytest "$TEST_DIR/test_outputs.py" -rA
"""


def convert_tb1_task(src: Path, dst: Path) -> list[str]:
    """Write the Harbor form of the Terminal-Bench 1 task at `src` into `dst`.

    `dst` must not exist or be an empty directory. Returns notes on everything that could
    not be mapped exactly (empty when the conversion is faithful).
    """
    src = Path(src)
    dst = Path(dst)
    task_yaml = src / "task.yaml"
    if not task_yaml.is_file():
        raise ConfigError("not a Terminal-Bench 1 task: task.yaml not found", file=str(task_yaml))
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise ConfigError("destination exists and is not an empty directory", file=str(dst))
    data = _read_task_yaml(task_yaml)
    notes: list[str] = []
    instruction = _instruction(data, str(task_yaml), notes)
    config = _task_toml(data, str(task_yaml), notes)
    solution = _solution_script(src, notes)

    dst.mkdir(parents=True, exist_ok=True)
    (dst / "task.toml").write_text(config, encoding="utf-8")
    (dst / "instruction.md").write_text(instruction.rstrip("\n") + "\n", encoding="utf-8")
    _write_tests(src, dst, data, notes)
    if solution is not None:
        (dst / "solution").mkdir()
        _write_script(dst / "solution" / "solve.sh", solution)
    write_environment(src, dst, notes)
    return notes


def convert_tb1_benchmark(
    src_root: Path, dst_root: Path, *, strict: bool = False
) -> dict[str, list[str]]:
    """Convert every Terminal-Bench 1 task below `src_root` (directories with task.yaml).

    Task ids (paths relative to `src_root`) keep their place under `dst_root`. Returns the
    notes per task id. A task that cannot be converted raises ConfigError when `strict`;
    otherwise its partial output is removed and its notes start with "not converted:".
    """
    src_root = Path(src_root)
    if not src_root.is_dir():
        raise ConfigError("source benchmark directory not found", file=str(src_root))
    results: dict[str, list[str]] = {}
    for task_dir in _tb1_task_dirs(src_root):
        task_id = task_dir.relative_to(src_root).as_posix()
        target = Path(dst_root) / task_id
        fresh = not target.exists()
        try:
            results[task_id] = convert_tb1_task(task_dir, target)
        except (ConfigError, OSError) as exc:
            if strict:
                raise
            if fresh and target.exists():
                shutil.rmtree(target, ignore_errors=True)
            results[task_id] = [f"not converted: {exc}"]
    return results


def _tb1_task_dirs(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if "task.yaml" in filenames and Path(dirpath) != root:
            found.append(Path(dirpath))
            dirnames[:] = []
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


# --------------------------------------------------------------------------- task.yaml


def _read_task_yaml(path: Path) -> dict[str, Any]:
    data = parse_yaml(read_source(path), str(path))
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top level", file=str(path))
    return data


def _instruction(data: dict[str, Any], where: str, notes: list[str]) -> str:
    if "instruction" in data:
        text = data["instruction"]
        if not isinstance(text, str) or not text.strip():
            raise ConfigError("expected non-empty text", file=where, field="instruction")
        return text
    descriptions = data.get("descriptions")
    if descriptions is None:
        raise ConfigError(
            "missing (no instruction or descriptions)", file=where, field="instruction"
        )
    if not isinstance(descriptions, list) or not descriptions:
        raise ConfigError("expected a non-empty list", file=where, field="descriptions")
    chosen: str | None = None
    for index, entry in enumerate(descriptions):
        if not isinstance(entry, dict) or not isinstance(entry.get("description"), str):
            raise ConfigError(
                "expected a mapping with a 'description' text",
                file=where,
                field=f"descriptions[{index}]",
            )
        if entry.get("key", "base") == "base" and chosen is None:
            chosen = entry["description"]
    if chosen is None:
        chosen = descriptions[0]["description"]
        notes.append("task.yaml: no 'base' description; used the first one")
    if len(descriptions) > 1:
        keys = [str(e.get("key", "base")) for e in descriptions]
        notes.append(
            f"task.yaml: {len(descriptions)} descriptions ({', '.join(keys)}); Harbor has one "
            "instruction, so only the base description was kept"
        )
    return chosen


def _number(data: dict[str, Any], key: str, where: str, default: float, notes: list[str]) -> float:
    if key not in data or data[key] is None:
        notes.append(
            f"task.yaml: {key} not set; wrote Terminal-Bench 1's default {default:g} s "
            "(Harbor's own default differs)"
        )
        return default
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError("expected a number of seconds", file=where, field=key)
    if not math.isfinite(value) or value <= 0:
        raise ConfigError("expected a positive number of seconds", file=where, field=key)
    return float(value)


def _task_toml(data: dict[str, Any], where: str, notes: list[str]) -> str:
    metadata: dict[str, Any] = {}
    for key in _METADATA_KEYS:
        if key not in data or data[key] is None:
            continue
        value = data[key]
        if key == "tags":
            if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
                raise ConfigError("expected a list of strings", file=where, field="tags")
        elif key in ("author_name", "author_email", "difficulty", "category"):
            if not isinstance(value, str):
                raise ConfigError("expected text", file=where, field=key)
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError("expected a number", file=where, field=key)
        metadata[key] = value
    metadata["converted_from"] = "terminal-bench-1"
    agent_timeout = _number(data, "max_agent_timeout_sec", where, TB1_DEFAULT_AGENT_TIMEOUT, notes)
    test_timeout = _number(data, "max_test_timeout_sec", where, TB1_DEFAULT_TEST_TIMEOUT, notes)

    same_shell = data.get("run_tests_in_same_shell", False)
    if not isinstance(same_shell, bool):
        raise ConfigError("expected true or false", file=where, field="run_tests_in_same_shell")
    if same_shell:
        notes.append(
            "task.yaml: run_tests_in_same_shell is true, but Harbor runs tests/test.sh in a "
            "fresh shell; tests that check shell state of the agent's session will differ"
        )
    parser = data.get("parser_name", "pytest")
    if parser != "pytest":
        notes.append(
            f"task.yaml: parser_name '{parser}' not mapped; the reward is the exit status of "
            "run-tests.sh instead of that parser's verdict"
        )
    if data.get("disable_asciinema"):
        notes.append("task.yaml: disable_asciinema has no Harbor equivalent; ignored")
    for key in sorted(set(data) - TB1_KEYS, key=str):
        notes.append(f"task.yaml: unknown key '{key}' not mapped")

    lines = ['version = "1.0"', "", "[metadata]"]
    lines += [f"{key} = {toml_value(value)}" for key, value in metadata.items()]
    lines += ["", "[verifier]", f"timeout_sec = {toml_value(test_timeout)}"]
    lines += ["", "[agent]", f"timeout_sec = {toml_value(agent_timeout)}", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- files


def _solution_script(src: Path, notes: list[str]) -> str | None:
    sh = src / "solution.sh"
    if sh.is_file():
        return read_source(sh)
    yml = src / "solution.yaml"
    if not yml.is_file():
        notes.append("no solution.sh or solution.yaml: solution/solve.sh not written")
        return None
    where = str(yml)
    data = parse_yaml(read_source(yml), where)
    if not isinstance(data, list):
        raise ConfigError("expected a list of commands", file=where)
    commands: list[str] = []
    dropped = False
    for index, entry in enumerate(data):
        if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
            raise ConfigError(
                "expected a mapping with a 'command' text", file=where, field=f"[{index}].command"
            )
        commands.append(entry["command"].rstrip("\n"))
        if entry.get("block", True) is False or "min_timeout_sec" in entry:
            dropped = True
        if entry.get("append_enter", True) is False:
            dropped = True
    if dropped:
        notes.append(
            "solution.yaml: block/min_timeout_sec/append_enter settings have no Harbor "
            "equivalent; the commands run one after another in solve.sh"
        )
    header = [
        "#!/bin/bash",
        "# Written by metaeval's Terminal-Bench 1 converter from solution.yaml:",
        "# the commands the oracle typed into the terminal, in order.",
    ]
    return "\n".join([*header, *commands]) + "\n"


def _write_script(path: Path, text: str) -> None:
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    path.chmod(0o755)


def _write_tests(src: Path, dst: Path, data: dict[str, Any], notes: list[str]) -> None:
    tests = dst / "tests"
    if (src / "tests").is_dir():
        shutil.copytree(src / "tests", tests, symlinks=True, ignore=special_files)
    else:
        tests.mkdir()
        notes.append("no tests/ directory in the source task")
    runner = "run-tests.sh"
    if (tests / runner).exists():
        runner = "tb1-run-tests.sh"
        notes.append(
            "tests/ already had a run-tests.sh; the task's runner is tests/tb1-run-tests.sh"
        )
    if (src / "run-tests.sh").is_file():
        _write_script(tests / runner, read_source(src / "run-tests.sh"))
    else:
        _write_script(tests / runner, DEFAULT_RUN_TESTS)
        notes.append(
            "no run-tests.sh: wrote one that runs pytest on tests/test_outputs.py "
            "(pytest must be available in the image)"
        )
    if (tests / "test.sh").exists():
        (tests / "test.sh").rename(tests / "tb1-test.sh")
        notes.append("tests/test.sh existed in the source; renamed to tests/tb1-test.sh")
    _write_script(tests / "test.sh", TEST_SH.format(runner=runner))
