"""Task-pack schema, validation (every problem, with file and field) and loading."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.pack.load import (
    PackError,
    Problem,
    example_pack_dir,
    format_problems,
    load_pack,
    load_task,
    validate_pack,
)
from metaeval.protocols.buildfind.pack.schema import OPTION_KEYS, Pack, Question

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "buildfind-pack"

TASK_YAML = {
    "language": "python",
    "compile_probe": "python -m compileall -q .",
    "build_time_s": 600,
    "find_time_s": 300,
}
SPEC_YAML = {
    "items": [
        {"id": "b1", "kind": "behavior", "text": "Does one thing."},
        {"id": "d1", "kind": "design", "text": "Is laid out one way."},
    ]
}


def _question(qid: str, **changes) -> dict:
    question = {
        "id": qid,
        "question": f"Question {qid}?",
        "options": {"A": "first", "B": "second", "C": "third", "D": "fourth"},
        "gold": "B",
        "traces": ["b1"],
    }
    question.update(changes)
    return question


def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    path.write_text(text, encoding="utf-8")


def _good_task(root: Path, task_id: str = "good") -> Path:
    task = root / task_id
    _write(task / "task.yaml", TASK_YAML)
    _write(task / "spec.yaml", SPEC_YAML)
    _write(task / "questions.yaml", {"questions": [_question("q1"), _question("q2", gold="D")]})
    return task


def _broken_pack(root: Path) -> set[tuple[str, str | None]]:
    """A pack with one instance of every problem kind; returns the expected (file, field)."""
    _good_task(root, "good")

    # missing files
    _write(root / "missing" / "task.yaml", TASK_YAML)

    # YAML syntax error, and a duplicate mapping key
    _write(root / "badyaml" / "task.yaml", TASK_YAML)
    _write(root / "badyaml" / "spec.yaml", "items:\n  - id: b1\n    kind: [behavior\n")
    _write(
        root / "badyaml" / "questions.yaml",
        "questions:\n  - id: q1\n    question: Q?\n"
        "    options: {A: a, B: b, A: c, D: d}\n    gold: A\n    traces: [b1]\n",
    )

    task = root / "broken"
    _write(task / "task.yaml", {**TASK_YAML, "build_time_s": -5, "starter": "starter"})
    _write(
        task / "spec.yaml",
        {
            "items": [
                {"id": "b1", "kind": "behavior", "text": "One."},
                {"id": "b2", "kind": "feature", "text": "Two."},
                {"id": "b1", "kind": "design", "text": "Three."},
            ]
        },
    )
    questions = [
        _question("q1"),
        _question("q1"),  # duplicate question id
        _question("q3", options={"A": "same", "B": "Same ", "C": "x", "D": "{id}"}),
        _question("q4", gold="E"),  # gold not among the options
        _question("q5", traces=["b1", "nope"]),  # trace to an unknown spec id
        _question("q6", options={"A": "a", "B": "b", "C": "c"}),  # three options
        _question("q7", options={"A": "a", "B": "b", "C": "c", "E": "e"}, gold="A"),  # bad key
        _question("q8", traces=[]),  # no traces
        {k: v for k, v in _question("q9").items() if k != "question"},  # schema: missing field
    ]
    _write(task / "questions.yaml", {"questions": questions})
    return {
        ("missing/spec.yaml", None),
        ("missing/questions.yaml", None),
        ("badyaml/spec.yaml", None),
        ("badyaml/questions.yaml", None),
        ("broken/task.yaml", "build_time_s"),
        ("broken/task.yaml", "starter"),
        ("broken/spec.yaml", "items.1.kind"),
        ("broken/spec.yaml", "items.2.id"),
        ("broken/questions.yaml", "questions.1.id"),
        ("broken/questions.yaml", "questions.2.options"),
        ("broken/questions.yaml", "questions.3.gold"),
        ("broken/questions.yaml", "questions.4.traces.1"),
        ("broken/questions.yaml", "questions.5.options"),
        ("broken/questions.yaml", "questions.6.options"),
        ("broken/questions.yaml", "questions.7.traces"),
        ("broken/questions.yaml", "questions.8.question"),
    }


# --- the example pack -----------------------------------------------------------------------


def test_example_pack_has_no_problems():
    assert validate_pack(EXAMPLE) == []


def test_example_pack_loads_two_tasks_of_fifteen_questions():
    pack = load_pack(EXAMPLE)
    assert isinstance(pack, Pack)
    assert list(pack.tasks) == ["http-router", "kvstore-wal"]
    for task in pack.tasks.values():
        assert task.config.compile_probe == "python -m compileall -q ."
        assert task.config.build_time_s > 0 and task.config.find_time_s > 0
        assert task.starter_dir is None
        assert 12 <= len(task.spec.items) <= 16
        assert {item.kind for item in task.spec.items} == {"behavior", "design"}
        assert len(task.questions) == 15
        spec_ids = set(task.spec.ids())
        assert all(q.traces and set(q.traces) <= spec_ids for q in task.questions)
        golds = Counter(q.gold for q in task.questions)
        assert set(golds) == set(OPTION_KEYS) and max(golds.values()) <= 5
        assert task.spec_text == (task.root / "spec.yaml").read_text(encoding="utf-8")
        assert task.questions_text == (task.root / "questions.yaml").read_text(encoding="utf-8")
        assert len(task.spec_hash) == 64 and task.spec_hash != task.questions_hash


def test_example_pack_dir_finds_the_source_tree_pack():
    assert example_pack_dir().resolve() == EXAMPLE.resolve()


def test_lookups_by_id():
    pack = load_pack(EXAMPLE)
    task = pack.task("kvstore-wal")
    assert task.question("q01").traces == ["put-get"]
    assert task.spec.item("put-get").kind == "behavior"
    with pytest.raises(ConfigError, match="unknown task 'nope'"):
        pack.task("nope")
    with pytest.raises(ConfigError, match="no question 'q99'"):
        task.question("q99")
    with pytest.raises(ConfigError, match="no spec item 'zzz'"):
        task.spec.item("zzz")


# --- every problem kind ---------------------------------------------------------------------


def test_broken_pack_reports_every_problem_with_file_and_field(tmp_path):
    expected = _broken_pack(tmp_path)
    problems = validate_pack(tmp_path)
    assert all(isinstance(p, Problem) for p in problems)
    assert {(p.file, p.field) for p in problems} == expected
    assert len(problems) == len(expected)  # one problem per (file, field) here

    by_key = {(p.file, p.field): p.message for p in problems}
    assert by_key[("missing/spec.yaml", None)] == "missing file"
    assert by_key[("missing/questions.yaml", None)] == "missing file"
    assert "invalid YAML at line 4, column 1" in by_key[("badyaml/spec.yaml", None)]
    assert "line 4" in by_key[("badyaml/questions.yaml", None)]
    assert "duplicate key 'A'" in by_key[("badyaml/questions.yaml", None)]
    assert "greater than 0" in by_key[("broken/task.yaml", "build_time_s")]
    assert "does not exist" in by_key[("broken/task.yaml", "starter")]
    assert "duplicate spec item id 'b1'" in by_key[("broken/spec.yaml", "items.2.id")]
    assert "items.0" in by_key[("broken/spec.yaml", "items.2.id")]
    assert "duplicate question id 'q1'" in by_key[("broken/questions.yaml", "questions.1.id")]
    assert (
        "options A and B have the same text"
        in by_key[("broken/questions.yaml", "questions.2.options")]
    )
    assert "not one of the option keys" in by_key[("broken/questions.yaml", "questions.3.gold")]
    assert "'nope'" in by_key[("broken/questions.yaml", "questions.4.traces.1")]
    assert (
        "exactly the keys A, B, C, D (got A, B, C)"
        in by_key[("broken/questions.yaml", "questions.5.options")]
    )
    assert "(got A, B, C, E)" in by_key[("broken/questions.yaml", "questions.6.options")]
    assert "at least one spec item" in by_key[("broken/questions.yaml", "questions.7.traces")]
    assert "required" in by_key[("broken/questions.yaml", "questions.8.question")].lower()


def test_problems_are_listed_in_task_and_file_order(tmp_path):
    _broken_pack(tmp_path)
    files = [p.file for p in validate_pack(tmp_path)]
    order = [f.split("/")[0] for f in files]
    assert order == sorted(order)  # badyaml < broken < missing; good has none


def test_unreadable_spec_skips_trace_checks_but_not_the_rest(tmp_path):
    task = _good_task(tmp_path)
    (task / "spec.yaml").unlink()
    _write(task / "questions.yaml", {"questions": [_question("q1", traces=["ghost"], gold="Z")]})
    pairs = {(p.file, p.field) for p in validate_pack(tmp_path)}
    assert pairs == {("good/spec.yaml", None), ("good/questions.yaml", "questions.0.gold")}


def test_starter_must_exist_and_stay_inside_the_task(tmp_path):
    task = _good_task(tmp_path)
    (task / "starter").mkdir()
    _write(task / "task.yaml", {**TASK_YAML, "starter": "starter"})
    assert validate_pack(tmp_path) == []
    assert load_pack(tmp_path).task("good").starter_dir == task / "starter"
    for outside in ("..", ".", "/tmp"):
        _write(task / "task.yaml", {**TASK_YAML, "starter": outside})
        [problem] = validate_pack(tmp_path)
        assert (problem.field, "inside the task dir" in problem.message) == ("starter", True)


def test_schema_details(tmp_path):
    task = _good_task(tmp_path)
    _write(task / "task.yaml", {**TASK_YAML, "find_time_s": True, "colour": "red"})
    _write(task / "spec.yaml", {"items": []})
    pairs = {(p.file, p.field) for p in validate_pack(tmp_path)}
    assert pairs == {
        ("good/task.yaml", "find_time_s"),
        ("good/task.yaml", "colour"),
        ("good/spec.yaml", "items"),
        # an empty spec has no ids, so every trace points nowhere
        ("good/questions.yaml", "questions.0.traces.0"),
        ("good/questions.yaml", "questions.1.traces.0"),
    }


def test_top_level_shape_problems(tmp_path):
    task = _good_task(tmp_path)
    _write(task / "spec.yaml", "")
    _write(task / "questions.yaml", "- just\n- a list\n")
    messages = {p.file: p.message for p in validate_pack(tmp_path)}
    assert messages == {
        "good/spec.yaml": "file is empty; expected a mapping",
        "good/questions.yaml": "expected a mapping at the top level, got list",
    }


def test_missing_and_empty_pack(tmp_path):
    assert [p.message for p in validate_pack(tmp_path / "nowhere")] == [
        "pack directory does not exist"
    ]
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "README.md").write_text("not a task\n")
    assert [(p.file, p.message) for p in validate_pack(tmp_path)] == [
        (".", "pack has no task directories")
    ]


def test_question_model_normalises_and_validates():
    question = Question.model_validate(
        _question("q1", options={"D": "d", "C": 3, "B": "b", "A": "a"}, gold="C")
    )
    assert list(question.options) == ["A", "B", "C", "D"] and question.options["C"] == "3"
    assert question.tags == []


# --- load_pack and format_problems ----------------------------------------------------------


def test_load_pack_raises_config_error_naming_every_file_and_field(tmp_path):
    _broken_pack(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_pack(tmp_path)
    error = info.value
    assert isinstance(error, PackError)
    assert error.problems == validate_pack(tmp_path)
    text = str(error)
    assert f"{len(error.problems)} problems in task pack" in text
    for problem in error.problems:
        where = f"{problem.file}: field '{problem.field}'" if problem.field else problem.file
        assert where in text
    assert error.file == str(tmp_path)


def test_load_pack_with_one_problem_sets_file_and_field(tmp_path):
    task = _good_task(tmp_path)
    _write(task / "questions.yaml", {"questions": [_question("q1", gold="E")]})
    with pytest.raises(ConfigError) as info:
        load_pack(tmp_path)
    assert info.value.file == str(tmp_path / "good" / "questions.yaml")
    assert info.value.field == "questions.0.gold"
    # the message names the question a person wrote, not only its 0-based position
    assert "questions.yaml: field 'questions.0.gold': question 'q1': gold 'E'" in str(info.value)


def test_validate_fails_when_expected_answers_miss_a_question(tmp_path):
    import shutil

    shutil.copytree(EXAMPLE / "http-router", tmp_path / "http-router")
    assert validate_pack(tmp_path) == []
    expected = tmp_path / "http-router" / "reference" / "expected_answers.yaml"
    data = yaml.safe_load(expected.read_text())
    dropped = sorted(data["terse"])[-1]
    del data["terse"][dropped]
    _write(expected, data)
    [problem] = validate_pack(tmp_path)
    assert problem.file == "http-router/reference/expected_answers.yaml"
    assert problem.field == f"terse.{dropped}" and problem.message == "question not covered"


def test_format_problems():
    problems = [Problem("t/spec.yaml", "items[0].id", "bad id"), Problem("t/task.yaml", None, "x")]
    assert format_problems(problems) == "t/spec.yaml: field 'items[0].id': bad id\nt/task.yaml: x"
    assert format_problems([]) == ""


def test_load_task_alone(tmp_path):
    task_dir = _good_task(tmp_path, "solo")
    task = load_task(task_dir)
    assert task.task_id == "solo" and [q.id for q in task.questions] == ["q1", "q2"]
    assert load_task(task_dir, task_id="renamed").task_id == "renamed"
    (task_dir / "spec.yaml").unlink()
    with pytest.raises(ConfigError) as info:
        load_task(task_dir)
    assert info.value.file == str(tmp_path / "solo" / "spec.yaml")
    with pytest.raises(ConfigError, match="task directory does not exist"):
        load_task(tmp_path / "absent")
