"""Alignment judge: prompt, constrained output, disk cache, malformed-output handling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metaeval.models.scripted import ScriptedModel
from metaeval.models.types import ModelRequest
from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.gold import GoldIssue
from metaeval.protocols.audit.judge import (
    JUDGE_PROMPT_TEMPLATE,
    JUDGE_SCHEMA,
    JUDGE_SYSTEM_PROMPT,
    MALFORMED_REASONING,
    Judge,
    cache_key,
    parse_verdict,
    render_user_prompt,
    template_hash,
)


def issue(**kw: Any) -> GoldIssue:
    base = {
        "task_id": "t1",
        "id": "g1",
        "description": "The instruction names ecg_1000hz.csv but the solution reads another file",
        "category": "INST-CONTRADICT",
    }
    return GoldIssue(**{**base, **kw})


def finding(**kw: Any) -> Finding:
    base: dict[str, Any] = {
        "task_id": "t1",
        "category": "INST",
        "subcategory": "INST-CONTRADICT",
        "severity": "Critical",
        "finding_type": "Bug",
        "title": "Instruction and solution use different input files",
        "description": "instruction.md says ecg_1000hz.csv; solve.py reads bio_eventrelated_100hz.csv",
        "evidence": [
            {"file": "solution/solve.py", "line_start": 4, "line_end": 4, "snippet": "pd.read_csv("}
        ],
        "confidence": 0.9,
        "source": "local/smollm2",
        "protocol": "definition",
    }
    return Finding(**{**base, **kw})


def answer(verdict: str, reasoning: str = "same root cause") -> str:
    return json.dumps({"verdict": verdict, "reasoning": reasoning})


def test_prompt_template_and_schema() -> None:
    assert isinstance(JUDGE_PROMPT_TEMPLATE, str)
    assert JUDGE_SYSTEM_PROMPT in JUDGE_PROMPT_TEMPLATE
    for placeholder in ("{task_id}", "{issue_description}", "{finding_confidence}"):
        assert placeholder in JUDGE_PROMPT_TEMPLATE
    assert JUDGE_SCHEMA["properties"]["verdict"]["enum"] == ["ALIGNED", "PARTIAL", "UNRELATED"]
    assert JUDGE_SCHEMA["properties"]["reasoning"]["maxLength"] == 300
    assert template_hash().startswith("sha256:")
    text = render_user_prompt(issue(), finding())
    assert "ecg_1000hz.csv but the solution" in text
    assert "Instruction and solution use different input files" in text
    # Appendix J: the task id and the finding's confidence are shown; categories and the
    # finding's cited lines are not
    assert "Task: t1" in text and "Confidence: 0.90" in text
    assert "INST-CONTRADICT" not in text and "pd.read_csv(" not in text


def test_judge_sends_constrained_request_and_parses_verdict(tmp_path: Path) -> None:
    model = ScriptedModel([answer("PARTIAL", "right area, coarser")])
    judge = Judge(model, tmp_path / "cache")
    v = judge.judge(issue(), finding())
    assert (v.verdict, v.reasoning, v.cached, v.judge_error) == (
        "PARTIAL",
        "right area, coarser",
        False,
        False,
    )
    (request,) = model.requests
    assert isinstance(request, ModelRequest)
    assert request.json_schema == JUDGE_SCHEMA
    assert request.temperature == 0.0
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.messages[0].content == JUDGE_SYSTEM_PROMPT
    assert judge.model_calls == 1 and judge.cache_hits == 0
    assert judge.cost_usd == 0.0  # scripted/* is priced at 0


def test_cache_hit_makes_no_model_call(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    pairs = [(issue(), finding()), (issue(id="g2", description="Other"), finding())]
    first_model = ScriptedModel([answer("ALIGNED"), answer("UNRELATED", "different")])
    first = Judge(first_model, cache)
    assert [first.judge(g, f).verdict for g, f in pairs] == ["ALIGNED", "UNRELATED"]
    assert first_model.remaining == 0 and len(first_model.requests) == 2

    # Cache layout: <cache_dir>/<hh>/<hash>.json
    key = cache_key(first_model.name, *pairs[0])
    path = cache / key[:2] / f"{key}.json"
    assert path.is_file()
    stored = json.loads(path.read_text())
    assert stored["key"] == key and stored["verdict"] == "ALIGNED"
    assert not list(cache.rglob(".tmp-*"))  # atomic write left no temporary file

    # A fresh judge (no in-memory state) on the same cache: only the new pair is asked.
    new_pair = (issue(id="g3", description="Third issue"), finding())
    second_model = ScriptedModel([answer("PARTIAL")])  # exactly one uncached pair
    second = Judge(second_model, cache)
    verdicts = [second.judge(g, f) for g, f in [*pairs, new_pair]]
    assert [v.verdict for v in verdicts] == ["ALIGNED", "UNRELATED", "PARTIAL"]
    assert [v.cached for v in verdicts] == [True, True, False]
    assert len(second_model.requests) == 1 and second_model.remaining == 0
    assert second.model_calls == 1 and second.cache_hits == 2

    # Asking again in the same judge: served from memory.
    assert second.judge(*new_pair).cached
    assert len(second_model.requests) == 1


def test_memory_only_judge_without_cache_dir() -> None:
    model = ScriptedModel([answer("ALIGNED")])
    judge = Judge(model, None)
    assert not judge.judge(issue(), finding()).cached
    assert judge.judge(issue(), finding()).cached
    assert len(model.requests) == 1


def test_cache_key_covers_the_listed_inputs() -> None:
    base = cache_key("m/a", issue(), finding())
    assert len(base) == 64 and int(base, 16) >= 0
    assert cache_key("m/a", issue(), finding()) == base  # stable
    changed = [
        cache_key("m/b", issue(), finding()),  # judge model
        cache_key("m/a", issue(description="Other text"), finding()),  # gold text
        cache_key("m/a", issue(evidence="instruction.md line 2"), finding()),  # gold evidence
        cache_key("m/a", issue(task_id="t2"), finding(task_id="t2")),  # task id
        cache_key("m/a", issue(), finding(title="Another title")),  # finding title
        cache_key("m/a", issue(), finding(description="Another description")),
        cache_key("m/a", issue(), finding(confidence=0.4)),  # confidence, in Appendix J's prompt
    ]
    assert base not in changed
    assert len(set(changed)) == len(changed)
    # What the prompt leaves out (categories, cited lines, source, severity) does not change it.
    other = finding(
        subcategory="GT-DATA",
        category="GT",
        evidence=[{"file": "solution/solve.py", "snippet": "other snippet"}],
        source="x",
        severity="Low",
    )
    assert cache_key("m/a", issue(category="INST-INCOMPLETE"), other) == base


def test_cache_key_depends_on_template(monkeypatch: pytest.MonkeyPatch) -> None:
    import metaeval.protocols.audit.judge as judge_module

    base = cache_key("m/a", issue(), finding())
    monkeypatch.setattr(judge_module, "JUDGE_PROMPT_TEMPLATE", JUDGE_PROMPT_TEMPLATE + " v2")
    assert cache_key("m/a", issue(), finding()) != base


def test_changed_finding_text_misses_the_cache(tmp_path: Path) -> None:
    model = ScriptedModel([answer("ALIGNED"), answer("UNRELATED", "differs")])
    judge = Judge(model, tmp_path)
    judge.judge(issue(), finding())
    v = Judge(model, tmp_path).judge(issue(), finding(description="Something else entirely"))
    assert v.verdict == "UNRELATED" and not v.cached
    assert len(model.requests) == 2


def test_malformed_output_retries_once_then_flags_error(tmp_path: Path) -> None:
    model = ScriptedModel(["not json", '{"verdict": "MAYBE"}'])
    judge = Judge(model, tmp_path)
    v = judge.judge(issue(), finding())
    assert v.verdict == "UNRELATED"
    assert v.reasoning == MALFORMED_REASONING
    assert v.judge_error is True
    assert len(model.requests) == 2 and judge.errors == 1
    retry = model.requests[1]
    assert [m.role for m in retry.messages] == ["system", "user", "assistant", "user"]
    assert retry.messages[2].content == "not json"
    assert retry.json_schema == JUDGE_SCHEMA
    # Errors are not cached on disk: a later run asks again.
    assert not list(tmp_path.rglob("*.json"))
    again = ScriptedModel([answer("ALIGNED")])
    assert Judge(again, tmp_path).judge(issue(), finding()).verdict == "ALIGNED"
    assert len(again.requests) == 1


def test_malformed_then_valid_uses_the_retry(tmp_path: Path) -> None:
    model = ScriptedModel(["", answer("ALIGNED", "one fix resolves both")])
    v = Judge(model, tmp_path).judge(issue(), finding())
    assert (v.verdict, v.judge_error) == ("ALIGNED", False)
    assert len(model.requests) == 2


def test_corrupt_cache_entry_is_a_miss(tmp_path: Path) -> None:
    model = ScriptedModel([answer("ALIGNED"), answer("PARTIAL")])
    judge = Judge(model, tmp_path)
    judge.judge(issue(), finding())
    path = judge.cache_path(judge.cache_key(issue(), finding()))
    assert path is not None
    path.write_text("{broken")
    v = Judge(model, tmp_path).judge(issue(), finding())
    assert v.verdict == "PARTIAL" and not v.cached
    assert json.loads(path.read_text())["verdict"] == "PARTIAL"


def test_judge_refuses_pairs_across_tasks(tmp_path: Path) -> None:
    model = ScriptedModel([])
    with pytest.raises(ValueError, match="same task"):
        Judge(model, tmp_path).judge(issue(task_id="t2"), finding())
    assert model.requests == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (answer("ALIGNED", "x"), ("ALIGNED", "x")),
        ('```json\n{"verdict": "partial", "reasoning": "y"}\n```', ("PARTIAL", "y")),
        ('{"verdict": "UNRELATED"}', ("UNRELATED", "")),
        (answer("ALIGNED", "r" * 400), ("ALIGNED", "r" * 300)),
        ('{"verdict": "YES", "reasoning": "x"}', None),
        ("[]", None),
        ("", None),
    ],
)
def test_parse_verdict(text: str, expected: tuple[str, str] | None) -> None:
    assert parse_verdict(text) == expected


def test_category_judge_rules_without_a_model() -> None:
    from metaeval.protocols.audit.judge import CategoryJudge

    judge = CategoryJudge()
    assert judge.judge(issue(), finding()).verdict == "ALIGNED"
    same_top = finding(subcategory="INST-INCOMPLETE")
    assert judge.judge(issue(), same_top).verdict == "PARTIAL"
    other = finding(category="GT", subcategory="GT-DATA")
    assert judge.judge(issue(), other).verdict == "UNRELATED"
    with pytest.raises(ValueError):
        judge.judge(issue(task_id="t2"), finding())
