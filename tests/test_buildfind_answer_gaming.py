"""A finder cannot win by hedging: each question is scored on exactly one shown letter."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from metaeval.protocols.buildfind.cells.find import parse_answers

ORDER = ["C", "A", "D", "B"]  # shown A -> canonical C (the gold below)
GOLD = "C"


def _score(submission: str) -> tuple[object, bool]:
    task = SimpleNamespace(questions=[SimpleNamespace(id="q1", gold=GOLD, options={})])
    answers, _ = parse_answers(submission, {"q1": ORDER}, task)
    return answers["q1"]["answer"], answers["q1"]["correct"]


@pytest.mark.parametrize(
    "submission",
    [
        json.dumps({"q1": "AB"}),  # two letters in one answer
        json.dumps({"q1": "A or B"}),
        json.dumps({"q1": ["A", "B"]}),  # a list of choices
        json.dumps({"q1": {"answer": ["A", "B", "C", "D"]}}),
        json.dumps({"q1": {"answer": ""}}),  # an empty answer is not the first option
        json.dumps({"q1": {"answers": "A"}}),  # the answer under another key
    ],
)
def test_a_hedged_answer_scores_nothing(submission: str) -> None:
    answer, correct = _score(submission)
    assert answer is None and correct is False


def test_a_second_answer_set_does_not_add_a_chance() -> None:
    """Two sets: only the last is read, so a correct first set does not rescue a wrong last."""
    right_then_wrong = '```json\n{"q1": "A"}\n```\nActually:\n```json\n{"q1": "B"}\n```'
    assert _score(right_then_wrong) == (ORDER[1], False)
    wrong_then_right = '```json\n{"q1": "B"}\n```\nActually:\n```json\n{"q1": "A"}\n```'
    assert _score(wrong_then_right) == (GOLD, True)
    prose = 'First guess {"q1": "A"}; final {"q1": "D"}'
    assert _score(prose) == (ORDER[3], False)


def test_a_duplicate_key_keeps_one_answer() -> None:
    assert _score('{"q1": "A", "q1": "B"}')[1] is False
    assert _score('{"q1": {"answer": "B", "answer": "A"}}') == (GOLD, True)
