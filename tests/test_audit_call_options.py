"""How an audit calls its models: `-M temperature/max_tokens/caps/reasoning`, recorded in the
manifest, compared on a rerun; reasoning written out before the JSON when asked for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from metaeval.models.scripted import ScriptedModel
from metaeval.protocols.audit.llm_protocol import audit_task
from metaeval.protocols.audit.output_schema import AnswerOptions, findings_schema
from metaeval.protocols.audit.task_view import LoadedTask, TaskFile

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args], capture_output=True, text=True, timeout=300
    )


def audit(out: Path, *model_args: str) -> subprocess.CompletedProcess:
    argv = ["audit", "run", str(BENCH), "--static-only", "--no-execution", "--task", "row-count"]
    return cli(*argv, "-o", str(out), *(a for pair in model_args for a in ("-M", pair)))


def test_options_are_recorded_and_a_changed_cap_is_refused_by_name(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = audit(run, "max_findings=3", "temperature=0.5", "max_tokens=1000")
    assert first.returncode == 0, first.stderr
    config = json.loads((run / "manifest.json").read_text())["config"]
    assert config["max_tokens"] == 1000
    assert (config["temperature"], config["max_findings"]) == (0.5, 3)
    assert (config["max_evidence"], config["max_description"], config["reasoning"]) == (
        3,
        600,
        False,
    )
    changed = audit(run, "max_findings=4", "temperature=0.5", "max_tokens=1000")
    assert changed.returncode == 2
    assert "setting 'max_findings' changed: 3 -> 4" in changed.stderr
    again = audit(run, "max_findings=3", "temperature=0.5", "max_tokens=1000")
    assert again.returncode == 0, again.stderr
    assert "resumed: 1 completed cell(s) reused" in again.stdout


def test_a_bad_option_value_names_its_field(tmp_path: Path) -> None:
    bad = audit(tmp_path / "bad", "temperature=hot")
    assert bad.returncode == 2
    assert "field 'temperature'" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "bad").exists()
    assert audit(tmp_path / "bad2", "reasoning=maybe").returncode == 2


def _task() -> LoadedTask:
    def tf(path: str, role: str, text: str) -> TaskFile:
        size = len(text.encode())
        return TaskFile(path=path, role=role, text=text, raw_bytes=size, delivered_bytes=size)

    return LoadedTask(
        task_id="sum",
        root=Path("/tmp/sum"),
        files=[
            tf("instruction.md", "instruction", "Write the sum of 2 and 3 to /app/out.txt.\n"),
            tf("solution/solve.sh", "solution", "#!/bin/bash\necho 6 > /app/out.txt\n"),
            tf("tests/test.sh", "tests", '#!/bin/bash\ntest "$(cat /app/out.txt)" = 5\n'),
        ],
    )


FINDING = {
    "category": "GT",
    "subcategory": "GT-LOGIC",
    "severity": "High",
    "finding_type": "Bug",
    "title": "Gold writes 6 instead of 5",
    "description": "solve.sh echoes 6 but 2 + 3 = 5.",
    "evidence": [
        {"file": "solution/solve.sh", "line_start": 2, "line_end": 2, "snippet": "echo 6"}
    ],
    "recommendation": "Echo 5.",
    "confidence": 0.9,
}


def test_reasoning_is_written_out_before_the_json_without_a_schema() -> None:
    reply = (
        "Phase 1: the agent must write 5.\n```bash\necho 6\n```\nPhase 2: the gold writes 6.\n"
        "Phase 3 to 5: nothing else.\n```json\n" + json.dumps([FINDING]) + "\n```\n"
    )
    model = ScriptedModel([reply], name="scripted/thinker")
    answer = AnswerOptions(max_findings=2, max_evidence=1, max_description=300, reasoning=True)
    result = audit_task(_task(), model, temperature=0.7, max_tokens=900, answer=answer)
    request = model.requests[0]
    assert request.json_schema is None  # free text: the phases, then the JSON
    assert (request.temperature, request.max_tokens) == (0.7, 900)
    system, user = request.messages[0].content, request.messages[1].content
    assert "Reasoning first" in system and "Report at most 2 findings" in system
    assert "1 to 1 citations" in system and "at most 300" in system
    assert "```json fenced block" in user
    assert result.status == "ok" and [f.title for f in result.findings] == [FINDING["title"]]


def test_caps_reach_the_schema_sent_to_a_constrained_decoder() -> None:
    model = ScriptedModel([json.dumps([FINDING])], name="scripted/json")
    answer = AnswerOptions(max_findings=2, max_evidence=1)
    audit_task(_task(), model, answer=answer)
    schema = model.requests[0].json_schema
    assert schema == findings_schema(answer)
    assert schema is not None and schema["maxItems"] == 2
    assert schema["items"]["properties"]["evidence"]["maxItems"] == 1
    assert "Reply with a JSON array and nothing else" in model.requests[0].messages[0].content
