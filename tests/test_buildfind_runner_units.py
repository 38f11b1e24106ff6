"""Build-and-find pieces with exact expectations: seeds, shuffles, answers, config, leakage."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.artifact.validation import leakage_scan, structure
from metaeval.protocols.buildfind.cells.find import answers_status, parse_answers
from metaeval.protocols.buildfind.config import load_config
from metaeval.protocols.buildfind.records import logical_view
from metaeval.protocols.buildfind.seeds import derive_seed, deshuffle, permutation, shuffle_options


def q(qid: str, gold: str, options: dict[str, str] | None = None):
    options = options or {"A": "alpha", "B": "bravo", "C": "charlie", "D": "delta"}
    return SimpleNamespace(id=qid, gold=gold, options=options, question=f"Which is {qid}?")


def test_seeds_are_stable_and_distinct():
    assert derive_seed(20260501, "find", "t", 0) == derive_seed(20260501, "find", "t", 0)
    assert derive_seed(20260501, "find", "t", 0) != derive_seed(20260501, "find", "t", 1)
    assert 0 <= derive_seed(1, "x") < 2**31


def test_shuffle_round_trip_and_per_question_orders():
    order = permutation(7, "q1")
    assert sorted(order) == ["A", "B", "C", "D"]
    assert permutation(7, "q1") == order  # deterministic from (seed, question id)
    orders = {permutation(7, f"q{i}")[0] for i in range(40)}
    assert len(orders) > 1  # not the same permutation for every question
    shown = shuffle_options({"A": "a", "B": "b", "C": "c", "D": "d"}, ["C", "A", "D", "B"])
    assert shown == {"A": "c", "B": "a", "C": "d", "D": "b"}
    assert deshuffle("A", ["C", "A", "D", "B"]) == "C"
    assert deshuffle("D", ["C", "A", "D", "B"]) == "B"
    assert deshuffle("E", ["C", "A", "D", "B"]) is None and deshuffle(None, ["A"]) is None


def test_answers_are_deshuffled_graded_and_missing_ones_unanswered():
    task = SimpleNamespace(questions=[q("q1", "C"), q("q2", "A"), q("q3", "B")])
    orders = {"q1": ["C", "A", "D", "B"], "q2": ["B", "A", "C", "D"], "q3": ["A", "B", "C", "D"]}
    submission = json.dumps({"q1": {"answer": "A", "evidence_files": ["kv.py"]}, "q2": "A"})
    answers, problem = parse_answers(submission, orders, task)
    assert problem is None
    assert answers["q1"]["answer"] == "C" and answers["q1"]["correct"] is True
    assert answers["q1"]["evidence_files"] == ["kv.py"]
    assert answers["q2"]["answer"] == "B" and answers["q2"]["correct"] is False  # shown A -> B
    assert answers["q3"]["answer"] is None and answers["q3"]["correct"] is False

    none, problem = parse_answers("not json", orders, task)
    assert problem.startswith("unparsable") and all(a["answer"] is None for a in none.values())
    assert answers_status(problem) == "unparsable"
    empty, problem = parse_answers(None, orders, task)
    assert problem == "no find_answers.json submitted" and answers_status(problem) == "missing"


@pytest.mark.parametrize(
    ("submission", "status"),
    [
        ('{"q1": "A", "q2": {"answer": "B"}}', "ok"),
        ('```json\n{"q1": "A", "q2": {"answer": "B"}}\n```', "extracted"),
        ('Here are my answers:\n```\n{"q1": "A", "q2": {"answer": "B"}}\n```\nDone.', "extracted"),
        (
            'I read kv.py {see notes}. Answers: {"q1": "A", "q2": {"answer": "B"}} -- final.',
            "extracted",
        ),
        # an earlier draft in a fence, the final answer in the last fence
        (
            '```json\n{"q1": "D"}\n```\nOn reflection:\n```json\n{"q1": "A", "q2": "B"}\n```',
            "extracted",
        ),
        # an object without question ids (an example) before the real one
        ('Format {"example": 1}; mine: {"q1": "A", "q2": "B"}', "extracted"),
    ],
)
def test_answers_wrapped_in_fences_or_prose_are_scored_by_content(submission, status):
    """Real models fence their JSON or talk around it; the content is what is scored."""
    task = SimpleNamespace(questions=[q("q1", "C"), q("q2", "A")])
    orders = {"q1": ["C", "A", "D", "B"], "q2": ["B", "A", "C", "D"]}
    answers, problem = parse_answers(submission, orders, task)
    assert answers_status(problem) == status
    assert answers["q1"]["answer"] == "C" and answers["q1"]["correct"] is True
    assert answers["q2"]["answer"] == "A" and answers["q2"]["correct"] is True


@pytest.mark.parametrize("submission", ["A, C, B", "```json\n{not json}\n```", '["A", "B"]'])
def test_text_without_an_answer_object_is_unparsable(submission):
    task = SimpleNamespace(questions=[q("q1", "C")])
    answers, problem = parse_answers(submission, {"q1": ["A", "B", "C", "D"]}, task)
    assert answers_status(problem) == "unparsable" and answers["q1"]["answer"] is None


def test_logical_view_keeps_latest_final_record():
    records = [
        {"task": "t", "builder": "b", "build_trial": 0, "status": "ok", "n": 1},
        {"task": "t", "builder": "b", "build_trial": 1, "status": "error", "infra_error": True},
        {"task": "t", "builder": "b", "build_trial": 0, "status": "timeout", "n": 2},
    ]
    view = logical_view(records, ("task", "builder", "build_trial"))
    assert list(view) == [("t", "b", 0)] and view[("t", "b", 0)]["n"] == 2


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_config_errors_name_file_and_field(tmp_path):
    base = (
        "pack: p\nbuilders: [{name: b, agent: toolloop}]\nfinders: [{name: f, agent: toolloop}]\n"
    )
    ok = load_config(write(tmp_path / "ok.yaml", base))
    assert ok.pack == (tmp_path / "p").resolve() and ok.seed0 == 20260501 and ok.r_find == 3
    cases = {
        "r_build": base + "r_build: 0\n",
        "builders.0.colour": "pack: p\nbuilders: [{name: b, agent: toolloop, colour: red}]\nfinders: [{name: f, agent: toolloop}]\n",
        "finders": "pack: p\nbuilders: [{name: b, agent: toolloop}]\nfinders: []\n",
        "controls.0": base + "controls: [code_only]\n",
    }
    for field, text in cases.items():
        path = write(tmp_path / f"{field}.yaml", text)
        with pytest.raises(ConfigError) as info:
            load_config(path)
        assert info.value.file == str(path) and info.value.field == field, str(info.value)
    dupes = write(
        tmp_path / "d.yaml",
        base.replace(
            "finders: [{name: f, agent: toolloop}]",
            "finders: [{name: f, agent: toolloop}, {name: f, agent: codex}]",
        ),
    )
    with pytest.raises(ConfigError, match="duplicate finder name"):
        load_config(dupes)


def test_leakage_scan_and_structure(tmp_path):
    (tmp_path / "kv.py").write_text("# kv-03: gold B\nMAX = 3\n\ndef put():\n    pass\n")
    (tmp_path / "README.md").write_text("Records are appended to the write-ahead log first.\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "kv.cpython-311.pyc").write_bytes(b"\0")
    options = {
        "A": "Records are appended to the write-ahead log first",
        "B": "x",
        "C": "y",
        "D": "z",
    }
    task = SimpleNamespace(questions=[q("kv-03", "B", options), q("kv-04", "A")])
    leaks = leakage_scan(tmp_path, task)
    assert leaks == {
        "question_ids": ["kv-03"],
        "option_phrases": ["kv-03:A"],
        "gold_keys": ["kv-03"],
        "question_texts": [],
        "unscanned": [],
    }
    meta = structure(tmp_path)
    assert meta["files"] == 2 and meta["loc_by_language"] == {"python": 4}
    assert meta["has_readme"] and not meta["has_tests"] and not meta["has_config"]


def test_trial_seeds_follow_the_paper_and_old_runs_keep_theirs():
    from metaeval.protocols.buildfind.seeds import (
        LEGACY_RULE,
        SEED_RULE,
        build_seed,
        find_seed,
        run_seed_rule,
    )

    build = {"task": "t", "builder": "b", "build_trial": 1}
    find = {"slice": "formal", "task": "t", "builder": "b", "build_trial": 1}
    find |= {"finder": "f", "find_trial": 2}
    # Appendix C: build seeds 20260501, 20260502; find seeds 20260501..20260503
    assert build_seed(20260501, build, 0, SEED_RULE) == 20260502
    assert build_seed(20260501, build, 1, SEED_RULE) == 20261502  # a recovery seed, 202615xx
    assert find_seed(20260501, find, SEED_RULE) == 20260503
    assert find_seed(20260501, {"view": "readme_only", **find}, SEED_RULE) == 20260503
    assert run_seed_rule({"seed0": 1, "rule": SEED_RULE}) == SEED_RULE
    assert run_seed_rule({"seed0": 1}) == LEGACY_RULE  # a run started before the rule
    assert build_seed(7, build, 1, LEGACY_RULE) == derive_seed(7, "build", "t", "b", 1, 1)
    assert find_seed(7, find, LEGACY_RULE) == derive_seed(7, "find", *find.values(), 0)
