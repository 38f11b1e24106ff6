"""What every build and find cell needs from its run: the config, the pack, the resolved
agents, the environment hash and (for finds) the logical view of the builds. `for_run` makes
it from a run config, checking the selected tasks and every agent first."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from metaeval import __version__
from metaeval.agents.types import AgentResult, Limits
from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.agents import effort_setting, make_agent
from metaeval.protocols.buildfind.config import AgentSpec, RunConfig
from metaeval.protocols.buildfind.pack.load import load_pack
from metaeval.protocols.buildfind.pack.schema import Pack, PackTask
from metaeval.protocols.buildfind.records import BuildRecord
from metaeval.records import RunDir, environment_hash, sha256_text


@dataclass
class CellContext:
    """The run's state a cell reads (never writes): one per `BuildFindRun`."""

    config: RunConfig
    pack: Pack
    builders: dict[str, tuple[AgentSpec, Any]]
    finders: dict[str, tuple[AgentSpec, Any]]
    env_hash: str
    tasks: list[PackTask] = field(default_factory=list)  # the tasks the run selects
    # the ok builds of the logical view, keyed by BUILD_KEY; set before the find phase
    builds_view: dict[tuple, BuildRecord] = field(default_factory=dict)

    @classmethod
    def for_run(cls, config: RunConfig) -> CellContext:
        """The context of a run of `config`: its pack loaded, the tasks it selects checked and
        every agent resolved, so a bad name fails before any directory exists."""
        pack = load_pack(config.pack)
        unknown = [t for t in config.tasks if t not in pack.tasks]
        if unknown:
            raise ConfigError(f"unknown task(s): {', '.join(unknown)}", field="tasks")
        return cls(
            config=config,
            pack=pack,
            builders={b.name: (b, make_agent(b, role="builder")) for b in config.builders},
            finders={f.name: (f, make_agent(f, role="finder")) for f in config.finders},
            env_hash=environment_hash(),
            tasks=[pack.tasks[t] for t in (config.tasks or sorted(pack.tasks))],
        )

    def common(
        self, spec: AgentSpec, agent: Any, seed: int, prompt: str, pack_task: PackTask
    ) -> dict[str, Any]:
        return {
            "agent_id": spec.agent,
            "adapter_family": spec.family,
            "model": spec.model,
            "effort": spec.effort,
            "effort_setting": effort_setting(spec, agent),
            "seed": seed,
            "prompt_hash": sha256_text(prompt),
            "spec_hash": sha256_text(pack_task.spec_text),
            "metaeval_version": __version__,
            "environment_hash": self.env_hash,
        }


def given_limit(result: AgentResult, limits: Limits) -> AgentResult:
    """`result` with the time limit the harness gave it (agents that do not record it)."""
    if result.time_limit_s is not None:
        return result
    return result.model_copy(update={"time_limit_s": limits.time_limit_s})


def agent_fields(result: AgentResult, run: RunDir) -> dict[str, Any]:
    transcript = "\n".join(e.model_dump_json(exclude_none=True) for e in result.transcript)
    return {
        "status": result.status,
        "stop_reason": result.stop_reason,
        "infra_error": result.infra_error,
        "error": result.error,
        "steps": result.steps,
        "usage": result.usage.model_dump(),
        "cost_usd": result.cost_usd,
        "novel_retrieval_bytes": result.effort.novel_retrieval_bytes,
        "novel_tool_call_bytes": result.effort.novel_tool_call_bytes,
        "wall_clock_seconds": round(result.wall_clock_s, 3),
        # the limit the agent was given; with wall_clock_seconds it shows any overrun
        "time_limit_s": result.time_limit_s,
        "transcript_blob": run.blobs.put(transcript),
    }
