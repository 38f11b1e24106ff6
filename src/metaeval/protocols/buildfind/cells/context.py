"""What every build and find cell needs from its run: the config, the pack, the resolved
agents, the environment hash and (for finds) the logical view of the builds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from metaeval import __version__
from metaeval.agents.types import AgentResult
from metaeval.protocols.buildfind.agents import effort_setting
from metaeval.protocols.buildfind.config import AgentSpec, RunConfig
from metaeval.protocols.buildfind.pack import Pack, PackTask
from metaeval.records import RunDir, sha256_text


@dataclass
class CellContext:
    """The run's state a cell reads (never writes): one per `BuildFindRun`."""

    config: RunConfig
    pack: Pack
    builders: dict[str, tuple[AgentSpec, Any]]
    finders: dict[str, tuple[AgentSpec, Any]]
    env_hash: str
    builds_view: dict[tuple, dict] = field(default_factory=dict)  # set before the find phase

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
        "transcript_blob": run.blobs.put(transcript),
    }
