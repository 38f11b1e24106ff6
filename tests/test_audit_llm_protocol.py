"""The BenchGuard LLM protocol: one call, parsing, one repair retry, validation, fitting."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from metaeval.errors import MetaevalError
from metaeval.models.retry import ModelCallError
from metaeval.models.scripted import ScriptedModel
from metaeval.models.types import ModelRequest
from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.findings_parse import FindingsParseError, parse_findings_json
from metaeval.protocols.audit.llm_protocol import ModelAudit, audit_task
from metaeval.protocols.audit.output_schema import FINDINGS_OBJECT_SCHEMA, FINDINGS_SCHEMA
from metaeval.protocols.audit.prompt_fit import fit_prompt
from metaeval.protocols.audit.task_view import LoadedTask, TaskFile


def tf(path: str, role: str, text: str) -> TaskFile:
    size = len(text.encode())
    return TaskFile(path=path, role=role, text=text, raw_bytes=size, delivered_bytes=size)


def make_task(extra_files: list[TaskFile] | None = None) -> LoadedTask:
    files = [
        tf("instruction.md", "instruction", "Write the sum of 2 and 3 to /app/out.txt.\n"),
        tf("solution/solve.sh", "solution", "#!/bin/bash\necho 6 > /app/out.txt\n"),
        tf("tests/test.sh", "tests", '#!/bin/bash\ntest "$(cat /app/out.txt)" = 5\n'),
        tf("agent/program.sh", "agent", "echo 5 > /app/out.txt\n"),
        *(extra_files or []),
    ]
    return LoadedTask(task_id="sum", root=Path("/tmp/sum"), files=files)


def item(**overrides) -> dict:
    data = {
        "category": "GT",
        "subcategory": "GT-LOGIC",
        "severity": "Critical",
        "finding_type": "Bug",
        "title": "Gold writes 6 instead of 5",
        "description": "solve.sh echoes 6 but 2 + 3 = 5; the test expects 5.",
        "evidence": [
            {"file": "solution/solve.sh", "line_start": 2, "line_end": 2, "snippet": "echo 6"}
        ],
        "recommendation": "Echo 5.",
        "confidence": 0.95,
    }
    data.update(overrides)
    return data


def test_valid_array_gives_findings_with_our_identity_fields() -> None:
    reply = json.dumps([item(task_id="other", source="evil", sources=["x"], protocol="static")])
    model = ScriptedModel([reply], name="scripted/auditor")
    audit = audit_task(make_task(), model, protocol="definition", max_tokens=777, seed=3)
    assert isinstance(audit, ModelAudit)
    assert audit.status == "ok" and audit.error is None
    assert audit.attempts == 1
    [finding] = audit.findings
    assert finding.task_id == "sum"
    assert finding.source == "scripted/auditor"
    assert finding.sources == ["scripted/auditor"]
    assert finding.protocol == "definition"
    assert finding.evidence[0].line_start == 2
    assert audit.dropped == []
    assert audit.repairs == [
        {
            "index": 0,
            "field": "(ignored keys)",
            "from": ["protocol", "source", "sources", "task_id"],
            "to": None,
        }
    ]
    [request] = model.requests
    assert request.json_schema == FINDINGS_SCHEMA
    assert request.max_tokens == 777 and request.seed == 3 and request.temperature == 0.0
    assert [m.role for m in request.messages] == ["system", "user"]
    assert "AGENT ATTEMPT" not in request.messages[1].content
    assert audit.raw_outputs == [reply]
    assert len(audit.model_calls) == 1 and audit.model_calls[0]["text"] == reply
    assert audit.prompt_chars == sum(len(m.content) for m in request.messages)


def test_object_root_providers_get_the_wrapped_schema() -> None:
    model = ScriptedModel([json.dumps({"findings": [item()]})], name="openai/gpt-4o")
    model.provider = "openai"  # as OpenAIModel: json_schema roots must be objects there
    audit = audit_task(make_task(), model, protocol="definition")
    assert model.requests[0].json_schema == FINDINGS_OBJECT_SCHEMA
    assert audit.status == "ok" and len(audit.findings) == 1


def test_empty_array_is_ok_with_no_findings() -> None:
    audit = audit_task(make_task(), ScriptedModel(["[]"]), protocol="definition")
    assert audit.status == "ok" and audit.findings == [] and audit.attempts == 1


def test_execution_protocol_includes_the_agent_attempt() -> None:
    model = ScriptedModel(["[]"])
    audit = audit_task(make_task(), model, protocol="execution")
    assert audit.protocol == "execution"
    assert "1| echo 5 > /app/out.txt" in model.requests[0].messages[1].content


def test_garbage_then_valid_uses_one_repair_retry() -> None:
    model = ScriptedModel(["I think the task is fine.", json.dumps([item()])])
    audit = audit_task(make_task(), model, protocol="definition")
    assert audit.status == "ok"
    assert audit.attempts == 2
    assert len(audit.findings) == 1
    assert len(audit.raw_outputs) == 2 and len(audit.model_calls) == 2
    second = model.requests[1].messages
    assert [m.role for m in second] == ["system", "user", "assistant", "user"]
    assert second[2].content == "I think the task is fine."
    assert "not valid JSON" in second[3].content
    assert "ONLY the JSON array" in second[3].content
    assert any(n.startswith("repair retry used after: attempt 1:") for n in audit.notes)


def test_garbage_twice_is_an_audit_failure() -> None:
    model = ScriptedModel(["nope", '{"answer": 1}'])
    audit = audit_task(make_task(), model, protocol="definition")
    assert audit.status == "audit_failure"
    assert audit.findings == []
    assert audit.attempts == 2
    assert audit.error is not None
    assert "attempt 1: not valid JSON" in audit.error
    assert "attempt 2: expected a JSON array" in audit.error
    assert audit.raw_outputs == ["nope", '{"answer": 1}']


def test_cut_off_reply_gets_the_shorter_repair_message() -> None:
    model = ScriptedModel([{"text": '[{"category": "G', "finish_reason": "length"}, "[]"])
    audit = audit_task(make_task(), model, protocol="definition", max_tokens=50)
    assert audit.status == "ok" and audit.attempts == 2
    repair = model.requests[1].messages[-1].content
    assert "cut off at the output limit" in repair and "max_tokens 50" in repair


def test_mismatched_category_is_repaired_unknown_subcategory_dropped() -> None:
    items = [
        item(category="GT", subcategory="INST-INCOMPLETE", finding_type="Warning"),
        item(subcategory="GT-TYPO", title="bad code"),
        item(category="eval", subcategory="tolerance", severity="medium", finding_type="warning"),
        "not an object",
        item(confidence=1.7),
    ]
    audit = audit_task(make_task(), ScriptedModel([json.dumps(items)]), protocol="definition")
    assert audit.status == "ok"
    assert [f.subcategory for f in audit.findings] == ["INST-INCOMPLETE", "EVAL-TOLERANCE"]
    assert [f.category for f in audit.findings] == ["INST", "EVAL"]
    assert audit.findings[1].severity == "Medium" and audit.findings[1].finding_type == "Warning"
    assert {"index": 0, "field": "category", "from": "GT", "to": "INST"} in audit.repairs
    assert {"index": 2, "field": "subcategory", "from": "tolerance", "to": "EVAL-TOLERANCE"} in (
        audit.repairs
    )
    dropped = {d["index"]: d for d in audit.dropped}
    assert set(dropped) == {1, 3, 4}
    assert "unknown subcategory 'GT-TYPO'" in dropped[1]["reason"]
    assert dropped[1]["item"]["title"] == "bad code"
    assert "not an object" in dropped[3]["reason"]
    assert dropped[4]["reason"].startswith("confidence:")


def test_object_with_findings_key_is_accepted() -> None:
    reply = json.dumps({"findings": [item()]})
    audit = audit_task(make_task(), ScriptedModel([reply]), protocol="definition")
    assert audit.status == "ok" and audit.attempts == 1 and len(audit.findings) == 1


def test_fenced_json_with_prose_is_accepted_with_a_note() -> None:
    reply = "Here you go:\n```json\n" + json.dumps([item()]) + "\n```\nDone."
    audit = audit_task(make_task(), ScriptedModel([reply]), protocol="definition")
    assert audit.status == "ok" and audit.attempts == 1 and len(audit.findings) == 1
    assert any("code fence" in n for n in audit.notes)


def test_evidence_shapes_are_normalised() -> None:
    items = [
        item(evidence={"file": "tests/test.sh", "line_start": 2, "line_end": 2, "snippet": "= 5"}),
        item(evidence=["solution/solve.sh:2-2"], recommendation=None),
    ]
    audit = audit_task(make_task(), ScriptedModel([json.dumps(items)]), protocol="definition")
    assert [len(f.evidence) for f in audit.findings] == [1, 1]
    assert audit.findings[1].evidence[0].file == "solution/solve.sh"
    assert audit.findings[1].evidence[0].line_end == 2
    assert audit.findings[1].recommendation == ""


def test_model_call_error_propagates() -> None:
    def boom(request: ModelRequest):
        raise RuntimeError("connection reset")

    with pytest.raises(ModelCallError):
        audit_task(make_task(), ScriptedModel(boom), protocol="definition")


def test_provider_error_on_the_repair_attempt_propagates() -> None:
    model = ScriptedModel(["garbage"])  # the second call runs out of script: MetaevalError
    with pytest.raises(MetaevalError):
        audit_task(make_task(), model, protocol="definition")


def test_usage_is_summed_and_cost_propagates() -> None:
    usage1 = {"input_tokens": 1000, "output_tokens": 10}
    usage2 = {"input_tokens": 1200, "output_tokens": 20}
    script = [{"text": "junk", "usage": usage1}, {"text": "[]", "usage": usage2}]

    priced = audit_task(
        make_task(), ScriptedModel(list(script), name="openai/gpt-4o"), protocol="definition"
    )
    assert priced.attempts == 2
    assert priced.usage.input_tokens == 2200 and priced.usage.output_tokens == 30
    assert priced.prompt_tokens == 1000
    assert priced.cost_usd == pytest.approx((2200 * 2.5 + 30 * 10.0) / 1e6)

    unpriced = audit_task(
        make_task(), ScriptedModel(list(script), name="nowhere/model"), protocol="definition"
    )
    assert unpriced.cost_usd is None
    assert unpriced.usage.input_tokens == 2200


def test_parse_findings_json_errors() -> None:
    assert parse_findings_json("[]") == ([], None)
    assert parse_findings_json('{"findings": []}')[0] == []
    for bad, message in (
        ("", "empty"),
        ("42", "got a JSON int"),
        ('{"a": 1}', "got an object with keys ['a']"),
        ("[{", "not valid JSON"),
        ('{"answer": [1, 2]}', "got an object with keys ['answer']"),
        ('Sure! ```json\n{"value": [1]}\n```', "got an object with keys ['value']"),
    ):
        with pytest.raises(FindingsParseError, match=message.replace("[", r"\[")):
            parse_findings_json(bad)


def test_fit_prompt_shortens_the_largest_file_first() -> None:
    big = "\n".join(f"row_{i} = {i}" for i in range(2000))
    medium = "\n".join(f"# note {i}" for i in range(30))
    task = make_task([tf("tests/data.py", "tests", big), tf("docs.md", "docs", medium)])
    full = fit_prompt(task, None)
    assert full.fits and not full.notes
    fit = fit_prompt(task, full.chars - 20_000)
    assert fit.fits and fit.chars <= full.chars - 20_000
    assert set(fit.file_budgets) == {"tests/data.py"}  # the small files stay whole
    assert fit.notes and fit.notes[0].startswith("tests/data.py: lines ")
    user = fit.messages[1].content
    assert "2000| row_1999 = 1999" in user  # tail keeps original numbers
    assert "30| # note 29" in user  # the smaller file is whole
    assert "omitted to fit the prompt" in user


def test_prompt_that_cannot_fit_is_an_audit_failure_without_a_call() -> None:
    model = ScriptedModel([])
    audit = audit_task(make_task(), model, protocol="definition", max_prompt_chars=500)
    assert audit.status == "audit_failure"
    assert "does not fit" in (audit.error or "")
    assert audit.attempts == 0 and model.requests == []
    assert audit.cost_usd == 0.0


def test_known_context_window_shortens_and_records_notes() -> None:
    big = "\n".join(f"assert check({i}) == {i * i}" for i in range(3000))
    task = make_task([tf("tests/test_big.py", "tests", big)])
    model = ScriptedModel(["[]"])
    model.context_window = 8192  # type: ignore[attr-defined]
    audit = audit_task(task, model, protocol="definition", max_tokens=1024)
    assert audit.status == "ok"
    assert audit.notes[0].startswith("prompt: ")
    assert any(n.startswith("tests/test_big.py: lines ") for n in audit.notes)
    sent = model.requests[0].messages
    # Estimated at 3 chars per token: within 8192 - 1024 - repair reserve.
    assert sum(len(m.content) for m in sent) / 3 <= 8192 - 1024 - 600


def test_unknown_protocol_is_rejected() -> None:
    with pytest.raises(ValueError):
        audit_task(make_task(), ScriptedModel(["[]"]), protocol="static")  # type: ignore[arg-type]


@pytest.mark.local_model
def test_real_local_model_audit_never_raises() -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from metaeval.models.registry import get_model

    model = get_model("local/smollm2")
    start = time.monotonic()
    audit = audit_task(make_task(), model, protocol="definition", max_tokens=400)
    elapsed = time.monotonic() - start
    assert audit.status in ("ok", "audit_failure")
    assert 1 <= audit.attempts <= 2
    assert audit.prompt_tokens > 0
    assert audit.cost_usd == 0.0
    if audit.status == "ok":
        for finding in audit.findings:
            Finding.model_validate(finding.model_dump())
            assert finding.source == "local/smollm2" and finding.task_id == "sum"
    else:
        assert audit.error
    assert elapsed < 180  # ~15-60 s on two cores; generous for a loaded machine
