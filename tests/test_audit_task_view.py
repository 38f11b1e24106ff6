"""The auditor's view of a Harbor task (protocols/audit/task_view.py) and task discovery
(tasks/task_dirs.py): file order, tiers, binary files, size caps, task.toml, hints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metaeval.errors import ConfigError
from metaeval.protocols.audit.task_delivery import shorten_text
from metaeval.protocols.audit.task_hints import Hints, load_hints
from metaeval.protocols.audit.task_view import load_benchmark, load_task
from metaeval.tasks.task_dirs import discover_tasks, network_allowed
from metaeval.tasks.toml_schema import unknown_keys

SMALL_TOML = 'version = "1.0"\n'  # 16 bytes


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def full_task(root: Path) -> Path:
    return write(
        root,
        {
            "task.toml": SMALL_TOML,
            "instruction.md": "Do the thing.\n",
            "tests/b_check.py": "print('b')\n",
            "tests/a_check.py": "print('a')\n",
            "tests/test.sh": "#!/bin/bash\n",
            "tests/sub/z.py": "z = 1\n",
            "solution/solve.sh": "#!/bin/bash\n",
            "solution/helper.py": "x = 1\n",
            "solution/a.txt": "notes\n",
            "environment/requirements.txt": "numpy\n",
            "environment/data.csv": "a,b\n1,2\n",
            "environment/Dockerfile": "FROM python:3.11-slim\n",
            "domain_knowledge.md": "Background.\n",
            "data_description.md": "Columns.\n",
            "README.md": "About this task.\n",
        },
    )


# --------------------------------------------------------------------------- order and tiers


def test_file_order_key_files_first_then_alphabetical(tmp_path: Path) -> None:
    task = load_task(full_task(tmp_path / "t1"), bench_root=tmp_path)
    assert [f.path for f in task.files] == [
        "instruction.md",
        "task.toml",
        "tests/test.sh",
        "tests/a_check.py",
        "tests/b_check.py",
        "tests/sub/z.py",
        "solution/solve.sh",
        "solution/a.txt",
        "solution/helper.py",
        "environment/Dockerfile",
        "environment/data.csv",
        "environment/requirements.txt",
        "domain_knowledge.md",
        "data_description.md",
        "README.md",
    ]
    roles = {f.path: f.role for f in task.files}
    assert roles["instruction.md"] == "instruction"
    assert roles["tests/sub/z.py"] == "tests"
    assert roles["solution/helper.py"] == "solution"
    assert roles["environment/Dockerfile"] == "environment"
    assert roles["domain_knowledge.md"] == roles["data_description.md"] == "docs"
    assert roles["README.md"] == roles["task.toml"] == "other"
    assert task.task_id == "t1"
    assert task.missing_files == [] and task.skipped_files == [] and task.cuts == []
    assert task.file("tests/test.sh") is not None
    assert task.file("tests/test.sh").text == "#!/bin/bash\n"
    assert task.file("tests/test.sh").raw_bytes == task.file("tests/test.sh").delivered_bytes == 12


def test_minimal_tier_has_no_solution(tmp_path: Path) -> None:
    task = load_task(full_task(tmp_path / "t"), tier="minimal", bench_root=tmp_path)
    assert task.by_role("solution") == []
    assert task.by_role("tests") and task.by_role("environment") and task.by_role("instruction")
    assert task.by_role("agent") == []
    assert "solution/solve.sh" not in task.missing_files


def test_definition_tier_has_solution_but_no_agent(tmp_path: Path) -> None:
    bench = tmp_path
    full_task(bench / "t")
    write(bench / "agent_results" / "t", {"program.py": "print(1)\n"})
    task = load_task(bench / "t", tier="definition", bench_root=bench)
    assert [f.path for f in task.by_role("solution")][0] == "solution/solve.sh"
    assert task.by_role("agent") == []


def test_execution_tier_adds_agent_results_alphabetically(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    full_task(bench / "group" / "t")
    write(
        bench / "agent_results" / "group" / "t",
        {"program.py": "print(1)\n", "eval_result.json": '{"reward": 0}\n', "log.txt": "ran\n"},
    )
    task = load_task(bench / "group" / "t", tier="execution", bench_root=bench)
    assert task.task_id == "group/t"
    agent = task.by_role("agent")
    assert [f.path for f in agent] == [
        "agent/eval_result.json",
        "agent/log.txt",
        "agent/program.py",
    ]
    assert task.files[-3:] == agent  # agent results come last
    assert task.by_role("solution")


def test_execution_tier_with_explicit_results_dir_and_missing_results(tmp_path: Path) -> None:
    full_task(tmp_path / "bench" / "t")
    results = write(tmp_path / "elsewhere" / "t", {"out.log": "x\n"}).parent
    task = load_task(
        tmp_path / "bench" / "t",
        tier="execution",
        bench_root=tmp_path / "bench",
        agent_results=results,
    )
    assert [f.path for f in task.by_role("agent")] == ["agent/out.log"]
    bare = load_task(tmp_path / "bench" / "t", tier="execution", bench_root=tmp_path / "bench")
    assert bare.by_role("agent") == []
    assert "agent_results/t/" in bare.missing_files


def test_missing_required_files(tmp_path: Path) -> None:
    write(tmp_path / "t", {"task.toml": SMALL_TOML, "tests/check.py": "pass\n"})
    task = load_task(tmp_path / "t", bench_root=tmp_path)
    assert task.missing_files == ["instruction.md", "tests/test.sh", "solution/solve.sh"]
    minimal = load_task(tmp_path / "t", tier="minimal", bench_root=tmp_path)
    assert minimal.missing_files == ["instruction.md", "tests/test.sh"]


def test_unknown_tier_and_missing_dir_raise(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_task(tmp_path / "nope")
    full_task(tmp_path / "t")
    with pytest.raises(ConfigError, match="tier"):
        load_task(tmp_path / "t", tier="everything")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- binary, symlinks


def test_binary_files_are_skipped_with_reason(tmp_path: Path) -> None:
    full_task(tmp_path / "t")
    write(
        tmp_path / "t",
        {
            "environment/image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
            "environment/latin1.txt": "caf\xe9\n".encode("latin-1"),
            "environment/utf8.txt": "café ☕\n",
        },
    )
    task = load_task(tmp_path / "t", bench_root=tmp_path)
    paths = [f.path for f in task.files]
    assert "environment/image.png" not in paths and "environment/latin1.txt" not in paths
    assert task.file("environment/utf8.txt").text == "café ☕\n"
    assert task.file("environment/utf8.txt").raw_bytes == len("café ☕\n".encode())
    assert task.skipped_files == [
        "environment/image.png: binary (NUL byte in the first 8 KiB)",
        "environment/latin1.txt: binary (not UTF-8 at byte 3)",
    ]


def test_symlink_leading_outside_is_not_read(tmp_path: Path) -> None:
    full_task(tmp_path / "t")
    secret = write(tmp_path / "outside", {"secret.txt": "top secret\n"}) / "secret.txt"
    os.symlink(secret, tmp_path / "t" / "environment" / "leak.txt")
    os.symlink("data.csv", tmp_path / "t" / "environment" / "alias.csv")
    os.symlink(secret, tmp_path / "t" / "notes.md")
    task = load_task(tmp_path / "t", bench_root=tmp_path)
    assert task.file("notes.md") is None
    assert "notes.md: symlink outside the task" in task.skipped_files
    assert task.file("environment/leak.txt") is None
    assert "environment/leak.txt: symlink outside the task" in task.skipped_files
    assert task.outside_links == [f"environment/leak.txt -> {secret}", f"notes.md -> {secret}"]
    assert task.file("environment/alias.csv").text == "a,b\n1,2\n"
    assert all("top secret" not in f.text for f in task.files)


# --------------------------------------------------------------------------- caps


def test_per_file_cap_keeps_head_and_tail_with_exact_counts(tmp_path: Path) -> None:
    body = "".join(f"line-{i:02d}\n" for i in range(10))  # 10 lines of 8 bytes = 80 bytes
    write(tmp_path / "t", {"task.toml": SMALL_TOML, "tests/test.sh": body})
    task = load_task(tmp_path / "t", bench_root=tmp_path, max_file_bytes=30)
    f = task.file("tests/test.sh")
    # head budget 15 -> cut back to the line boundary: "line-00\n" (8 bytes);
    # tail budget 15 -> "ine-08\nline-09\n" starts mid-line, cut forward: "line-09\n" (8 bytes)
    marker = "[... metaeval: 64 bytes omitted (lines 2-9 of 10) ...]\n"  # 55 bytes
    assert f.text == "line-00\n" + marker + "line-09\n"
    assert f.raw_bytes == 80
    assert f.delivered_bytes == 8 + 55 + 8 == 71
    assert f.truncated is True
    assert task.file("task.toml").truncated is False
    assert task.cuts == [
        "tests/test.sh: shortened from 80 to 16 bytes of content, 64 omitted (file cap 30 bytes)"
    ]


def test_per_task_budget_shortens_then_omits_later_files(tmp_path: Path) -> None:
    write(
        tmp_path / "t",
        {
            "task.toml": SMALL_TOML,  # 16 bytes
            "instruction.md": "i" * 999 + "\n",  # 1000 bytes
            "tests/test.sh": "t" * 799 + "\n",  # 800 bytes
            "tests/z.py": "".join(f"z-line-{i:02d}\n" for i in range(100)),  # 100 x 10 bytes
            "solution/solve.sh": "s" * 699 + "\n",  # 700 bytes
        },
    )
    task = load_task(tmp_path / "t", bench_root=tmp_path, max_task_bytes=2600)
    assert [f.path for f in task.files] == [
        "instruction.md",
        "task.toml",
        "tests/test.sh",
        "tests/z.py",
    ]
    z = task.file("tests/z.py")
    # 2600 - (1000 + 16 + 800) = 784 left: head 392 -> 390 (39 lines), tail 392 -> 390
    marker = "[... metaeval: 220 bytes omitted (lines 40-61 of 100) ...]\n"  # 59 bytes
    expected = (
        "".join(f"z-line-{i:02d}\n" for i in range(39))
        + marker
        + "".join(f"z-line-{i:02d}\n" for i in range(61, 100))
    )
    assert z.text == expected
    assert (z.raw_bytes, z.delivered_bytes, z.truncated) == (1000, 780 + 59, True)
    assert task.cuts == [
        "tests/z.py: shortened from 1000 to 780 bytes of content, 220 omitted "
        "(task budget: 784 of 2600 bytes left)",
        "solution/solve.sh: omitted (700 bytes): the task budget of 2600 bytes is used up",
    ]
    assert sum(f.delivered_bytes for f in task.files) == 1000 + 16 + 800 + 839


def test_shorten_without_newlines_cuts_on_character_boundaries() -> None:
    data = ("é" * 20).encode()  # 40 bytes, no newline
    text, kept = shorten_text(data, data, len(data), 0, 11)
    # head budget 6 bytes = 3 characters; tail budget 5 bytes -> 4 bytes = 2 characters
    assert text == "ééé\n[... metaeval: 30 bytes omitted ...]\néé"
    assert kept == 10


# --------------------------------------------------------------------------- task.toml


def test_malformed_task_toml_sets_config_error_and_others_still_load(tmp_path: Path) -> None:
    full_task(tmp_path / "bad")
    (tmp_path / "bad" / "task.toml").write_text('version = "1.0"\n[verifier\ntimeout_sec = 5\n')
    full_task(tmp_path / "good")
    tasks, skipped = load_benchmark(tmp_path)
    assert skipped == []
    by_id = {t.task_id: t for t in tasks}
    bad, good = by_id["bad"], by_id["good"]
    assert bad.config_error is not None
    assert bad.config_error.startswith("task.toml: ")
    assert "line 2" in bad.config_error
    assert bad.config == {} and bad.files  # the files still load
    assert good.config_error is None and good.config == {"version": "1.0"}


def test_missing_task_toml_is_recorded(tmp_path: Path) -> None:
    write(tmp_path / "t", {"instruction.md": "x\n", "tests/test.sh": "#!/bin/bash\n"})
    task = load_task(tmp_path / "t", bench_root=tmp_path, tier="minimal")
    assert task.config_error == "task.toml: file not found"
    assert "task.toml" in task.missing_files


TOML_WITH_UNKNOWN = """
version = "1.0"
colour = "blue"

