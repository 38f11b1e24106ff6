"""An adversarial corpus through the real `metaeval` command line (subprocesses).

Every case writes one malformed (or oddly formed) input into a temporary directory, runs the
installed console script on it with HOME pointing at a temporary home full of marker files,
and checks what a user would see:

- `error` cases: a non-zero exit code, an `error:` line naming the file (and the field or
  column where there is one), no Python traceback, no "unexpected" crash line;
- `findings` cases (`buildfind validate`): exit code 1 and one problem line per finding,
  naming the file and field;
- `ok` cases: input that is unusual but valid (booleans written 1/0, yes/no) is accepted and
  gives the same result as the canonical spelling.

In every case nothing is written outside the directories the command may write to, no marker
from the temporary home appears in stdout or stderr, and the command ends within its timeout.
The case list is `CASES`; `test_corpus_size` pins how many there are per command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PACK = REPO / "examples" / "buildfind-pack"
IMPROVE = REPO / "examples" / "improve"
SUITES = REPO / "examples" / "improve-suites"
MARKER = f"HOSTILE-MARKER-{uuid.uuid4().hex}"
CLI_TIMEOUT_S = 120


def metaeval_argv() -> list[str]:
    script = Path(sys.executable).parent / "metaeval"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from metaeval.cli import main; main()"]


@dataclass
class Sandbox:
    """A temporary HOME with markers, an input folder, a work folder (cwd) and an outside one."""

    root: Path
    baseline: Path  # a toolloop target repository for improve manifests
    reference: Path  # a finished build-and-find run (scripted reference agents), read-only
    audit_run: Path  # a finished static-only audit run of the example benchmark, read-only
    home: Path = field(init=False)
    inputs: Path = field(init=False)
    work: Path = field(init=False)
    outside: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.inputs = self.root / "inputs"
        self.work = self.root / "a" / "b" / "c" / "work"
        self.outside = self.root / "outside"
        for folder in (self.home / ".ssh", self.inputs, self.work, self.outside):
            folder.mkdir(parents=True, exist_ok=True)
        (self.home / ".netrc").write_text(f"machine example.com login u password {MARKER}\n")
        (self.home / ".ssh" / "id_test").write_text(f"-----BEGIN KEY-----\n{MARKER}\n")
        (self.outside / "secret.txt").write_text(MARKER + "\n")

    @property
    def run_dir(self) -> Path:
        return self.work / "run"

    def write(self, name: str, content: str | bytes) -> Path:
        path = self.inputs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    def tree(self) -> set[Path]:
        return {p for p in self.root.rglob("*")}

    def run(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "METAEVAL_DEBUG"}
        env["HOME"] = str(self.home)
        return subprocess.run(
            [*metaeval_argv(), *args],
            cwd=self.work,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=CLI_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )


Setup = Callable[[Sandbox], list[str]]


@dataclass
class Case:
    """One hostile input: `setup` writes it and returns the CLI arguments."""

    id: str
    setup: Setup
    expect: str  # error | findings | ok
    needles: tuple[str, ...] = ()  # must appear in stdout+stderr (file names, fields)


CASES: list[Case] = []


def case(id: str, expect: str = "error", *needles: str) -> Callable[[Setup], Setup]:
    def register(fn: Setup) -> Setup:
        CASES.append(Case(id, fn, expect, needles))
        return fn

    return register


# ---------------------------------------------------------------------------------------------
# buildfind run: run configs


def base_config() -> dict:
    return {
        "pack": str(PACK),
        "tasks": ["http-router"],
        "builders": [{"name": "documented", "agent": "reference:documented"}],
        "finders": [{"name": "ref", "agent": "reference-finder"}],
        "r_build": 1,
        "r_find": 1,
        "controls": [],
    }


def config_case(id: str, mutate: Callable[[dict], None], *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        config = base_config()
        mutate(config)
        path = box.write("run.yaml", yaml.safe_dump(config))
        return ["buildfind", "run", str(path), "-o", str(box.run_dir)]

    CASES.append(Case(f"bf-config-{id}", setup, "error", ("run.yaml", *needles)))


def _set(path: str, value: object) -> Callable[[dict], None]:
    def mutate(config: dict) -> None:
        target = config
        parts = path.split(".")
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
        last = parts[-1]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return mutate


BAD_NAMES = {
    "escape": "../../../../escape_bf",
    "slash": "a/b",
    "empty": "",
    "dot": ".",
    "dotdot": "..",
    "hidden": ".hidden",
    "space": "a b",
    "unicode": "bau\u00dfer",
    "long": "x" * 200,
    "nul": "a\x00b",
    "newline": "a\nb",
    "backslash": "a\\b",
    "absolute": "/tmp/abs",
    "tilde": "~",
    "markup-close": "[/]",  # rich console markup: must be printed, not interpreted
    "markup-style": "[bold]x",
}
for _key, _name in BAD_NAMES.items():
    config_case(f"builder-name-{_key}", _set("builders.0.name", _name), "builders.0.name")
config_case("builder-name-markup-shown", _set("builders.0.name", "[bold]x"), "'[bold]x'")
for _key in ("escape", "slash", "empty", "hidden", "absolute"):
    config_case(f"finder-name-{_key}", _set("finders.0.name", BAD_NAMES[_key]), "finders.0.name")
    config_case(f"task-id-{_key}", _set("tasks", [BAD_NAMES[_key]]), "tasks.0")
config_case("builder-name-int", _set("builders.0.name", 5), "builders.0.name")
config_case("builder-name-list", _set("builders.0.name", ["a"]), "builders.0.name")
config_case("builder-name-null", _set("builders.0.name", None), "builders.0.name")
for _field, _values in {
    "r_find": [10_000_000, 0, -1, "three", 1.5, None],
    "r_build": [10_000_000, 0, "many"],
    "concurrency": [10**6, 0],
    "max_recovery_attempts": [10**6, -1],
    "budgets.build_time_s": [-5, 0, "sixty", float("inf"), float("nan"), 1e308],
    "budgets.find_time_s": [float("-inf"), 10**30],
    "budgets.find_max_steps": [10**9, 0],
    "budgets.build_max_steps": [-3],
    "budgets.find_max_tokens_per_step": [10**12, 1],
    "seed0": ["abc", [1]],
    "pack": [5, None, ["x"]],
    "controls": [["nope"], "question_only"],
    "builders": [[], "documented", None],
    "finders": [[]],
}.items():
    for _index, _value in enumerate(_values):
        config_case(f"{_field}-{_index}", _set(_field, _value), _field)
config_case("unknown-key", _set("colour", "red"), "colour")
config_case(
    "cells-product-huge",
    lambda config: config.update(
        r_find=1000,
        builders=[{"name": f"b{i}", "agent": "reference:documented"} for i in range(200)],
    ),
    "find cells per task",
)
config_case("budgets-unknown-key", _set("budgets.speed", 3), "budgets.speed")
config_case(
    "duplicate-builders",
    _set("builders", [{"name": "x", "agent": "reference:documented"}] * 2),
    "duplicate",
)
config_case("base-finder-unknown", _set("base_finders", ["ghost"]), "base_finders")
config_case("base-finder-escape", _set("base_finders", ["../x"]), "base_finders")
config_case("unknown-agent", _set("builders.0.agent", "no-such-agent"), "no-such-agent")
config_case("unknown-reference", _set("builders.0.agent", "reference:nope"), "reference")
config_case("reference-as-finder", _set("finders.0.agent", "reference:documented"), "finders")
config_case("unknown-task", _set("tasks", ["ghost-task"]), "ghost-task")


def raw_config_case(id: str, content: str | bytes, *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        path = box.write("run.yaml", content)
        return ["buildfind", "run", str(path), "-o", str(box.run_dir)]

    CASES.append(Case(f"bf-config-{id}", setup, "error", ("run.yaml", *needles)))


raw_config_case("empty", "")
raw_config_case("whitespace", "  \n\n")
raw_config_case("list", "- a\n- b\n")
raw_config_case("scalar", "42\n")
raw_config_case("not-utf8", b"pack: \xff\xfe\x00\n")
raw_config_case("bad-yaml", "pack: [unclosed\n")
raw_config_case("tab-indent", "pack:\n\t- x\n")
raw_config_case("python-tag", "pack: !!python/object/apply:os.system ['echo pwned']\n")
raw_config_case("deep-nesting", "pack: " + "[" * 5000 + "]" * 5000 + "\n")
raw_config_case(
    "billion-laughs",
    "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8)
    )
    + "builders: *i\n",
)
raw_config_case("binary-garbage", bytes(range(256)) * 4)
raw_config_case(
    "duplicate-key", yaml.safe_dump(base_config()) + "r_find: 2\n", "duplicate key 'r_find'"
)


@case("bf-config-missing", "error", "nope.yaml")
def _(box: Sandbox) -> list[str]:
    return ["buildfind", "run", str(box.inputs / "nope.yaml"), "-o", str(box.run_dir)]


@case("bf-config-is-directory", "error", "adir")
def _(box: Sandbox) -> list[str]:
    (box.inputs / "adir").mkdir()
    return ["buildfind", "run", str(box.inputs / "adir"), "-o", str(box.run_dir)]


@case("bf-config-fifo", "error", "fifo.yaml")
def _(box: Sandbox) -> list[str]:
    os.mkfifo(box.inputs / "fifo.yaml")  # reading it would block forever
    return ["buildfind", "run", str(box.inputs / "fifo.yaml"), "-o", str(box.run_dir)]


@case("bf-config-pack-is-home", "error", "ssh")
def _(box: Sandbox) -> list[str]:
    config = base_config() | {"pack": str(box.home / ".ssh"), "tasks": []}
    return ["buildfind", "run", str(box.write("run.yaml", yaml.safe_dump(config)))]


@case("bf-config-pack-is-file", "error", "netrc")
def _(box: Sandbox) -> list[str]:
    config = base_config() | {"pack": str(box.home / ".netrc")}
    path = box.write("run.yaml", yaml.safe_dump(config))
    return ["buildfind", "run", str(path), "-o", str(box.run_dir)]


@case("bf-output-is-file", "error", "occupied")
def _(box: Sandbox) -> list[str]:
    (box.work / "occupied").write_text("not a directory\n")
    path = box.write("run.yaml", yaml.safe_dump(base_config()))
    return ["buildfind", "run", str(path), "-o", str(box.work / "occupied")]


# ---------------------------------------------------------------------------------------------
# buildfind validate: packs


def pack_case(id: str, edit: Callable[[Path], None], *needles: str, expect="findings") -> None:
    def setup(box: Sandbox) -> list[str]:
        pack = box.inputs / "pack"
        shutil.copytree(PACK / "http-router", pack / "http-router", symlinks=True)
        edit(pack / "http-router")
        return ["buildfind", "validate", str(pack)]

    CASES.append(Case(f"bf-pack-{id}", setup, expect, needles))


def _yaml_edit(name: str, path: str, value: object) -> Callable[[Path], None]:
    def edit(task: Path) -> None:
        data = yaml.safe_load((task / name).read_text())
        target = data
        parts = path.split(".")
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target[part]
        last = parts[-1]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
        (task / name).write_text(yaml.safe_dump(data))

    return edit


def _replace_file(name: str, content: str | bytes) -> Callable[[Path], None]:
    def edit(task: Path) -> None:
        if isinstance(content, bytes):
            (task / name).write_bytes(content)
        else:
            (task / name).write_text(content)

    return edit


for _index, _value in enumerate(["sixty", -5, 0, float("nan"), float("inf"), None, [1, 2]]):
    pack_case(f"build-time-{_index}", _yaml_edit("task.yaml", "build_time_s", _value), "task.yaml")
for _index, _value in enumerate(["../../..", "/etc", "missing-dir", 7]):
    pack_case(f"starter-{_index}", _yaml_edit("task.yaml", "starter", _value), "starter")
pack_case("compile-probe-empty", _yaml_edit("task.yaml", "compile_probe", "  "), "compile_probe")
pack_case("gold-z", _yaml_edit("questions.yaml", "questions.0.gold", "Z"), "gold")
pack_case(
    "options-three", _yaml_edit("questions.yaml", "questions.0.options", {"A": "x"}), "options"
)
pack_case("options-list", _yaml_edit("questions.yaml", "questions.0.options", ["a"]), "options")
pack_case("trace-ghost", _yaml_edit("questions.yaml", "questions.0.traces", ["ghost"]), "traces")
pack_case("traces-empty", _yaml_edit("questions.yaml", "questions.0.traces", []), "traces")
pack_case("question-id-escape", _yaml_edit("questions.yaml", "questions.0.id", "../x"), "id")
pack_case("question-id-list", _yaml_edit("questions.yaml", "questions.0.id", [7]), "questions")
pack_case("questions-list-empty", _yaml_edit("questions.yaml", "questions", []), "questions")
pack_case("spec-item-kind", _yaml_edit("spec.yaml", "items.0.kind", "vibe"), "kind")
pack_case("spec-item-id-slash", _yaml_edit("spec.yaml", "items.0.id", "a/b"), "spec.yaml")
pack_case("spec-items-map", _yaml_edit("spec.yaml", "items", {"a": 1}), "items")
for _name in ("task.yaml", "spec.yaml", "questions.yaml"):
    _short = _name.split(".")[0]
    pack_case(f"{_short}-empty", _replace_file(_name, ""), _name)
    pack_case(f"{_short}-not-utf8", _replace_file(_name, b"\xff\xfe\x00garbage"), _name)
    pack_case(f"{_short}-bad-yaml", _replace_file(_name, "a: [b\n"), _name)
    pack_case(f"{_short}-list", _replace_file(_name, "- 1\n- 2\n"), _name)
    pack_case(f"{_short}-deep", _replace_file(_name, "a: " + "[" * 5000 + "]" * 5000), _name)
    pack_case(f"{_short}-missing", lambda task, n=_name: (task / n).unlink(), _name)
    pack_case(f"{_short}-dup-key", _replace_file(_name, "a: 1\na: 2\n"), _name)


@case("bf-pack-task-dir-bad-name", "findings", "bad name")
def _(box: Sandbox) -> list[str]:
    pack = box.inputs / "pack"
    shutil.copytree(PACK / "http-router", pack / "bad name")
    return ["buildfind", "validate", str(pack)]


@case("bf-pack-empty", "findings", "pack")
def _(box: Sandbox) -> list[str]:
    (box.inputs / "pack").mkdir()
    return ["buildfind", "validate", str(box.inputs / "pack")]


@case("bf-pack-missing", "findings", "nope")
def _(box: Sandbox) -> list[str]:
    return ["buildfind", "validate", str(box.inputs / "nope")]


@case("bf-run-broken-pack", "error", "questions.yaml", "gold")
def _(box: Sandbox) -> list[str]:
    pack = box.inputs / "pack"
    shutil.copytree(PACK / "http-router", pack / "http-router")
    _yaml_edit("questions.yaml", "questions.0.gold", "Z")(pack / "http-router")
    config = base_config() | {"pack": str(pack)}
    path = box.write("run.yaml", yaml.safe_dump(config))
    return ["buildfind", "run", str(path), "-o", str(box.run_dir)]


# ---------------------------------------------------------------------------------------------
# buildfind analyze --rows

ROWS_COLUMNS = [
    "slice",
    "task",
    "builder",
    "builder_family",
    "finder",
    "finder_family",
    "effort_panel",
    "build_trial",
    "find_trial",
    "question_id",
    "gold",
    "answer",
    "correct",
    "compile_pass",
    "label",
    "label_source",
    "novel_retrieval_bytes",
    "novel_tool_call_bytes",
    "input_tokens",
    "output_tokens",
]


def rows_records(n_runs: int = 3) -> list[dict]:
    """A small, valid rows table: formal finds on two builders plus a question-only control."""
    records = []
    for slice_name, builder, build_trial in (
        ("formal", "b1", 0),
        ("formal", "b2", 0),
        ("question_only", "", -1),
    ):
        for run in range(n_runs):
            for q, gold in (("q1", "A"), ("q2", "B"), ("q3", "C")):
                answer = gold if (run + len(builder) + int(q[1])) % 3 else "D"
                records.append(
                    {
                        "slice": slice_name,
                        "task": "t1",
                        "builder": builder,
                        "builder_family": "fam" if builder else "",
                        "finder": "f1",
                        "finder_family": "fam",
                        "effort_panel": "low",
                        "build_trial": build_trial,
                        "find_trial": run,
                        "question_id": q,
                        "gold": gold,
                        "answer": answer,
                        "correct": answer == gold,
                        "compile_pass": True if builder else None,
                        "label": "unlabeled",
                        "label_source": "none",
                        "novel_retrieval_bytes": 100 * (run + 1),
                        "novel_tool_call_bytes": 10,
                        "input_tokens": 1000,
                        "output_tokens": 100,
                    }
                )
    return records


def rows_csv(records: list[dict] | None = None, *, booleans: tuple[str, str] = ("true", "false")):
    records = rows_records() if records is None else records
    lines = [",".join(ROWS_COLUMNS)]
    for record in records:
        cells = []
        for column in ROWS_COLUMNS:
            value = record[column]
            if value is None:
                cells.append("")
            elif isinstance(value, bool):
                cells.append(booleans[0] if value else booleans[1])
            else:
                cells.append(str(value))
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


def rows_case(id: str, name: str, content: Callable[[], str | bytes], *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        path = box.write(name, content())
        return ["buildfind", "analyze", "--rows", str(path), "-o", str(box.run_dir)]

    CASES.append(Case(f"bf-rows-{id}", setup, "error", (name, *needles)))


def _edited(column: str, value: str, row: int = 0) -> Callable[[], str]:
    def content() -> str:
        lines = rows_csv().splitlines()
        cells = lines[row + 1].split(",")
        cells[ROWS_COLUMNS.index(column)] = value
        lines[row + 1] = ",".join(cells)
        return "\n".join(lines) + "\n"

    return content


def _parquet_bytes() -> bytes:
    import io

    buffer = io.BytesIO()
    df = pl.DataFrame(rows_records())
    df.write_parquet(buffer)
    return buffer.getvalue()


rows_case("csv-empty", "rows.csv", lambda: "")
rows_case("csv-blank", "rows.csv", lambda: "\n\n  \n")
rows_case("csv-not-utf8", "rows.csv", lambda: rows_csv().encode() + b"formal,\xff\xfe\n", "line 29")
rows_case("csv-latin1", "rows.csv", lambda: rows_csv().replace("t1", "t\u00e9").encode("latin-1"))
rows_case("csv-nul", "rows.csv", lambda: rows_csv() + "\x00\x00\n")
rows_case("csv-header-only-missing", "rows.csv", lambda: "slice,task\n", "missing column")
rows_case("csv-extra-column", "rows.csv", lambda: rows_csv().replace("slice,", "extra,slice,", 1))
rows_case("csv-truncated", "rows.csv", lambda: rows_csv()[: len(rows_csv()) // 2])
rows_case("csv-binary", "rows.csv", lambda: bytes(range(256)) * 8)
rows_case("csv-correct-maybe", "rows.csv", _edited("correct", "maybe"), "correct", "row 2")
rows_case("csv-correct-2", "rows.csv", _edited("correct", "2", 4), "correct", "row 6")
rows_case("csv-correct-empty", "rows.csv", _edited("correct", ""), "correct")
rows_case("csv-build-trial-word", "rows.csv", _edited("build_trial", "one"), "build_trial")
rows_case("csv-build-trial-huge", "rows.csv", _edited("build_trial", "9" * 30), "build_trial")
rows_case("csv-build-trial-float", "rows.csv", _edited("build_trial", "1.5"), "build_trial")
rows_case("csv-tokens-negative-word", "rows.csv", _edited("input_tokens", "-x"), "input_tokens")
rows_case("csv-slice-bad", "rows.csv", _edited("slice", "sideways"), "slice")
rows_case("csv-slice-empty", "rows.csv", _edited("slice", ""), "slice")
rows_case("csv-gold-bad", "rows.csv", _edited("gold", "Z"), "gold")
rows_case("csv-answer-bad", "rows.csv", _edited("answer", "E"), "answer")
rows_case("csv-label-bad", "rows.csv", _edited("label", "great"), "label")
rows_case("csv-label-source-bad", "rows.csv", _edited("label_source", "vibes"), "label_source")
rows_case("csv-question-id-empty", "rows.csv", _edited("question_id", ""), "question_id")
rows_case("csv-too-many-fields", "rows.csv", lambda: rows_csv().replace("\n", ",x,y\n", 3))
rows_case("csv-unclosed-quote", "rows.csv", lambda: rows_csv() + 'formal,"unclosed\n')
rows_case("parquet-empty", "rows.parquet", lambda: b"")
rows_case("parquet-random", "rows.parquet", lambda: os.urandom(4096), "Parquet")
rows_case("parquet-is-csv", "rows.parquet", lambda: rows_csv(), "Parquet")
rows_case("parquet-truncated", "rows.parquet", lambda: _parquet_bytes()[:-100], "Parquet")
rows_case("parquet-head-cut", "rows.parquet", lambda: _parquet_bytes()[:300], "Parquet")
rows_case(
    "parquet-corrupt-middle",
    "rows.parquet",
    lambda: (lambda b: b[:4] + os.urandom(len(b) - 8) + b[-4:])(_parquet_bytes()),
    "Parquet",
)
rows_case(
    "parquet-magic-only",
    "rows.parquet",
    lambda: b"PAR1" + b"\x00" * 16 + b"PAR1",
    "Parquet",
)
rows_case("csv-is-parquet", "rows.csv", _parquet_bytes)


def _parquet_of(df: pl.DataFrame) -> Callable[[], bytes]:
    def content() -> bytes:
        import io

        buffer = io.BytesIO()
        df.write_parquet(buffer)
        return buffer.getvalue()

    return content


_good = pl.DataFrame(rows_records())
rows_case("parquet-missing-col", "rows.parquet", _parquet_of(_good.drop("gold")), "gold")
rows_case("parquet-extra-col", "rows.parquet", _parquet_of(_good.with_columns(x=pl.lit(1))), "x")
rows_case(
    "parquet-correct-text",
    "rows.parquet",
    _parquet_of(_good.with_columns(correct=pl.lit("sometimes"))),
    "correct",
)
rows_case(
    "parquet-trial-text",
    "rows.parquet",
    _parquet_of(_good.with_columns(find_trial=pl.lit("first"))),
    "find_trial",
)
rows_case(
    "parquet-trial-list",
    "rows.parquet",
    _parquet_of(_good.with_columns(find_trial=pl.lit([1, 2]))),
    "find_trial",
)
rows_case(
    "parquet-null-task",
    "rows.parquet",
    _parquet_of(_good.with_columns(task=pl.lit(None, dtype=pl.Utf8))),
    "task",
)
rows_case(
    "parquet-trial-overflow",
    "rows.parquet",
    _parquet_of(_good.with_columns(build_trial=pl.lit(2**40, dtype=pl.Int64))),
    "build_trial",
)
rows_case("wrong-suffix", "rows.txt", lambda: rows_csv(), ".parquet or .csv")


@case("bf-rows-missing", "error", "nope.csv")
def _(box: Sandbox) -> list[str]:
    return ["buildfind", "analyze", "--rows", str(box.inputs / "nope.csv")]


@case("bf-rows-directory", "error", "dir.csv")
def _(box: Sandbox) -> list[str]:
    (box.inputs / "dir.csv").mkdir()
    return ["buildfind", "analyze", "--rows", str(box.inputs / "dir.csv")]


@case("bf-rows-fifo", "error", "fifo.csv")
def _(box: Sandbox) -> list[str]:
    os.mkfifo(box.inputs / "fifo.csv")
    return ["buildfind", "analyze", "--rows", str(box.inputs / "fifo.csv")]


@case("bf-rows-link-to-netrc", "error", "rows.csv", "missing column")
def _(box: Sandbox) -> list[str]:
    (box.inputs / "rows.csv").symlink_to(box.home / ".netrc")
    return ["buildfind", "analyze", "--rows", str(box.inputs / "rows.csv"), "-o", str(box.run_dir)]


@case("bf-analyze-output-is-file", "error", "output", "not a directory")
def _(box: Sandbox) -> list[str]:
    (box.work / "occupied").write_text("x\n")
    rows = box.write("rows.csv", rows_csv())
    return ["buildfind", "analyze", "--rows", str(rows), "-o", str(box.work / "occupied")]


@case("bf-analyze-neither", "error", "rows")
def _(box: Sandbox) -> list[str]:
    return ["buildfind", "analyze"]


@case("bf-analyze-not-a-run", "error", "question_rows.parquet")
def _(box: Sandbox) -> list[str]:
    return ["buildfind", "analyze", str(box.inputs)]


@case("bf-label-not-a-run", "error", "inputs")
def _(box: Sandbox) -> list[str]:
    return ["buildfind", "label", str(box.inputs)]


# ---------------------------------------------------------------------------------------------
# buildfind label / analyze on a finished run whose human-edited files are hostile


def label_case(id: str, name: str, content: str | bytes, *needles: str) -> None:
    """Copy the finished reference run, replace one file under it, run `buildfind label`."""

    def setup(box: Sandbox) -> list[str]:
        shutil.copytree(box.reference, box.run_dir, symlinks=True)
        target = box.run_dir / name
        target.unlink(missing_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
        return ["buildfind", "label", str(box.run_dir)]

    CASES.append(Case(f"bf-label-{id}", setup, "error", (Path(name).name, *needles)))


_REVIEW_HEADER = (
    "task,builder,build_trial,question_id,question,gold,observed_answers,base_answers,reason,"
    "label,reviewer,notes\n"
)
_REVIEW_ROW = "http-router,divergent,{trial},q09,Q?,A,none,none,why,{label},me,\n"
_REVIEW = "labels/review.csv"
label_case("review-not-utf8", _REVIEW, _REVIEW_HEADER.encode() + b"\xff\xfe,\x00\n")
label_case(
    "review-bad-label",
    _REVIEW,
    _REVIEW_HEADER + _REVIEW_ROW.format(trial=0, label="great"),
    "label",
    "row 1",
)
label_case("review-missing-columns", _REVIEW, "task,label\nx,y\n", "missing column")
label_case(
    "review-trial-word",
    _REVIEW,
    _REVIEW_HEADER + _REVIEW_ROW.format(trial="one", label=""),
    "build_trial",
)
label_case(
    "review-trial-huge",
    _REVIEW,
    _REVIEW_HEADER + _REVIEW_ROW.format(trial="9" * 20, label=""),
    "build_trial",
)
label_case(
    "review-duplicate-pair",
    _REVIEW,
    _REVIEW_HEADER + _REVIEW_ROW.format(trial=0, label="") * 2,
    "row 2",
)
label_case("review-extra-fields", _REVIEW, _REVIEW_HEADER + "a,b,0,q,,,,,,,,,x,y,z\n", "row 1")
label_case("review-nul-label", _REVIEW, _REVIEW_HEADER + "a,c,0,q,,,,,,x\x00,,\n", "label")
label_case("review-huge-field", _REVIEW, _REVIEW_HEADER + 'a,b,0,q,"' + "x" * 200_000 + '"\n')
_EVIDENCE = "labels/evidence_audit.csv"
label_case("evidence-not-utf8", _EVIDENCE, b"audit_id,evidence_label\n\xff\xfe\n")
label_case("evidence-missing-columns", _EVIDENCE, "audit_id,notes\n1,x\n", "evidence_label")
label_case(
    "evidence-bad-label",
    _EVIDENCE,
    "audit_id,stratum,task,prior_status,evidence_label\n1,s,t,low_prior,amazing\n",
    "evidence_label",
    "amazing",
)
label_case("evidence-garbage", _EVIDENCE, bytes(range(256)) * 8)
label_case("evidence-unclosed-quote", _EVIDENCE, 'audit_id,evidence_label\n1,"open\n')
label_case("manifest-garbage", "manifest.json", "{{{not json", "manifest.json")
label_case("manifest-list", "manifest.json", "[]", "manifest.json")
label_case("manifest-not-utf8", "manifest.json", b"\xff\xfe", "manifest.json")


# ---------------------------------------------------------------------------------------------
# audit: benchmarks' hints files, gold files, agent results, run directories

AUDIT_BENCH = REPO / "examples" / "audit-bench"


def hints_case(id: str, content: str | bytes, *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        bench = box.inputs / "bench"
        shutil.copytree(AUDIT_BENCH, bench)
        hints = bench / "benchguard_hints.yaml"
        hints.write_bytes(content if isinstance(content, bytes) else content.encode())
        return [
            "audit",
            "run",
            str(bench),
            "--static-only",
            "--no-execution",
            "-o",
            str(box.run_dir),
        ]

    CASES.append(Case(f"audit-hints-{id}", setup, "error", ("benchguard_hints.yaml", *needles)))


hints_case("garbage-yaml", "general: [unclosed\n")
hints_case("list", "- a\n- b\n")
hints_case("not-utf8", b"general: \xff\xfe\n")
hints_case("deep", "general: " + "[" * 5000 + "]" * 5000 + "\n")
hints_case("tasks-list", "tasks: [1, 2]\n", "tasks")
hints_case("unknown-key", "colour: red\n", "colour")
hints_case("task-hint-int", "tasks:\n  grade-mean:\n    local: maybe\n", "local")


def gold_case(id: str, content: str | bytes, *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        gold = box.write("gold.json", content)
        shutil.copytree(box.audit_run, box.run_dir)
        return ["audit", "score", str(box.run_dir), "--gold", str(gold), "--judge", "scripted/x"]

    CASES.append(Case(f"audit-gold-{id}", setup, "error", ("gold.json", *needles)))


gold_case("empty", "")
gold_case("garbage", "{{{")
gold_case("list", "[]")
gold_case("not-utf8", b"\xff\xfe")
gold_case("deep", "[" * 100_000 + "]" * 100_000)
gold_case("no-tasks", "{}", "tasks")
gold_case("tasks-list", '{"tasks": []}', "tasks")
gold_case("issues-string", '{"tasks": {"grade-mean": {"issues": "x"}}}', "issues")
gold_case(
    "category-unknown",
    '{"tasks": {"grade-mean": {"issues": [{"id": "a", "category": "NOPE", "description": "d"}]}}}',
    "category",
)


@case("audit-run-missing-bench", "error", "nope")
def _(box: Sandbox) -> list[str]:
    return ["audit", "run", str(box.inputs / "nope"), "--static-only", "-o", str(box.run_dir)]


@case("audit-run-bench-is-file", "error", "afile")
def _(box: Sandbox) -> list[str]:
    return ["audit", "run", str(box.write("afile", "x")), "--static-only", "-o", str(box.run_dir)]


@case("audit-run-tier-bogus", "error", "tier")
def _(box: Sandbox) -> list[str]:
    return ["audit", "run", str(AUDIT_BENCH), "--tier", "bogus", "-o", str(box.run_dir)]


@case("audit-run-unknown-task", "error", "ghost")
def _(box: Sandbox) -> list[str]:
    return [
        "audit",
        "run",
        str(AUDIT_BENCH),
        "--static-only",
        "--task",
        "ghost",
        "-o",
        str(box.run_dir),
    ]


@case("audit-run-agent-results-garbage", "error", "results.json")
def _(box: Sandbox) -> list[str]:
    results = box.write("results.json", "{{{")
    return [
        "audit",
        "run",
        str(AUDIT_BENCH),
        "--static-only",
        "--tier",
        "execution",
        "--agent-results",
        str(results),
        "-o",
        str(box.run_dir),
    ]


@case("audit-report-not-a-run", "error", "inputs")
def _(box: Sandbox) -> list[str]:
    return ["audit", "report", str(box.inputs)]


@case("audit-score-not-a-run", "error", "inputs")
def _(box: Sandbox) -> list[str]:
    gold = AUDIT_BENCH / "gold.json"
    return ["audit", "score", str(box.inputs), "--gold", str(gold), "--judge", "scripted/x"]


@case("audit-convert-garbage", "error", "task.yaml")
def _(box: Sandbox) -> list[str]:
    src = box.inputs / "tb1"
    src.mkdir()
    (src / "task.yaml").write_text("instruction: [unclosed\n")
    return ["audit", "convert", str(src), str(box.run_dir)]


# ---------------------------------------------------------------------------------------------
# demo --questions: a question bank about the bundled repository


def questions_case(id: str, content: str | bytes, *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        bank = box.write("questions.yaml", content)
        return ["demo", "--part", "qa", "--questions", str(bank), "--run-dir", str(box.run_dir)]

    CASES.append(Case(f"demo-questions-{id}", setup, "error", ("questions.yaml", *needles)))


_Q = "questions:\n  - {{id: {id}, question: q, options: {{A: a, B: b, C: c, D: d}}, gold: A}}\n"
questions_case("garbage", "questions: [unclosed\n")
questions_case("not-utf8", b"\xff\xfe")
questions_case("deep", "questions: " + "[" * 5000 + "]" * 5000 + "\n")
questions_case("empty", "")
questions_case("id-escape", _Q.format(id='"../../x"'), "questions.0.id")
questions_case("id-slash", _Q.format(id='"a/b"'), "questions.0.id")
questions_case("options-three", "questions:\n  - {id: a, question: q, options: {A: a}, gold: A}\n")


# ---------------------------------------------------------------------------------------------
# improve: manifests, suites, bundles, patches


def improve_manifest(box: Sandbox) -> dict:
    manifest = json.loads((IMPROVE / "manifest-scripted.json").read_text())
    manifest["sut"]["sut_config"] = str(IMPROVE / manifest["sut"]["sut_config"])
    for key in ("optimize", "held_out"):
        section = manifest["evaluation"].get(key) or {}
        if "suite_config" in section:
            section["suite_config"] = str(IMPROVE / section["suite_config"])
    manifest["output"] = str(box.run_dir)
    manifest["baseline"]["repo"] = str(box.baseline)
    return manifest


def manifest_case(id: str, mutate: Callable[[dict, Sandbox], None], *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        manifest = improve_manifest(box)
        mutate(manifest, box)
        path = box.write("manifest.json", json.dumps(manifest))
        return ["improve", "run", str(path)]

    CASES.append(Case(f"improve-manifest-{id}", setup, "error", ("manifest.json", *needles)))


def _mset(path: str, value: object) -> Callable[[dict, Sandbox], None]:
    def mutate(manifest: dict, box: Sandbox) -> None:
        _set(path, value)(manifest)

    return mutate


for _key in ("escape", "slash", "empty", "hidden", "nul", "long"):
    manifest_case(f"baseline-id-{_key}", _mset("baseline.id", BAD_NAMES[_key]), "baseline.id")
for _index, _value in enumerate([10**9, 0, -1, "3", 1.5, None, True]):
    manifest_case(f"trial-budget-{_index}", _mset("trial_budget", _value), "trial_budget")
for _index, _value in enumerate([1e308, -1, 0, "60"]):
    manifest_case(
        f"task-timeout-{_index}",
        _mset("target_budget.task_timeout_s", _value),
        "target_budget.task_timeout_s",
    )
manifest_case("max-steps-huge", _mset("target_budget.max_steps_per_task", 10**12), "max_steps")
manifest_case("step-timeout-huge", _mset("budget_step_timeout_s", 1e300), "budget_step_timeout_s")
manifest_case("n-ctx-huge", _mset("sum.n_ctx", 10**15), "sum.n_ctx")
manifest_case("mode-bad", _mset("mode", "yolo"), "mode")


def _output_is_file(manifest: dict, box: Sandbox) -> None:
    (box.work / "occupied").write_text("x\n")
    manifest["output"] = str(box.work / "occupied")


manifest_case("output-is-file", _output_is_file, "output", "not a directory")
manifest_case("unknown-key", _mset("colour", "red"), "colour")
manifest_case("base-commit-bad", _mset("baseline.base_commit", "; rm -rf /"), "base_commit")
manifest_case("repo-missing", _mset("baseline.repo", "/nonexistent/repo"), "baseline.repo")
manifest_case("sut-missing", _mset("sut.sut_config", "/nonexistent/sut.json"), "sut")
CASES.append(
    Case(
        "improve-manifest-sut-is-netrc",
        lambda box: [
            "improve",
            "run",
            str(
                box.write(
                    "manifest.json",
                    json.dumps(
                        improve_manifest(box) | {"sut": {"sut_config": str(box.home / ".netrc")}}
                    ),
                )
            ),
        ],
        "error",
        (".netrc", "invalid JSON"),
    )
)


def raw_manifest_case(id: str, content: str | bytes, *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        return ["improve", "run", str(box.write("manifest.json", content))]

    CASES.append(Case(f"improve-manifest-{id}", setup, "error", ("manifest.json", *needles)))


raw_manifest_case("empty", "")
raw_manifest_case("not-json", "{mode: recursive}")
raw_manifest_case("list", "[1, 2]")
raw_manifest_case("not-utf8", b'{"mode": "\xff"}')
raw_manifest_case("nan", '{"trial_budget": NaN}')
raw_manifest_case("deep", "[" * 100_000 + "]" * 100_000)
raw_manifest_case("deep-object", '{"a":' * 50_000 + "1" + "}" * 50_000)
raw_manifest_case("duplicate-key", '{"mode": "recursive_search", "mode": "x"}', "mode")
raw_manifest_case("huge-number", '{"trial_budget": 1' + "0" * 5000 + "}")


def suite_case(id: str, mutate: Callable[[dict], None], *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        suite = json.loads((IMPROVE / "suites" / "terminal_optimize.json").read_text())
        suite["tasks_dir"] = str((IMPROVE / "suites" / suite["tasks_dir"]).resolve())
        mutate(suite)
        suite_path = box.write("suite.json", json.dumps(suite))
        manifest = improve_manifest(box)
        manifest["evaluation"]["optimize"]["suite_config"] = str(suite_path)
        return ["improve", "run", str(box.write("manifest.json", json.dumps(manifest)))]

    CASES.append(Case(f"improve-suite-{id}", setup, "error", ("suite.json", *needles)))


for _key in ("escape", "slash", "empty", "absolute", "hidden"):
    suite_case(f"task-id-{_key}", _set("task_ids", [BAD_NAMES[_key]]), "task_ids")
suite_case("split-escape", _set("split_id", "../x"), "split_id")
suite_case("tasks-dir-missing", _set("tasks_dir", "/nonexistent"), "tasks_dir")
suite_case("tasks-dir-home", _set("tasks_dir", "~"), "tasks_dir")
suite_case("concurrency-huge", _set("concurrency", 10**6), "concurrency")
suite_case("timeout-huge", _set("task_timeout_s", 1e300), "task_timeout_s")
suite_case("command-timeout-zero", _set("command_timeout_s", 0), "command_timeout_s")
suite_case("max-steps-huge", _set("max_steps_per_task", 10**10), "max_steps_per_task")


@case("improve-suite-manifest-bad-split", "error", "suite.json", "splits")
def _(box: Sandbox) -> list[str]:
    tasks = box.inputs / "tasks"
    shutil.copytree(SUITES / "terminal", tasks)
    data = json.loads((tasks / "suite.json").read_text())
    data["splits"]["optimize"] = ["../../outside"]
    (tasks / "suite.json").write_text(json.dumps(data))
    suite = json.loads((IMPROVE / "suites" / "terminal_optimize.json").read_text())
    suite["tasks_dir"] = str(tasks)
    manifest = improve_manifest(box)
    manifest["evaluation"]["optimize"]["suite_config"] = str(box.write("s.json", json.dumps(suite)))
    return ["improve", "run", str(box.write("manifest.json", json.dumps(manifest)))]


def broken_task_case(id: str, breakage: Callable[[Path], None], *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        tasks = box.inputs / "tasks"
        shutil.copytree(SUITES / "terminal", tasks)
        first = json.loads((tasks / "suite.json").read_text())["splits"]["optimize"][0]
        breakage(tasks / first)
        suite = json.loads((IMPROVE / "suites" / "terminal_optimize.json").read_text())
        suite["tasks_dir"] = str(tasks)
        manifest = improve_manifest(box)
        suite_path = box.write("suite.json", json.dumps(suite))
        manifest["evaluation"]["optimize"]["suite_config"] = str(suite_path)
        return ["improve", "run", str(box.write("manifest.json", json.dumps(manifest)))]

    CASES.append(Case(f"improve-suite-{id}", setup, "error", ("suite.json", *needles)))


broken_task_case(
    "task-toml-garbage", lambda t: (t / "task.toml").write_text("[[[ nope"), "task.toml"
)
broken_task_case(
    "task-toml-not-utf8", lambda t: (t / "task.toml").write_bytes(b"\xff\xfe"), "task.toml"
)
broken_task_case("no-instruction", lambda t: (t / "instruction.md").unlink(), "instruction.md")
broken_task_case("no-tests", lambda t: (t / "tests" / "test.sh").unlink(), "tests/test.sh")


def bundle_case(id: str, files: dict[str, str | bytes], *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        bundle = box.inputs / "bundle"
        bundle.mkdir()
        for name, content in files.items():
            (bundle / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        return ["improve", "report", str(bundle)]

    CASES.append(Case(f"improve-report-{id}", setup, "error", ("bundle", *needles)))


bundle_case("empty-dir", {}, "resolved_manifest.json")
bundle_case("manifest-garbage", {"resolved_manifest.json": "{{{"}, "resolved_manifest.json")
bundle_case("manifest-list", {"resolved_manifest.json": "[]"}, "resolved_manifest.json")
bundle_case("manifest-not-utf8", {"resolved_manifest.json": b"\xff\xfe"}, "resolved_manifest")
bundle_case("manifest-no-baseline", {"resolved_manifest.json": "{}"}, "resolved_manifest.json")
_resolved = json.dumps({"baseline": {"id": "b", "base_commit": "abc1234"}, "trial_budget": 1})
bundle_case("no-baseline-eval", {"resolved_manifest.json": _resolved}, "baseline_evaluation")
bundle_case(
    "baseline-eval-wrong",
    {"resolved_manifest.json": _resolved, "baseline_evaluation.json": '{"x": 1}'},
    "baseline_evaluation.json",
)


@case("improve-report-missing", "error", "nope")
def _(box: Sandbox) -> list[str]:
    return ["improve", "report", str(box.inputs / "nope")]


@case("improve-report-file", "error", "afile")
def _(box: Sandbox) -> list[str]:
    return ["improve", "report", str(box.write("afile", "x"))]


def patch_case(id: str, patch: str | bytes, boundary: str | bytes | None, *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        patch_path = box.write("change.patch", patch)
        if boundary is None:
            boundary_path = box.write("boundary.json", json.dumps(_BOUNDARY))
        else:
            boundary_path = box.write("boundary.json", boundary)
        return ["improve", "check-patch", str(patch_path), "--boundary", str(boundary_path)]

    CASES.append(Case(f"improve-patch-{id}", setup, "error", needles))


_BOUNDARY = {"mutable_root": "target_agent", "allowed_paths": ["policy.py"]}
patch_case("boundary-garbage", "", "{{", "boundary.json")
patch_case("boundary-list", "", "[]", "boundary.json")
patch_case("boundary-not-utf8", "", b"\xff\xfe", "boundary.json")
patch_case("boundary-escape-root", "", json.dumps({"mutable_root": "../.."}), "boundary.json")
patch_case("boundary-deep", "", "[" * 100_000 + "]" * 100_000, "boundary.json")
patch_case("boundary-no-paths", "", json.dumps({"allowed_paths": []}), "allowed_paths")


def rejected_patch_case(id: str, patch: str | bytes, *needles: str) -> None:
    def setup(box: Sandbox) -> list[str]:
        boundary = box.write("boundary.json", json.dumps(_BOUNDARY))
        patch_path = box.write("change.patch", patch)
        return ["improve", "check-patch", str(patch_path), "--boundary", str(boundary)]

    CASES.append(Case(f"improve-patch-{id}", setup, "findings", ("rejected", *needles)))


_TRAVERSAL = "--- a/../../x\n+++ b/../../x\n@@ -1 +1 @@\n-a\n+b\n"
rejected_patch_case("empty", "", "empty_patch")
rejected_patch_case("garbage", "hello world\n", "malformed")
rejected_patch_case("not-utf8", b"\xff\xfe\x00\x01", "malformed")
rejected_patch_case("truncated-hunk", "--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n a\n", "truncated")
rejected_patch_case("traversal", _TRAVERSAL, "path_traversal")
rejected_patch_case(
    "absolute", "--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "outside_boundary"
)
rejected_patch_case("outside", "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n", "outside_boundary")


@case("improve-patch-missing", "error", "nope.patch")
def _(box: Sandbox) -> list[str]:
    boundary = box.write("boundary.json", json.dumps(_BOUNDARY))
    return ["improve", "check-patch", str(box.inputs / "nope.patch"), "--boundary", str(boundary)]


@case("improve-init-target-unknown", "error", "family")
def _(box: Sandbox) -> list[str]:
    return ["improve", "init-target", "no-such-family", str(box.work / "target")]


@case("improve-init-target-dest-file", "error", "occupied")
def _(box: Sandbox) -> list[str]:
    (box.work / "occupied").write_text("x")
    return ["improve", "init-target", "toolloop", str(box.work / "occupied")]


# ---------------------------------------------------------------------------------------------
# accepted spellings (must succeed, and agree with the canonical file)

BOOLEAN_SPELLINGS = {
    "1-0": ("1", "0"),
    "yes-no": ("yes", "no"),
    "upper": ("TRUE", "FALSE"),
    "mixed": ("Yes", "No"),
    "padded": (" true ", " false "),
}


# ---------------------------------------------------------------------------------------------
# the tests


@pytest.fixture(scope="module")
def baseline_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from metaeval.protocols.improve.init_target import init_target

    repo = tmp_path_factory.mktemp("baseline") / "target"
    init_target("toolloop", repo)
    return repo


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    example = REPO / "examples" / "buildfind-reference.yaml"
    result = subprocess.run(
        [*metaeval_argv(), "buildfind", "run", str(example), "-o", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return run_dir


@pytest.fixture(scope="module")
def audit_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("audit") / "run"
    argv = ["audit", "run", str(AUDIT_BENCH), "--static-only", "--no-execution", "-o", str(run_dir)]
    result = subprocess.run([*metaeval_argv(), *argv], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return run_dir


@pytest.fixture
def box(tmp_path: Path, baseline_repo: Path, reference_run: Path, audit_run: Path) -> Sandbox:
    return Sandbox(tmp_path, baseline_repo, reference_run, audit_run)


def check_clean(box: Sandbox, before: set[Path], result: subprocess.CompletedProcess[str]) -> str:
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert MARKER not in output, output
    # matplotlib keeps its font cache in the user's cache folders, as for any program using it
    caches = (box.home / ".cache" / "matplotlib", box.home / ".config" / "matplotlib")
    allowed = (box.inputs, box.run_dir, box.work / "runs", *caches)
    new = [
        p
        for p in box.tree() - before
        if not any(p.is_relative_to(a) for a in allowed) and p not in {c.parent for c in caches}
    ]
    assert not new, f"written outside the run directory: {sorted(map(str, new))}"
    for path in box.tree() - before:
        if path.is_file() and not path.is_symlink():
            assert MARKER.encode() not in path.read_bytes(), f"marker copied into {path}"
    return output


@pytest.mark.timeout(CLI_TIMEOUT_S + 30)
@pytest.mark.parametrize("hostile", CASES, ids=[c.id for c in CASES])
def test_hostile_input_is_refused_cleanly(box: Sandbox, hostile: Case) -> None:
    args = hostile.setup(box)
    before = box.tree()
    result = box.run(args)
    output = check_clean(box, before, result)
    assert "error: unexpected" not in output, output  # the crash guard must not answer
    if hostile.expect == "error":
        assert result.returncode == 2, output
        assert "error:" in result.stderr, output
    else:
        assert result.returncode == 1, output
    for needle in hostile.needles:
        assert needle in output, f"{needle!r} not named in: {output}"


@pytest.mark.parametrize("spelling", BOOLEAN_SPELLINGS)
def test_rows_csv_boolean_spellings_match_canonical(box: Sandbox, spelling: str) -> None:
    canonical = box.write("canonical.csv", rows_csv())
    variant = box.write("variant.csv", rows_csv(booleans=BOOLEAN_SPELLINGS[spelling]))
    outputs = []
    for path, out in ((canonical, box.work / "runs" / "a"), (variant, box.work / "runs" / "b")):
        before = box.tree()
        result = box.run(["buildfind", "analyze", "--rows", str(path), "-o", str(out)])
        check_clean(box, before, result)
        assert result.returncode == 0, result.stdout + result.stderr
        outputs.append(out)
    tables_a = sorted((outputs[0] / "tables").glob("*.csv"))
    assert tables_a, "no tables written"
    for table in tables_a:
        other = outputs[1] / "tables" / table.name
        assert other.read_bytes() == table.read_bytes(), table.name


def test_rows_csv_unreadable_value_names_row_and_column(box: Sandbox) -> None:
    path = box.write("rows.csv", _edited("correct", "perhaps", row=6)())
    result = box.run(["buildfind", "analyze", "--rows", str(path)])
    assert result.returncode == 2
    line = result.stderr.strip().splitlines()[-1]
    assert str(path) in line and "field 'correct'" in line and "row 8" in line, line
    assert "'perhaps'" in line and "true/false/1/0/yes/no" in line, line


def test_debug_flag_shows_traceback_only_on_request(box: Sandbox) -> None:
    """The crash guard: a one-line error by default, the traceback with --debug or the env var.

    No input known to the corpus reaches it any more, so a bug is planted in the analysis step
    of a real CLI process (the command line, its wrappers and the entry point are the real ones).
    """
    rows = box.write("rows.csv", rows_csv())
    planted = (
        "import sys, metaeval.protocols.buildfind.finalize as p\n"
        "def broken(*args):\n"
        "    raise KeyError('planted [/] bug')\n"
        "p.analyze_rows_file = broken\n"
        "from metaeval.cli import main\n"
        "sys.argv = ['metaeval', *sys.argv[1:]]\n"
        "main()\n"
    )
    args = ["buildfind", "analyze", "--rows", str(rows), "-o", str(box.run_dir)]
    env = {k: v for k, v in os.environ.items() if k != "METAEVAL_DEBUG"} | {"HOME": str(box.home)}

    def run(extra_env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", planted, *argv],
            cwd=box.work,
            env=env | extra_env,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )

    plain = run({}, *args)
    assert plain.returncode == 1
    assert "Traceback" not in plain.stderr
    lines = plain.stderr.strip().splitlines()
    assert lines[0] == "error: unexpected KeyError: 'planted [/] bug'", plain.stderr
    assert "--debug" in lines[1] and "METAEVAL_DEBUG=1" in lines[1]
    for debug in (run({}, "--debug", *args), run({"METAEVAL_DEBUG": "1"}, *args)):
        assert debug.returncode == 1
        assert "Traceback" in debug.stderr and "in broken" in debug.stderr
        assert "error: unexpected KeyError" in debug.stderr


def test_corpus_size() -> None:
    """The corpus covers every command family; the counts are quoted in the issue report."""
    families: dict[str, int] = {}
    for hostile in CASES:
        family = "-".join(hostile.id.split("-")[:2])
        families[family] = families.get(family, 0) + 1
    assert families["bf-config"] >= 80
    assert families["bf-pack"] >= 40
    assert families["bf-rows"] >= 45
    assert sum(v for k, v in families.items() if k.startswith("improve")) >= 60
    assert len({c.id for c in CASES}) == len(CASES)
