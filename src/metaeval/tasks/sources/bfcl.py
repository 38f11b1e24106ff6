"""BFCL-style function-calling tasks: the task writer and the BFCL data loader.

A function-calling task (Harbor layout, see `write_function_task`) gives the agent function
docs and a user request; the agent writes its calls as JSON to `/app/result.json`, a list of
`{"name": ..., "arguments": {...}}`. Its verifier is the AST checker of `bfcl_checker`
(rendered into the task as `tests/check.py`), comparing the calls with the task's possible
answer, BFCL's `ground_truth`.

CLI: `python -m metaeval.tasks.sources.bfcl check RESULT ANSWER FUNCTIONS` (exit 0 pass,
1 fail, 2 bad answer or functions file), `render-checker` (print the checker),
`sync-checkers DIR` (rewrite every task's copy), `load CATEGORY OUT_DIR [--limit N]
[--data-dir DIR]` (write Harbor tasks from BFCL data).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from metaeval.errors import ConfigError, ProviderUnavailableError
from metaeval.tasks.sources.bfcl_checker import (
    check_calls_raw,
    checker_main,
    is_omit_marker,
    read_functions,
    read_ground_truth,
)
from metaeval.tasks.sources.bfcl_verifier import CHECKER_FILE, render_checker, sync_checkers

INSTALL_HINT = "pip install bfcl-eval"
CATEGORY_ALIASES = {"simple": "simple_python"}


# --------------------------------------------------------------------------- task writer


def canonical_calls(possible_answer: Any) -> list[dict[str, Any]]:
    """One passing answer: for each expected call, the first acceptable value of each
    parameter (parameters whose only acceptable value is "" are left out)."""
    calls = []
    for name, params in read_ground_truth(possible_answer):
        arguments = {}
        for param, acceptable in params.items():
            values = [v for v in acceptable if not is_omit_marker(v)]
            if values:
                arguments[param] = _canonical_value(values[0])
        calls.append({"name": name, "arguments": arguments})
    return calls


def _canonical_value(value: Any) -> Any:
    if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
        out = {}
        for key, acceptable in value.items():
            values = [v for v in acceptable if not is_omit_marker(v)]
            if values:
                out[key] = _canonical_value(values[0])
        return out
    if isinstance(value, list):
        return [_canonical_value(v) for v in value]
    return value


_TASK_TOML = """version = "1.0"

[metadata]
author_name = "{author}"
author_email = "examples@metaeval.invalid"
difficulty = "easy"
category = "function-calling"
tags = ["bfcl", "{category}"]

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 300.0

[environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 1024
storage_mb = 1024
allow_internet = false
"""

_TEST_SH = """#!/bin/bash
# Verifier: check /app/result.json against the possible answers; record the reward.
mkdir -p /logs/verifier
if python3 /tests/check.py /app/result.json /tests/possible_answer.json /tests/functions.json; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

_INSTRUCTION = """# Function calling: {title}

You are given the function docs below (also in `/app/functions.json`) and a request (also in
`/app/question.json`). Decide which function call or calls answer the request and write them
as JSON to `/app/result.json`: a list with one object per call,
`{{"name": "<function name>", "arguments": {{"<parameter>": <value>, ...}}}}`, with values of
the declared types. Do not run the functions: only write the calls. A request may need one
call, a choice among several functions, or several calls.

## Functions

```json
{functions}
```

## Request

{messages}
"""


def render_instruction(title: str, messages: list[dict[str, Any]], functions: list[Any]) -> str:
    """The instruction.md of a function-calling task."""
    lines = [f"**{m.get('role', 'user')}:** {str(m.get('content', '')).strip()}" for m in messages]
    return _INSTRUCTION.format(
        title=title,
        functions=json.dumps(functions, indent=2, ensure_ascii=False),
        messages="\n\n".join(lines),
    )


def write_function_task(
    task_dir: Path,
    *,
    messages: list[dict[str, Any]],
    functions: list[dict[str, Any]],
    ground_truth: list[dict[str, Any]],
    category: str,
    task_id: str | None = None,
    title: str | None = None,
    author: str = "metaeval examples",
    overwrite: bool = False,
) -> Path:
    """Write one function-calling task in the Harbor layout and return its directory.

    environment/functions.json, environment/question.json (the agent's /app), tests/
    possible_answer.json, tests/functions.json (the verifier's own copy, which the agent
    cannot change), tests/check.py (render_checker()), tests/test.sh, solution/solve.sh
    (writes canonical_calls(ground_truth)), instruction.md, task.toml.
    """
    root = Path(task_dir)
    if root.exists() and any(root.iterdir()) and not overwrite:
        raise ConfigError("task directory exists and is not empty", file=str(root))
    task_id = task_id or root.name
    functions = read_functions(functions)
    read_ground_truth(ground_truth)  # validates
    solution = canonical_calls(ground_truth)
    check = check_calls_raw(solution, ground_truth, functions)
    if check:
        raise ConfigError(f"the canonical answer fails its own check: {check}", file=str(root))
    for sub in ("environment", "tests", "solution"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    question = {"id": task_id, "question": [messages]}
    answer = {"id": task_id, "category": category, "ground_truth": ground_truth}
    _write(root / "task.toml", _TASK_TOML.format(author=author, category=category))
    _write(root / "instruction.md", render_instruction(title or task_id, messages, functions))
    _write(root / "environment" / "functions.json", _dump(functions))
    _write(root / "environment" / "question.json", _dump(question))
    _write(root / "tests" / "functions.json", _dump(functions))
    _write(root / "tests" / "possible_answer.json", _dump(answer))
    _write(root / "tests" / CHECKER_FILE, render_checker())
    _write(root / "tests" / "test.sh", _TEST_SH)
    solve = (
        "#!/bin/bash\nset -euo pipefail\ncat > /app/result.json <<'JSON'\n"
        + _dump(solution)
        + "JSON\n"
    )
    _write(root / "solution" / "solve.sh", solve)
    return root


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------- BFCL loader


def bfcl_data_dir() -> Path:
    """The data directory bundled with the installed `bfcl-eval` package.

    The package is located without importing it (importing bfcl_eval creates result
    directories as a side effect). Raises ProviderUnavailableError with the install hint
    when it is not installed.
    """
    spec = importlib.util.find_spec("bfcl_eval")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        data = Path(location) / "data"
        if data.is_dir():
            return data
    raise ProviderUnavailableError(
        f"the BFCL data needs the optional bfcl-eval package: {INSTALL_HINT}"
    )


def find_category_files(data_dir: Path, category: str) -> tuple[Path, Path]:
    """(question file, possible answer file) of a BFCL category, newest version first."""
    names = [category]
    if category in CATEGORY_ALIASES:
        names.append(CATEGORY_ALIASES[category])
    candidates: list[tuple[int, Path]] = []
    for name in names:
        for path in Path(data_dir).glob(f"BFCL_v*_{name}.json"):
            match = re.fullmatch(rf"BFCL_v(\d+)_{re.escape(name)}\.json", path.name)
            if match:
                candidates.append((int(match.group(1)), path))
    if not candidates:
        raise ConfigError(
            f"no BFCL question file for category {category!r} (BFCL_v*_{category}.json)",
            file=str(data_dir),
        )
    _, question = max(candidates, key=lambda c: (c[0], c[1].name))
    answer = question.parent / "possible_answer" / question.name
    if not answer.is_file():
        raise ConfigError(
            f"category {category!r} has no possible answers (only AST-checked categories "
            "with ground truth can become tasks)",
            file=str(answer),
        )
    return question, answer


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", file=str(path)) from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"line {number} is not JSON: {exc}", file=str(path)) from exc
        if not isinstance(record, dict) or "id" not in record:
            raise ConfigError(f"line {number}: expected an object with an 'id'", file=str(path))
        records.append(record)
    return records


def task_dir_name(bfcl_id: str) -> str:
    """A directory name for a BFCL id: `simple_python_0` -> `bfcl-simple-python-0`."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", bfcl_id).strip("-").lower()
    return f"bfcl-{slug}"


def load_bfcl_tasks(
    out_dir: Path,
    category: str = "simple",
    limit: int | None = None,
    *,
    data_dir: Path | None = None,
    overwrite: bool = False,
) -> list[Path]:
    """Write BFCL questions of one category as Harbor function-calling tasks.

    Reads `BFCL_v*_<category>.json` (JSON lines: id, question = list of turns of messages,
    function = docs) and `possible_answer/<same name>` (id, ground_truth) from `data_dir`,
    by default the data bundled with the `bfcl-eval` package (ProviderUnavailableError with
    `pip install bfcl-eval` when it is missing). Multi-turn questions and questions without
    a possible answer are skipped. Returns the task directories, in file order.
    """
    if limit is not None and limit < 1:
        raise ConfigError("limit must be at least 1", field="limit")
    data = Path(data_dir) if data_dir is not None else bfcl_data_dir()
    question_file, answer_file = find_category_files(data, category)
    answers = {str(r["id"]): r for r in _read_jsonl(answer_file)}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for record in _read_jsonl(question_file):
        if limit is not None and len(written) >= limit:
            break
        bfcl_id = str(record["id"])
        turns = record.get("question")
        if bfcl_id not in answers or not isinstance(turns, list) or len(turns) != 1:
            continue
        messages = turns[0] if isinstance(turns[0], list) else [turns[0]]
        where = f"{question_file} ({bfcl_id})"
        try:
            functions = read_functions(record.get("function"))
        except (ValueError, KeyError) as exc:
            raise ConfigError(str(exc), file=where, field="function") from exc
        try:
            written.append(
                write_function_task(
                    out / task_dir_name(bfcl_id),
                    messages=messages,
                    functions=functions,
                    ground_truth=answers[bfcl_id]["ground_truth"],
                    category=category,
                    task_id=task_dir_name(bfcl_id),
                    title=bfcl_id,
                    author="BFCL (gorilla), converted by metaeval",
                    overwrite=overwrite,
                )
            )
        except (ValueError, KeyError) as exc:
            raise ConfigError(str(exc), file=where, field="ground_truth") from exc
    return written


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metaeval.tasks.sources.bfcl")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="check a result file; exit 0 pass, 1 fail")
    check.add_argument("result")
    check.add_argument("answer")
    check.add_argument("functions")
    sub.add_parser("render-checker", help="print the standalone tests/check.py")
    sync = sub.add_parser("sync-checkers", help="rewrite tests/check.py of every task below DIR")
    sync.add_argument("directory")
    load = sub.add_parser("load", help="write BFCL questions as Harbor tasks")
    load.add_argument("category")
    load.add_argument("out_dir")
    load.add_argument("--limit", type=int, default=None)
    load.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    if args.command == "check":
        return checker_main([args.result, args.answer, args.functions])
    if args.command == "render-checker":
        sys.stdout.write(render_checker())
        return 0
    if args.command == "sync-checkers":
        for path in sync_checkers(Path(args.directory)):
            print(path)
        return 0
    try:
        tasks = load_bfcl_tasks(
            Path(args.out_dir),
            args.category,
            args.limit,
            data_dir=Path(args.data_dir) if args.data_dir else None,
        )
    except (ConfigError, ProviderUnavailableError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for task in tasks:
        print(task)
    return 0


if __name__ == "__main__":
    sys.exit(main())
