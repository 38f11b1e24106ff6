"""From `audit run` options to settings (protocols/audit/run_options.py) and which cells a run
plans (protocols/audit/plan.py `cell_keys`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from metaeval.errors import ConfigError
from metaeval.models.registry import command_line_options, set_command_line_options
from metaeval.protocols.audit.plan import cell_keys
from metaeval.protocols.audit.run_options import (
    AgentRunOptions,
    ModelFlags,
    RunOptions,
    resolve_agent_run,
    resolve_run,
)

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"
OLD_RUN = Path(__file__).resolve().parent / "fixtures" / "old_format" / "audit" / "run"


@pytest.fixture(autouse=True)
def _restore_model_options():
    before = command_line_options()
    yield
    set_command_line_options(before)


def test_cell_keys_put_the_static_source_first_and_models_only_on_their_tasks() -> None:
    keys = cell_keys(["a", "b", "c"], ["m/one", "m/two"], model_tasks=["c", "a"])
    assert keys == [
        ("a", "static"),
        ("a", "m/one"),
        ("a", "m/two"),
        ("b", "static"),
        ("c", "static"),
        ("c", "m/one"),
        ("c", "m/two"),
    ]
    assert cell_keys(["a", "b"], ["m/one"], static_only=True) == [("a", "static"), ("b", "static")]
    with pytest.raises(ConfigError, match="no such task.*zz") as info:
        cell_keys(["a"], ["m/one"], model_tasks=["a", "zz"])
    assert info.value.field == "model_tasks"


def test_audit_and_provider_model_args_are_told_apart(tmp_path: Path) -> None:
    settings = resolve_run(
        RunOptions(
            bench_dir=BENCH,
            models=["openai/gpt-4.1-mini"],
            output=tmp_path / "run",
            flags=ModelFlags(
                ["temperature=0.5", "max_findings=3", "base_url=http://127.0.0.1:9/v1"],
                timeout=7.0,
            ),
        )
    )
    assert settings.model_call.temperature == 0.5
    assert settings.model_call.answer.max_findings == 3
    assert settings.max_tokens == 4096  # the paper's budget for a new run
    assert settings.concurrency == 1 and settings.tier == "definition"
    # the provider's keys (and only those) reach every model the process creates
    assert command_line_options() == {"base_url": "http://127.0.0.1:9/v1", "timeout_s": 7.0}


def test_a_resumed_run_keeps_its_recorded_output_budget(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"  # a run written by older code, started with max_tokens 2048
    shutil.copytree(OLD_RUN, run_dir)
    assert json.loads((run_dir / "manifest.json").read_text())["config"]["max_tokens"] == 2048
    settings = resolve_run(RunOptions(bench_dir=BENCH, output=run_dir, static_only=True))
    assert settings.max_tokens == 2048 and settings.models == []
    given = resolve_run(RunOptions(bench_dir=BENCH, output=run_dir, max_tokens=2000))
    assert given.max_tokens == 2000 and given.models == ["local/smollm2"]


@pytest.mark.parametrize(
    ("change", "field"),
    [({"tier": "full"}, "tier"), ({"sandbox": "vm"}, "sandbox"), ({"pull": "often"}, "pull")],
)
def test_an_unknown_choice_names_its_option(tmp_path: Path, change: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_run(RunOptions(bench_dir=BENCH, output=tmp_path / "run", **change))
    assert info.value.field == field


def test_agent_run_options_default_their_directory_and_check_host_variables() -> None:
    settings = resolve_agent_run(AgentRunOptions(bench_dir=BENCH, agent="toolloop"))
    assert settings.out_dir == Path("runs") / "agent-audit-bench"
    assert settings.max_steps == 30 and settings.time_limit_s is None
    with pytest.raises(ConfigError):
        resolve_agent_run(
            AgentRunOptions(bench_dir=BENCH, agent="toolloop", allow_host_env=["1BAD"])
        )


def test_the_python_api_and_the_cli_resolve_to_the_same_budget(tmp_path: Path) -> None:
    """One default (the paper's 4096), whether a run starts from the CLI's options, from
    `AuditSettings` directly, or a task is audited with `audit_task`."""
    import inspect

    from metaeval.protocols.audit.llm_protocol import audit_task
    from metaeval.protocols.audit.settings import AuditSettings

    cli = resolve_run(RunOptions(bench_dir=BENCH, output=tmp_path / "run", static_only=True))
    api = AuditSettings(bench_dir=BENCH, run_dir=tmp_path / "run")
    direct = inspect.signature(audit_task).parameters["max_tokens"].default
    assert cli.max_tokens == api.max_tokens == direct == 4096
    assert cli.model_call == api.model_call  # temperature and caps too