[metadata]
anything = 1
nested = { deep = true }

[verifier]
timeout_sec = 60.0
timeout = 30

[verifier.env]
MY_VAR = "x"

[agent]
timeout_sec = 600.0

[environment]
cpus = 2
memory = "4G"
memory_gb = 8
allow_internet = false

[environment.healthcheck]
command = "true"
interval = 3

[[environment.mcp_servers]]
name = "docs"
url = "http://localhost:1"
token = "x"

[[steps]]
name = "first"
bogus = 1

[steps.agent]
timeout_sec = 10

[[artifacts]]
source = "/app/out"
target = "out"
"""


def test_unknown_keys_are_reported_and_known_keys_are_not(tmp_path: Path) -> None:
    full_task(tmp_path / "t")
    (tmp_path / "t" / "task.toml").write_text(TOML_WITH_UNKNOWN)
    task = load_task(tmp_path / "t", bench_root=tmp_path)
    assert task.config_error is None
    assert task.unknown_keys == [
        "colour",
        "verifier.timeout",
        "environment.memory_gb",
        "environment.healthcheck.interval",
        "environment.mcp_servers[0].token",
        "steps[0].bogus",
        "artifacts[0].target",
    ]


def test_schema_accepts_documented_examples() -> None:
    # BenchGuard Appendix C, Listing 2 (with its [environment] runtime key, not Harbor's)
    paper = {
        "metadata": {"id": "task_001", "category": "bioinformatics"},
        "verifier": {"method": "script"},
        "environment": {"runtime": "python3.10", "cpus": 2, "memory": "4G"},
        "agent": {"timeout_sec": 1800.0},
    }
    assert unknown_keys(paper) == ["verifier.method", "environment.runtime"]
    harbor_14 = {
        "schema_version": "1.4",
        "task": {"name": "org/t", "authors": [{"name": "a", "email": "e"}]},
        "environment": {"network_mode": "no-network", "os": "linux", "workdir": "/app"},
        "verifier": {"environment_mode": "separate", "collect": [{"command": "true"}]},
        "solution": {"env": {"A": "1"}},
        "source": "x",
        "multi_step_reward_strategy": "mean",
    }
    assert unknown_keys(harbor_14) == []


@pytest.mark.parametrize(
    ("config", "phase", "expected"),
    [
        ({}, "environment", None),
        ({"environment": {"allow_internet": False}}, "environment", False),
        ({"environment": {"allow_internet": True}}, "verifier", True),
        ({"environment": {"network_mode": "no-network", "allow_internet": True}}, "agent", False),
        (
            {"environment": {"network_mode": "allowlist", "allowed_hosts": ["pypi.org"]}},
            "environment",
            True,
        ),
        (
            {"environment": {"network_mode": "public"}, "verifier": {"network_mode": "no-network"}},
            "verifier",
            False,
        ),
        (
            {"environment": {"network_mode": "public"}, "verifier": {"network_mode": "no-network"}},
            "agent",
            True,
        ),
        ({"environment": "oops"}, "environment", None),
        (
            {
                "environment": {"network_mode": "public"},
                "verifier": {"environment": {"allow_internet": False}},
            },
            "verifier",
            False,
        ),
    ],
)
def test_network_allowed(config: dict, phase: str, expected: bool | None) -> None:
    assert network_allowed(config, phase) is expected


# --------------------------------------------------------------------------- discovery


def test_discover_finds_flat_and_nested_tasks_and_skips_dirs_without_task_toml(
    tmp_path: Path,
) -> None:
    full_task(tmp_path / "b-task")
    full_task(tmp_path / "a-task")
    write(tmp_path / "notes", {"readme.txt": "not a task\n"})
    full_task(tmp_path / "group" / "c-task")
    write(tmp_path / "group" / "drafts", {"idea.md": "later\n"})
    full_task(tmp_path / ".hidden" / "x")
    write(tmp_path, {"benchguard_hints.yaml": "general: hi\n"})
    write(tmp_path / "agent_results" / "a-task", {"log.txt": "ran\n"})
    tasks, skipped = discover_tasks(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in tasks] == [
        "a-task",
        "b-task",
        "group/c-task",
    ]
    assert skipped == [("group/drafts", "no task.toml"), ("notes", "no task.toml")]
    loaded, _ = load_benchmark(tmp_path)
    assert [t.task_id for t in loaded] == ["a-task", "b-task", "group/c-task"]


def test_discover_on_a_single_task_dir(tmp_path: Path) -> None:
    full_task(tmp_path / "only")
    assert discover_tasks(tmp_path / "only") == ([tmp_path / "only"], [])
    with pytest.raises(ConfigError):
        discover_tasks(tmp_path / "missing")


def test_task_subdirectories_are_not_searched_for_more_tasks(tmp_path: Path) -> None:
    full_task(tmp_path / "outer")
    write(tmp_path / "outer" / "environment" / "vendored", {"task.toml": SMALL_TOML})
    tasks, skipped = discover_tasks(tmp_path)
    assert tasks == [tmp_path / "outer"] and skipped == []


# --------------------------------------------------------------------------- hints


HINTS = """
general: |
  Data is mounted at /app at run time.
