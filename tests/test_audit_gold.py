"""Gold files: parsing, and errors that name the file and the exact field path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metaeval.errors import ConfigError
from metaeval.protocols.audit.gold import Gold, load_gold, parse_gold

GOOD = {
    "tasks": {
        "scale-01": {
            "issues": [
                {
                    "id": "a",
                    "description": "Output unit unspecified",
                    "category": "INST-INCOMPLETE",
                },
                {
                    "id": "b",
                    "description": "Gold computes Pearson r, not R^2",
                    "category": "GT-LOGIC",
                    "evidence": "solution/solve.py line 12",
                },
            ]
        },
        "scale-02": {
            "issues": [
                {"id": "a", "description": "Tolerance too strict", "category": "EVAL-TOLERANCE"}
            ]
        },
        "clean-03": {"issues": []},
    }
}


def write(tmp_path: Path, data: Any, name: str = "gold.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2), encoding="utf-8")
    return path


def test_load_good_file(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    gold = load_gold(path)
    assert isinstance(gold, Gold)
    assert gold.path == str(path)
    assert gold.sha256.startswith("sha256:")
    assert list(gold.tasks) == ["scale-01", "scale-02", "clean-03"]
    assert gold.n_issues == 3
    assert gold.defective_tasks == ["scale-01", "scale-02"]
    assert gold.is_defective("scale-01") and not gold.is_defective("clean-03")
    assert not gold.is_defective("not-listed")
    assert gold.issues_for("clean-03") == [] and gold.issues_for("nope") == []
    a, b = gold.issues_for("scale-01")
    assert (a.task_id, a.id, a.category, a.evidence) == ("scale-01", "a", "INST-INCOMPLETE", "")
    assert b.evidence == "solution/solve.py line 12" and b.top_category == "GT"
    # Same issue id in different tasks is fine.
    assert gold.issues_for("scale-02")[0].id == "a"
    # Categories present, in taxonomy order (GT before EVAL before INST).
    assert gold.categories == ["GT-LOGIC", "EVAL-TOLERANCE", "INST-INCOMPLETE"]
    assert [i.id for i in gold.all_issues()] == ["a", "b", "a"]


def _with_issue(task: str, issues: list[Any]) -> dict[str, Any]:
    return {"tasks": {task: {"issues": issues}}}


GOOD_ISSUE = {"id": "x", "description": "d", "category": "INST-INCOMPLETE"}

MALFORMED: list[tuple[str, Any, str | None, str]] = [
    ("root not object", [1, 2], None, "expected an object, got array"),
    ("missing tasks", {}, "tasks", "missing required field"),
    ("unknown root field", {"tasks": {}, "version": 1}, "version", "unknown field"),
    ("tasks not object", {"tasks": []}, "tasks", "expected an object, got array"),
    ("task not object", {"tasks": {"t1": "x"}}, "tasks.t1", "expected an object, got string"),
    ("issues missing", {"tasks": {"t1": {}}}, "tasks.t1.issues", "missing required field"),
    (
        "issues not array",
        {"tasks": {"t1": {"issues": {}}}},
        "tasks.t1.issues",
        "expected an array, got object",
    ),
    (
        "issue not object",
        _with_issue("t1", [GOOD_ISSUE, 3]),
        "tasks.t1.issues[1]",
        "expected an object, got number",
    ),
    (
        "missing category",
        _with_issue("t1", [{"id": "x", "description": "d"}]),
        "tasks.t1.issues[0].category",
        "missing required field",
    ),
    (
        "unknown subcategory",
        _with_issue(
            "scale-01", [GOOD_ISSUE, {"id": "y", "description": "d", "category": "INST-FOO"}]
        ),
        "tasks.scale-01.issues[1].category",
        "unknown subcategory 'INST-FOO'",
    ),
    (
        "top-level category instead of subcategory",
        _with_issue("t1", [{"id": "x", "description": "d", "category": "INST"}]),
        "tasks.t1.issues[0].category",
        "unknown subcategory 'INST'",
    ),
    (
        "id not a string",
        _with_issue("t1", [{"id": 7, "description": "d", "category": "GT-DATA"}]),
        "tasks.t1.issues[0].id",
        "expected a string, got number",
    ),
    (
        "empty description",
        _with_issue("t1", [{"id": "x", "description": "  ", "category": "GT-DATA"}]),
        "tasks.t1.issues[0].description",
        "must not be empty",
    ),
    (
        "evidence not a string",
        _with_issue("t1", [{**GOOD_ISSUE, "evidence": ["a"]}]),
        "tasks.t1.issues[0].evidence",
        "expected a string, got array",
    ),
    (
        "misspelt field",
        _with_issue("t1", [{"id": "x", "description": "d", "categroy": "GT-DATA"}]),
        "tasks.t1.issues[0].categroy",
        "unknown field",
    ),
    (
        "duplicate issue id",
        _with_issue("t1", [GOOD_ISSUE, {**GOOD_ISSUE, "description": "other"}]),
        "tasks.t1.issues[1].id",
        "duplicate issue id 'x' (also tasks.t1.issues[0])",
    ),
    (
        "task id needing quotes",
        {"tasks": {"a.b c": {}}},
        'tasks["a.b c"].issues',
        "missing required field",
    ),
]


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_gold_names_file_and_field(
    tmp_path: Path, data: Any, field: str | None, message: str
) -> None:
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_gold(path)
    err = info.value
    assert err.file == str(path)
    assert err.field == field
    assert message in str(err)
    assert str(path) in str(err)
    if field:
        assert f"field '{field}'" in str(err)


def test_unknown_subcategory_suggests_close_match(tmp_path: Path) -> None:
    path = write(
        tmp_path, _with_issue("t", [{"id": "x", "description": "d", "category": "INST-INCOMPLTE"}])
    )
    with pytest.raises(ConfigError, match="did you mean 'INST-INCOMPLETE'"):
        load_gold(path)


def test_duplicate_task_key_is_an_error(tmp_path: Path) -> None:
    text = '{"tasks": {"t1": {"issues": []}, "t1": {"issues": []}}}'
    with pytest.raises(ConfigError) as info:
        load_gold(write(tmp_path, text))
    assert info.value.file == str(tmp_path / "gold.json")
    assert "duplicate key 't1'" in str(info.value)


def test_duplicate_key_inside_issue_is_an_error(tmp_path: Path) -> None:
    text = (
        '{"tasks": {"t1": {"issues": [{"id": "a", "id": "b", "description": "d", '
        '"category": "GT-FMT"}]}}}'
    )
    with pytest.raises(ConfigError) as info:
        load_gold(write(tmp_path, text))
    assert "duplicate key 'id'" in str(info.value)


def test_nan_is_refused(tmp_path: Path) -> None:
    text = '{"tasks": {"t1": {"issues": [], "weight": NaN}}}'
    with pytest.raises(ConfigError, match="NaN is not valid JSON"):
        load_gold(write(tmp_path, text))


def test_invalid_json_reports_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "tasks": {\n    "t1": {"issues": [}\n  }\n}\n')
    with pytest.raises(ConfigError) as info:
        load_gold(path)
    assert info.value.file == str(path)
    assert "invalid JSON at line 3, column" in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found") as info:
        load_gold(tmp_path / "absent.json")
    assert info.value.file == str(tmp_path / "absent.json")


def test_parse_gold_from_text_names_source() -> None:
    with pytest.raises(ConfigError, match="inline: field 'tasks'"):
        parse_gold("{}", file="inline")
    gold = parse_gold(json.dumps(GOOD))
    assert gold.n_issues == 3
