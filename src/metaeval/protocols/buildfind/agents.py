"""Agents for builder and finder roles, by registry id (see config.AgentSpec)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from metaeval.agents.registry import get_agent
from metaeval.agents.scripted import ScriptedAgent
from metaeval.agents.types import AgentResult, Limits, Task
from metaeval.config_files import parse_yaml, read_text
from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.config import AgentSpec
from metaeval.protocols.buildfind.seeds import LETTERS

REFERENCE_PREFIX = "reference:"
REFERENCE_FINDER = "reference-finder"


def make_agent(spec: AgentSpec, role: str):
    """An agent instance for a builder or finder configuration."""
    if spec.agent.startswith(REFERENCE_PREFIX):
        if role != "builder":
            raise ConfigError(
                "reference builders can only build", field=f"{role}s.{spec.name}.agent"
            )
        from metaeval.protocols.buildfind.pack.reference_builders import (
            REFERENCE_BUILDERS,
            reference_agent,
        )

        variant = spec.agent[len(REFERENCE_PREFIX) :]
        if variant not in REFERENCE_BUILDERS:
            raise ConfigError(
                f"unknown reference builder '{variant}' (known: {', '.join(REFERENCE_BUILDERS)})",
                field=f"builders.{spec.name}.agent",
            )
        return reference_agent(variant)
    if spec.agent == REFERENCE_FINDER:
        if role != "finder":
            raise ConfigError("reference-finder can only find", field=f"builders.{spec.name}.agent")
        return ReferenceFinder()
    return configured_agent(spec, role)


def configured_agent(spec: AgentSpec, role: str):
    """A registry agent with the spec's settings: effort, endpoint, env, CLI args, model options.

    Errors name the field (e.g. ``finders.NAME.effort``)."""
    from metaeval.agents.cli import CLI_ADAPTERS

    where = f"{role}s.{spec.name}"
    name = spec.agent.split(":", 1)[0]
    try:
        if name in CLI_ADAPTERS:
            if spec.model_options:
                raise ConfigError("model_options apply to toolloop only", field="model_options")
            return get_agent(
                spec.agent,
                model=spec.model,
                effort=spec.effort,
                env=spec.env,
                base_url=spec.base_url,
                api_key_env=spec.api_key_env,
                extra_args=spec.cli_args,
            )
        if spec.env or spec.cli_args:
            raise ConfigError("env and cli_args apply to CLI agents only", field="env")
        if spec.agent == "toolloop":
            return _toolloop(spec)
        if spec.base_url or spec.api_key_env or spec.model_options:
            raise ConfigError(f"{spec.agent} takes no endpoint or model options", field="base_url")
        return get_agent(spec.agent, model=spec.model)
    except ConfigError as exc:
        if not exc.field or exc.field.startswith(where):
            raise
        message = str(exc).removeprefix(f"field '{exc.field}': ")
        raise ConfigError(message, file=exc.file, field=f"{where}.{exc.field}") from exc


def _toolloop(spec: AgentSpec):
    """The toolloop agent on its own model endpoint. Its providers have no reasoning-effort
    option, so effort is recorded as not applicable (see `effort_setting`)."""
    import os

    from metaeval.agents.toolloop import ToolLoopAgent
    from metaeval.models.registry import DEFAULT_MODEL, get_model

    options: dict[str, Any] = dict(spec.model_options)
    if spec.base_url:
        options["base_url"] = spec.base_url
    if spec.api_key_env:
        key = os.environ.get(spec.api_key_env)
        if not key:
            raise ConfigError(f"the variable {spec.api_key_env} is not set", field="api_key_env")
        options["api_key"] = key
    return ToolLoopAgent(get_model(spec.model or DEFAULT_MODEL, **options))


def effort_setting(spec: AgentSpec, agent: Any) -> str | None:
    """How the spec's effort reached the agent, for the records (None: default effort)."""
    if spec.effort in ("", "default"):
        return None
    setting = getattr(agent, "effort_setting", None)
    if isinstance(setting, str):
        return setting
    return f"not applicable ({spec.agent} has no effort setting)"


class ReferenceFinder:
    """A scripted finder for reference runs and tests.

    It lists and reads every file of the artifact with the real tools (so its inspection bytes
    are measured like any agent's), then answers from the pack's expected answers for the
    reference builder that made the artifact. Controls: question-only answers the first shown
    option; spec-only answers gold (the spec fully determines the intended behaviour). A formal
    run whose workspace holds no file (a restricted view that kept nothing) has nothing to read
    and answers as in the question-only control.
    """

    name = REFERENCE_FINDER

    def run(self, task: Task, workspace: Any, limits: Limits) -> AgentResult:
        meta = task.metadata
        shuffled: dict[str, dict[str, str]] = meta["shuffled"]
        files = sorted(
            p.relative_to(workspace.path).as_posix()
            for p in Path(workspace.path).rglob("*")
            if p.is_file()
        )
        if meta["slice"] == "formal" and not files:
            meta = {**meta, "slice": "question_only"}
        canonical = self._canonical_answers(meta)
        answers: dict[str, dict[str, Any]] = {}
        for qid, options in shuffled.items():
            wanted = canonical.get(qid)
            shown = next((letter for letter in LETTERS if options[letter] == wanted), None)
            answers[qid] = {
                "answer": shown,
                "evidence_files": [],
                "evidence_symbols": [],
                "rationale": "reference answer",
            }
        actions: list[tuple[str, dict]] = [("list_dir", {"path": "."})]
        actions += [("read_file", {"path": rel}) for rel in files]
        actions.append(("submit", {"answer": json.dumps(answers, sort_keys=True)}))
        return ScriptedAgent(actions, name=self.name).run(task, workspace, limits)

    @staticmethod
    def _canonical_answers(meta: dict[str, Any]) -> dict[str, str | None]:
        """Option text per question id that this reference finder will pick."""
        root = Path(meta["pack_task_root"])
        questions_path = root / "questions.yaml"
        questions = parse_yaml(read_text(questions_path), str(questions_path))["questions"]
        options = {q["id"]: q["options"] for q in questions}
        if meta["slice"] == "question_only":
            return {qid: meta["shuffled"][qid]["A"] for qid in options}
        if meta["slice"] == "spec_only":
            return {q["id"]: q["options"][q["gold"]] for q in questions}
        builder = (meta.get("reference_builder") or "").removeprefix(REFERENCE_PREFIX)
        expected_path = root / "reference" / "expected_answers.yaml"
        expected = parse_yaml(read_text(expected_path), str(expected_path)) or {}
        letters = expected.get(builder, {})
        return {qid: (options[qid][letter] if letter else None) for qid, letter in letters.items()}
