"""The one sandbox policy: what untrusted code sees, may write, may reach and is told.

Every process metaeval runs on behalf of code it does not trust (task phases, agent tools,
compile probes, improve's target servers, agent CLIs) is started under bubblewrap with an
argv built here, from a `SandboxSpec`:

- **Filesystem.** The root is an empty tmpfs assembled from an allowlist: the host's
  `/usr`, `/bin`, `/lib*`, `/sbin` read-only, a handful of `/etc` entries that programs need
  to start (the dynamic loader's cache, TLS certificates, name-service and time-zone files,
  alternatives), and a generated `passwd`/`group` with no real accounts. Home directories,
  `/root`, `/etc/shadow`, `/etc/ssh`, `/srv`, `/opt`, `/work` and every other host path are
  absent unless the spec binds them. The Python installations a command needs are bound
  read-only at their own paths (only their prefixes, never the directory around them).
- **Writes.** Only the spec's writable mounts, a private, empty `/tmp` and `/dev/shm`. Both
  are memory-backed tmpfs of a fixed size (`tmp_mb`, default `DEFAULT_TMP_MB`; `/dev/shm`
  `SHM_MB`, Docker's default), so a sandbox cannot fill half the host's RAM through them; the
  rest of `/dev` is read-only. (bubblewrap before 0.8 has no `--size`: there the two are
  unbounded, and `tmpfs_size_supported()` says so.)
- **Network.** None (a private network namespace with only its own loopback) unless the spec
  asks. Then, where slirp4netns, nsenter and ip are installed and metaeval runs as root, a
  network namespace of its own with user-mode NAT to the outside (`netns.py`): not the host's loopback, not private,
  link-local (cloud metadata) or reserved IPv4 ranges, not the host's own addresses, no
  IPv6. Without them, the host's network namespace, shared: the host's loopback services and
  whatever the host can reach (its LAN, a cloud metadata address) included;
  `network_isolation()` says which applies. A network-less
  sandbox may still be joined to named harness services: `services` maps a loopback port
  inside to a host Unix socket (the model gateway), `published` a host Unix socket to a
  loopback port inside (a server the harness calls); `gateway/relay.py` does the copying
  inside, so no TCP port is opened on the host.
- **Identity.** A fresh user namespace with uid/gid 1000 (`sandbox`) and no capabilities,
  where bubblewrap can make one; otherwise the host uid (reported by `unprivileged_uid`).
- **Processes.** Private PID, IPC and UTS namespaces; the sandbox dies with its parent and
  runs in a new session (no terminal injection).
- **Memory.** Python and native tools: an address-space limit (RLIMIT_AS, `memory_mb`).
  JIT/Wasm runtimes (node: Claude Code, Codex's launcher, Gemini CLI) reserve far more
  address space than they use and die under it, so they get a cgroup cap on real memory
  instead (`memory_cgroup_mb`, `cgroup.py`: v1 or v2, a child of metaeval's own cgroup,
  removed after the run); where cgroups are not writable they are bounded by time only,
  and the run records that.
- **Environment.** Built from scratch: a fixed PATH, `HOME`, locale and terminal variables,
  and what the spec declares. Host variables are never inherited wholesale; a credential
  reaches a sandboxed process only when the caller names it.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from metaeval.sandbox.process import STATUS_FD

SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin")
"""Host directories visible read-only in every sandbox (top-level symlinks are recreated)."""

ETC_ALLOWLIST = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "gai.conf",
    "host.conf",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "magic",
    "magic.mime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "pki",
    "protocols",
    "python3",
    "python3.11",
    "resolv.conf",
    "services",
    "ssl",
    "timezone",
)
"""Entries of the host's /etc a sandbox sees (only those that exist); nothing with secrets."""

DEFAULT_TMP_MB = 1024
"""Size of a sandbox's /tmp unless its spec says otherwise (task phases: storage_mb)."""
SHM_MB = 64
"""Size of a sandbox's /dev/shm (Docker's default)."""

SANDBOX_UID = 1000
SANDBOX_GID = 1000
SANDBOX_USER = "sandbox"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_ENV_ALLOWLIST = ("LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ")
"""Host variables passed on when set; everything else comes from the spec."""
RELAY_SCRIPT = Path(__file__).resolve().parents[1] / "gateway" / "relay.py"
NETNS_SCRIPT = Path(__file__).resolve().with_name("netns.py")
NETNS_RESOLV_CONF = Path(__file__).resolve().parent / "etc" / "resolv.conf"
NETWORK_TOOLS = ("slirp4netns", "nsenter", "ip")
"""Joins a network-less sandbox's loopback ports to host Unix sockets (see `SandboxSpec`)."""


