"""A task's reference/expected_answers.yaml: what a perfect finder answers on each reference
builder's artifact (`reference_builders`), read and checked against the task's questions.
Apart from the pack loader and the reference builders, so both can use it."""

from __future__ import annotations

from typing import Any

from metaeval.config_files import parse_yaml, read_text
from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.pack.schema import OPTION_KEYS, PackTask

REFERENCE_BUILDERS = ("documented", "terse", "divergent")
REFERENCE_DIR = "reference"
EXPECTED_ANSWERS_FILE = "expected_answers.yaml"


def load_expected_answers(pack_task: PackTask) -> dict[str, dict[str, str | None]]:
    """The task's expected_answers.yaml: builder -> question id -> letter or None.

    Every reference builder must be present and cover exactly the task's question ids.
    """
    path = pack_task.root / REFERENCE_DIR / EXPECTED_ANSWERS_FILE
    if not path.is_file():
        raise ConfigError("missing expected answers file", file=str(path))
    data: Any = parse_yaml(read_text(path), str(path))
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping of builder -> answers", file=str(path))
    question_ids = [question.id for question in pack_task.questions]
    expected: dict[str, dict[str, str | None]] = {}
    for builder in REFERENCE_BUILDERS:
        answers = data.get(builder)
        if not isinstance(answers, dict):
            raise ConfigError("missing or not a mapping", file=str(path), field=builder)
        extra = sorted(set(answers) - set(question_ids), key=str)
        if extra:
            raise ConfigError(f"unknown question id {extra[0]!r}", file=str(path), field=builder)
        for question_id in question_ids:
            if question_id not in answers:
                raise ConfigError(
                    "question not covered", file=str(path), field=f"{builder}.{question_id}"
                )
            letter = answers[question_id]
            if letter is not None and letter not in OPTION_KEYS:
                raise ConfigError(
                    f"answer must be one of A, B, C, D or null, got {letter!r}",
                    file=str(path),
                    field=f"{builder}.{question_id}",
                )
        expected[builder] = {question_id: answers[question_id] for question_id in question_ids}
    return expected
