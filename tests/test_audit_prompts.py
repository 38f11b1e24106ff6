"""BenchGuard audit prompts: taxonomy inline, rules, line-numbered artifacts, hints, schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metaeval.protocols.audit.findings import (
    CATEGORIES,
    PAPER_SUBCATEGORIES,
    SUBCATEGORIES,
    TAXONOMY,
    Finding,
)
from metaeval.protocols.audit.output_schema import (
    FINDINGS_OBJECT_SCHEMA,
    FINDINGS_SCHEMA,
    MAX_FINDINGS,
)
from metaeval.protocols.audit.prompt_render import (
    number_lines,
    render_definition_prompt,
    render_execution_prompt,
    render_messages,
    render_repair,
)
from metaeval.protocols.audit.prompts import (
    PROMPT_TEMPLATES,
    SYSTEM_PROMPT,
    templates_digest,
)
from metaeval.protocols.audit.task_view import LoadedTask, TaskFile

INSTRUCTION = "# Count words\n\nCount the words in /app/data/input.txt.\nWrite /app/out.csv.\n"
SOLVE = "#!/bin/bash\nset -e\npython3 /solution/count.py > /app/out.csv\n"
TEST_PY = "import csv\n\ndef test_counts():\n    rows = list(csv.reader(open('/app/out.csv')))\n    assert rows[1] == ['the', '12']\n"
HINTS = "HINT-MARKER: data under /app/data is mounted at run time."


def tf(path: str, role: str, text: str) -> TaskFile:
    size = len(text.encode())
    return TaskFile(path=path, role=role, text=text, raw_bytes=size, delivered_bytes=size)


def make_task(**extra) -> LoadedTask:
    files = [
        tf("instruction.md", "instruction", INSTRUCTION),
        tf("environment/Dockerfile", "environment", "FROM python:3.11-slim\nWORKDIR /app\n"),
        tf("solution/solve.sh", "solution", SOLVE),
        tf("tests/test.sh", "tests", "#!/bin/bash\npytest /tests/test_outputs.py\n"),
        tf("tests/test_outputs.py", "tests", TEST_PY),
        tf("data_description.md", "docs", "DATA-DESC: input.txt is plain UTF-8 text.\n"),
        tf("domain_knowledge.md", "docs", "DOMAIN-KNOW: words are split on whitespace.\n"),
        tf("agent/program.py", "agent", "AGENT-PROGRAM = 1\n"),
        tf("agent/result.json", "agent", '{"reward": 0}\n'),
    ]
    data = {
        "task_id": "count-words",
        "root": Path("/tmp/count-words"),
        "config": {"metadata": {"category": "text", "expected_output": "out.csv"}},
        "files": files,
        "hints": HINTS,
    }
    data.update(extra)
    return LoadedTask(**data)


def user_text(messages) -> str:
    assert [m.role for m in messages] == ["system", "user"]
    return messages[1].content


def test_system_prompt_has_the_whole_taxonomy() -> None:
    for category, subs in TAXONOMY.items():
        assert f"{category} (" in SYSTEM_PROMPT
        for code, definition in subs.items():
            assert f"{code}: {definition}" in SYSTEM_PROMPT
    assert len(PAPER_SUBCATEGORIES) == 14  # the prompt offers the paper's 14, no extensions


def test_system_prompt_states_the_rules() -> None:
    text = SYSTEM_PROMPT
    for needle in (
        "INST-*",
        "GT-*",  # categorization priority
        "One-fix test",
        "Split test",
        "Critical",
        "High",
        "Medium",
        "Low",
        "Bug",
        "Warning",
        "Confirmed",
        "Likely",
        "Possible",
        "0.80",
        "0.55",
        "0.30",
        "DISCOVERABILITY",
        "JSON array",
    ):
        assert needle in text, needle
    for field in (
        "category",
        "subcategory",
        "severity",
        "finding_type",
        "title",
        "description",
        "evidence",
        "recommendation",
        "confidence",
        "line_start",
        "line_end",
        "snippet",
    ):
        assert field in text, field


def test_system_prompt_example_is_a_valid_finding() -> None:
    start = SYSTEM_PROMPT.index("[\n {")
    end = SYSTEM_PROMPT.index("\n]", start) + 2
    example = json.loads(SYSTEM_PROMPT[start:end])
    finding = Finding(task_id="t", source="m", protocol="definition", **example[0])
    assert finding.subcategory in SUBCATEGORIES


def test_user_prompt_shows_every_artifact_with_line_numbers_in_order() -> None:
    text = user_text(render_definition_prompt(make_task()))
    assert "1| # Count words" in text
    assert "3| Count the words in /app/data/input.txt." in text
    assert "3| python3 /solution/count.py > /app/out.csv" in text
    assert "5|     assert rows[1] == ['the', '12']" in text
    assert "=== tests/test_outputs.py (5 lines) ===" in text
    order = [
        "# INSTRUCTION",
        "# GOLD SOLUTION",
        "# EVALUATION",
        "# ENVIRONMENT",
        "# DATA DESCRIPTION",
        "# DOMAIN KNOWLEDGE",
        "# BENCHMARK-SPECIFIC GUIDANCE",
        "Phase 1.",
        "Phase 2.",
        "Phase 3.",
        "Phase 4.",
        "Phase 5.",
        "Phase 6.",
    ]
    positions = [text.index(h) for h in order]
    assert positions == sorted(positions)
    # Files land in their sections.
    assert text.index("# GOLD SOLUTION") < text.index("solution/solve.sh") < text.index("# EVAL")
    dd, dk = text.index("# DATA DESCRIPTION"), text.index("# DOMAIN KNOWLEDGE")
    assert dd < text.index("DATA-DESC") < dk < text.index("DOMAIN-KNOW")
    assert HINTS in text
    assert "Task ID: count-words" in text
    assert "Expected output: out.csv" in text
    for needle in ("discoverability gate", "One-fix test", "Split test", "analysis only"):
        assert needle in text


def test_agent_section_only_in_the_execution_protocol() -> None:
    task = make_task()
    definition = user_text(render_definition_prompt(task))
    execution = user_text(render_execution_prompt(task))
    assert "AGENT-PROGRAM" not in definition
    assert "AGENT ATTEMPT" not in definition
    assert "supporting evidence only, not ground truth" in execution
    assert "1| AGENT-PROGRAM = 1" in execution
    assert '1| {"reward": 0}' in execution
    assert "not as the reference" in execution  # phase 1 augmentation
    assert execution.index("AGENT ATTEMPT") < execution.index("Phase 1.")
    # Everything else is the same.
    assert definition.split("# BENCHMARK-SPECIFIC")[0] == execution.split("# BENCHMARK-SPECIFIC")[0]


def test_missing_artifacts_are_stated() -> None:
    task = make_task(
        files=[tf("instruction.md", "instruction", INSTRUCTION)],
        hints="",
        missing_files=["solution/ (recommended)"],
    )
    text = user_text(render_definition_prompt(task))
    assert "(no gold solution was provided" in text
    assert "(no evaluation files were provided)" in text
    assert "Missing files: solution/ (recommended)" in text
    assert "# BENCHMARK-SPECIFIC GUIDANCE (from the benchmark maintainers)\n(none)" in text


def test_config_shown_when_task_toml_is_not_a_file() -> None:
    task = make_task(config={"agent": {"timeout_sec": 600.0}, "metadata": {"category": "x"}})
    text = user_text(render_definition_prompt(task))
    assert "agent.timeout_sec = 600.0" in text
    assert "Domain: x" in text


def test_rendering_is_deterministic_and_templates_hash_stable() -> None:
    task = make_task()
    assert render_definition_prompt(task) == render_definition_prompt(task)
    assert all(isinstance(v, str) and v for v in PROMPT_TEMPLATES.values())
    assert {"system", "user", "agent_section", "repair", "output_schema"} <= set(PROMPT_TEMPLATES)
    assert PROMPT_TEMPLATES["system"] == SYSTEM_PROMPT
    digest = templates_digest()
    assert digest.startswith("sha256:")
    code = (
        "from metaeval.protocols.audit.prompts import templates_digest; print(templates_digest())"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        )
        assert out.stdout.strip() == digest


def test_output_schema_matches_the_taxonomy() -> None:
    item = FINDINGS_SCHEMA["items"]
    props = item["properties"]
    assert FINDINGS_SCHEMA["type"] == "array"
    assert FINDINGS_SCHEMA["maxItems"] == MAX_FINDINGS
    assert props["subcategory"]["enum"] == list(PAPER_SUBCATEGORIES)
    assert props["category"]["enum"] == list(CATEGORIES)
    assert props["severity"]["enum"] == ["Critical", "High", "Medium", "Low"]
    assert props["finding_type"]["enum"] == ["Bug", "Warning"]
    assert props["confidence"] == {"type": "number", "minimum": 0, "maximum": 1}
    assert props["evidence"]["maxItems"] == 3
    assert props["title"]["maxLength"] == 120
    assert props["description"]["maxLength"] == 600
    assert set(item["required"]) == set(props)
    ev = props["evidence"]["items"]
    assert set(ev["required"]) == {"file", "line_start", "line_end", "snippet"}
    assert FINDINGS_OBJECT_SCHEMA["properties"]["findings"] is FINDINGS_SCHEMA
    assert json.loads(PROMPT_TEMPLATES["output_schema"]) == json.loads(json.dumps(FINDINGS_SCHEMA))


def test_output_schema_converts_to_a_llama_grammar() -> None:
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    text = grammar.json_schema_to_gbnf(json.dumps(FINDINGS_SCHEMA))
    assert "INST-INCOMPLETE" in text


def test_number_lines_shortens_with_original_numbers() -> None:
    text = "\n".join(f"line {i}" for i in range(1, 201))
    full, note = number_lines(text)
    assert note is None and full.splitlines()[0] == "  1| line 1"
    short, note = number_lines(text, budget=600)
    assert len(short) <= 600
    assert short.splitlines()[0] == "  1| line 1"
    assert short.splitlines()[-1] == "200| line 200"
    assert "omitted to fit the prompt" in short
    assert note and note.startswith("lines ") and "of 200 omitted" in note


def test_number_lines_clips_a_giant_line() -> None:
    short, note = number_lines("x" * 10_000 + "\nend", budget=1000)
    assert len(short) <= 1000
    assert "more characters on this line" in short
    assert "2| end" in short
    assert note == "1 long line(s) clipped"


def test_file_budgets_note_shortening() -> None:
    big = "\n".join(f"value_{i} = {i}" for i in range(500))
    task = make_task(files=[*make_task().files, tf("tests/big.py", "tests", big)])
    notes: list[str] = []
    messages = render_messages(task, "definition", file_budgets={"tests/big.py": 800}, notes=notes)
    assert notes and notes[0].startswith("tests/big.py: lines ")
    assert "500| value_499 = 499" in messages[1].content
    assert "omitted here" in messages[1].content  # header says so too


def test_repair_messages_quote_the_error() -> None:
    assert "ERR-XYZ" in render_repair("ERR-XYZ")
    assert "ONLY the JSON array" in render_repair("ERR-XYZ")
    assert "cut off" in render_repair("ERR-XYZ", truncated=True)


def test_unknown_protocol_is_rejected() -> None:
    with pytest.raises(ValueError):
        render_messages(make_task(), "static")  # type: ignore[arg-type]