local: [a-task]
tasks:
  a-task: "Short hint for a."
  group/c-task:
    hint: Long hint for c.
    local: true
  b-task:
"""


def test_hints_schema_and_task_text(tmp_path: Path) -> None:
    write(tmp_path, {"benchguard_hints.yaml": HINTS})
    hints = load_hints(tmp_path)
    assert hints.general.strip() == "Data is mounted at /app at run time."
    assert hints.tasks == {
        "a-task": "Short hint for a.",
        "group/c-task": "Long hint for c.",
        "b-task": "",
    }
    assert hints.local == ["a-task", "group/c-task"]
    assert hints.is_local("group/c-task") and not hints.is_local("b-task")
    assert hints.for_task("a-task") == "Data is mounted at /app at run time.\n\nShort hint for a."
    assert hints.for_task("other") == "Data is mounted at /app at run time."
    assert hints.unknown_task_ids({"a-task", "b-task"}) == ["group/c-task"]

    full_task(tmp_path / "group" / "c-task")
    task = load_task(tmp_path / "group" / "c-task", bench_root=tmp_path)
    assert task.hints == "Data is mounted at /app at run time.\n\nLong hint for c."


def test_no_hints_file_gives_empty_hints(tmp_path: Path) -> None:
    assert load_hints(tmp_path) == Hints()
    full_task(tmp_path / "t")
    assert load_task(tmp_path / "t").hints == ""


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("general: [1, 2]\n", "general"),
        ("tasks: [a, b]\n", "tasks"),
        ("local: yes-please\n", "local"),
        ("tasks:\n  t:\n    hint: x\n    locale: true\n", "tasks.t.locale"),
        ("tasks:\n  t:\n    local: maybe\n", "tasks.t.local"),
        ("colour: blue\n", "colour"),
    ],
)
def test_malformed_hints_raise_config_error_with_field(
    tmp_path: Path, text: str, field: str
) -> None:
    write(tmp_path, {"benchguard_hints.yaml": text})
    with pytest.raises(ConfigError) as info:
        load_hints(tmp_path)
    assert info.value.field == field
    assert info.value.file and info.value.file.endswith("benchguard_hints.yaml")


def test_hints_with_invalid_yaml(tmp_path: Path) -> None:
    write(tmp_path, {"benchguard_hints.yaml": "general: [unclosed\n"})
    with pytest.raises(ConfigError, match="benchguard_hints.yaml"):
        load_hints(tmp_path)