@dataclass(frozen=True)
class Mount:
    """One host path made visible inside the sandbox at `inside` (its own path by default)."""

    host: str
    inside: str = ""
    writable: bool = False

    def target(self) -> str:
        return self.inside or self.host


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandboxed command may see and do; see the module docstring for the rules.

    `mounts` are bound in order after the system allowlist (later ones may sit inside
    earlier ones). `python_prefixes` are bound read-only at their own paths. `env` is the
    declared environment (PATH defaults to `DEFAULT_PATH`; HOME to `home`). `chdir` is the
    working directory inside; `dirs` are empty directories created in the root. `hidden` are
    host paths inside some mount that the command must not see: each is covered by an empty
    read-only directory (or an empty file), after every mount.
    """

    mounts: Sequence[Mount] = ()
    network: bool = False
    chdir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    home: str = "/tmp"
    python_prefixes: Sequence[str] = ()
    dirs: Sequence[str] = ()
    hidden: Sequence[str] = ()
    tmp_mb: int = DEFAULT_TMP_MB
    services: Sequence[tuple[int, str]] = ()  # (port inside, host Unix socket), dir bound ro
    published: Sequence[tuple[str, int]] = ()  # (host Unix socket, port inside), dir bound rw


def bwrap_binary() -> str | None:
    """Absolute path of the bwrap executable on PATH, or None."""
    from shutil import which

    return which("bwrap")


def _system_args() -> list[str]:
    args: list[str] = []
    for system in SYSTEM_DIRS:
        if os.path.islink(system):
            args += ["--symlink", os.readlink(system), system]
        elif os.path.isdir(system):
            args += ["--ro-bind", system, system]
    for name in ETC_ALLOWLIST:
        path = f"/etc/{name}"
        if os.path.lexists(path) and os.path.exists(path):
            args += ["--ro-bind", path, path]
    passwd, group = identity_files()
    args += ["--ro-bind", passwd, "/etc/passwd", "--ro-bind", group, "/etc/group"]
    return args


def identity_files() -> tuple[str, str]:
    """Paths of the sandbox's passwd and group files (shipped with the package: root,
    `sandbox` (uid/gid 1000) and nobody, no hashes, no real accounts)."""
    here = Path(__file__).resolve().parent / "etc"
    return str(here / "passwd"), str(here / "group")


def _namespace_args(network: bool, userns: bool) -> list[str]:
    args = ["--unshare-all", "--unshare-pid", "--die-with-parent", "--new-session"]
    if userns:
        args += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
    if network:
        args.append("--share-net")
    return args


PROBE_ATTEMPTS = 3
"""A probe that fails is tried this often before bwrap is judged unusable: mounts that other
processes make and remove meanwhile (containers, other sandboxes) can fail one attempt."""


def probe(binary: str, userns: bool) -> tuple[bool, str]:
    """Run a no-op in a sandbox built like real ones (the system directories only, never a
    recursive bind of `/`, whose submounts come and go); (works, last line of the error)."""
    argv = [binary, *_namespace_args(False, userns), *_system_args()]
    argv += ["--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]
    reason = ""
    for attempt in range(PROBE_ATTEMPTS):
        if attempt:
            time.sleep(0.2 * attempt)
        try:
            done = subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=15, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            reason = str(exc)
            continue
        if done.returncode == 0:
            return True, ""
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        reason = detail[-1] if detail else f"exit code {done.returncode}"
    return False, reason


@functools.cache
def _userns_works(binary: str) -> bool:
    """True when bwrap can make a user namespace here (probed once per process)."""
    return probe(binary, userns=True)[0]


@functools.cache
def _size_option(binary: str) -> bool:
    try:
        done = subprocess.run([binary, "--help"], capture_output=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--size" in done.stdout + done.stderr


def tmpfs_size_supported() -> bool:
    """True when bwrap here can size a tmpfs (`--size`, bubblewrap 0.8 and later)."""
    binary = bwrap_binary()
    return binary is not None and _size_option(binary)


def _tmpfs(path: str, megabytes: int, sized: bool) -> list[str]:
    size = ["--size", str(int(megabytes) * 1024 * 1024)] if sized else []
    return [*size, "--tmpfs", path]


@functools.cache
def _network_tools() -> tuple[str, ...] | None:
    """slirp4netns, nsenter and ip, when a sandbox can get a network of its own here: they
    are installed and metaeval runs as root (without root, slirp4netns cannot join the
    network namespace bwrap makes under its nested user namespace: not supported yet)."""
    from shutil import which

    if os.geteuid() != 0:
        return None
    found = [which(n) or which(n, path="/usr/sbin:/sbin") for n in NETWORK_TOOLS]
    return tuple(t for t in found if t) if all(found) else None


def network_isolation() -> str:
    """How a sandbox given the network gets it: "own" (slirp4netns: a namespace of its own,
    without the host's loopback, private or link-local ranges; as root with the tools
    installed) or "host" (the host's, shared)."""
    return "own" if _network_tools() is not None else "host"


def unprivileged_uid() -> bool:
    """True when sandboxes run as the unprivileged `sandbox` user in a user namespace."""
    binary = bwrap_binary()
    return binary is not None and _userns_works(binary)


def bwrap_argv(spec: SandboxSpec, *, status_fd: bool = False) -> list[str]:
    """The bwrap prefix enforcing `spec`; append the command argv (it follows `--`).

    `status_fd` adds `--json-status-fd` with `process.STATUS_FD` for `run_process` to fill
    in (only for an argv run_process starts), so a sandbox that cannot be set up is told
    apart from a command that fails."""
    binary = bwrap_binary() or "bwrap"
    tools = _network_tools() if spec.network else None
    netns: list[str] = []
    if tools is not None:  # its own network namespace, set up by netns.py around bwrap
        netns = [os.path.realpath(sys.executable), "-I", str(NETNS_SCRIPT), *tools, "--"]
    shared = spec.network and tools is None
    argv = [*netns, binary, *_namespace_args(shared, _userns_works(binary))]
    if status_fd:
        argv += ["--json-status-fd", STATUS_FD]
    argv += _system_args()
    if tools is not None:
        argv += ["--ro-bind", str(NETNS_RESOLV_CONF), "/etc/resolv.conf"]
    sized = _size_option(binary)
    argv += ["--proc", "/proc", "--dev", "/dev", *_tmpfs("/dev/shm", SHM_MB, sized)]
    argv += ["--remount-ro", "/dev", *_tmpfs("/tmp", spec.tmp_mb, sized)]
    bound: set[str] = set()
    for prefix in spec.python_prefixes:
        if prefix not in bound and not under_system_dirs(prefix):
            argv += ["--ro-bind", prefix, prefix]
            bound.add(prefix)
    for mount in [*spec.mounts, *_relay_mounts(spec)]:
        argv += ["--bind" if mount.writable else "--ro-bind", mount.host, mount.target()]
    for directory in spec.dirs:
        argv += ["--dir", directory]
    for path in spec.hidden:
        if os.path.isdir(path):
            argv += ["--tmpfs", path, "--remount-ro", path]
        elif os.path.lexists(path):
            argv += ["--ro-bind", "/dev/null", path]
    argv += ["--remount-ro", "/"]  # the assembled root itself takes no writes
    if spec.chdir:
        argv += ["--chdir", spec.chdir]
    argv.append("--")
    return argv


def _relay_mounts(spec: SandboxSpec) -> list[Mount]:
    """What the relay of `spec` needs: its script, its interpreter, the sockets' directories."""
    if not (spec.services or spec.published):
        return []
    mounts = [Mount(str(RELAY_SCRIPT.parent))]
    base = os.path.realpath(sys.base_prefix)
    if not under_system_dirs(base):
        mounts.append(Mount(base))
    mounts += [Mount(os.path.dirname(path)) for _, path in spec.services]
    mounts += [Mount(os.path.dirname(path), writable=True) for path, _ in spec.published]
    return mounts


def relay_argv(spec: SandboxSpec) -> list[str]:
    """The prefix that runs a command behind the relay of `spec` (empty when it has none)."""
    if not (spec.services or spec.published):
        return []
    argv = [os.path.realpath(sys.executable), "-I", str(RELAY_SCRIPT)]
    for port, path in spec.services:
        argv += [str(port), path]
    for path, port in spec.published:
        argv += ["--publish", path, str(port)]
    return [*argv, "--"]


def sandbox_environment(spec: SandboxSpec) -> dict[str, str]:
    """The complete environment of a sandboxed command under `spec` (nothing else leaks)."""
    env = {name: os.environ[name] for name in HOST_ENV_ALLOWLIST if os.environ.get(name)}
    env["PATH"] = DEFAULT_PATH
    env["HOME"] = spec.home
    env["USER"] = env["LOGNAME"] = SANDBOX_USER
    env.update(spec.env)
    return env


def under_system_dirs(path: str) -> bool:
    """True when `path` (resolved) is one of the bound system dirs or lies below one."""
    for system in SYSTEM_DIRS:
        real = os.path.realpath(system)
        if path == real or path.startswith(real.rstrip("/") + "/"):
            return True
    return False


def running_python_prefixes() -> list[str]:
    """Resolved prefixes of the running interpreter (venv and base) outside the system dirs."""
    found: list[str] = []
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix):
        real = os.path.realpath(prefix)
        if not under_system_dirs(real) and real not in found:
            found.append(real)
    return found


def metaeval_source_dirs() -> list[str]:
    """Directories a sandboxed `python -m metaeval...` needs beyond the interpreter: the
    package's own source root when it is not inside an installed prefix (editable install)."""
    import metaeval

    root = os.path.realpath(Path(metaeval.__file__).parent.parent)
    prefixes = running_python_prefixes()
    if any(root == p or root.startswith(p.rstrip("/") + "/") for p in prefixes):
        return []
    return [root] if not under_system_dirs(root) else []
