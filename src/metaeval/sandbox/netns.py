"""Start a bwrap sandbox with a network of its own: slirp4netns, minus the host and the LAN.

Usage (on the host, as the prefix of a bwrap command line)::

    python3 -I netns.py SLIRP4NETNS NSENTER IP -- BWRAP ARGS...

A sandbox allowed the network would otherwise share the host's network namespace, and with it
every service listening on the host's loopback and every address the host reaches (its LAN, a
cloud metadata service). Instead this script runs bwrap with its own (empty) network
namespace and, before the sandboxed command starts (bwrap `--block-fd`), gives it a tap
device through slirp4netns: user-mode NAT to the outside, with the host's loopback refused
(`--disable-host-loopback`) and slirp4netns itself sandboxed. Then it adds `prohibit` routes
inside the namespace for every private, link-local (169.254.169.254, the cloud metadata
address), shared, multicast and reserved IPv4 range and for the host's own addresses, so a
connection there fails at once and no packet leaves; slirp4netns gives no IPv6, so
fd00:ec2::254 and every other IPv6 address are unreachable. DNS goes to slirp4netns's
forwarder at 10.0.2.3 (the sandbox's resolv.conf). If any step fails, the sandbox is killed
and the script exits with `SETUP_FAILED` and says why on stderr: never a silent fallback to
the host's network. A `--json-status-fd` among bwrap's arguments is handed on to bwrap (and
closed here), so the caller still learns whether the command started. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time

SETUP_FAILED = 125
SETUP_TIMEOUT_S = 15.0
TAP = "tap0"
DNS = "10.0.2.3"
BLOCKED = (
    "0.0.0.0/8",
    "10.0.0.0/8",  # slirp's own 10.0.2.0/24 (gateway, DNS) is more specific and stays
    "100.64.0.0/10",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
)
"""IPv4 ranges a sandbox's network never reaches (besides the host's own addresses)."""


class SetupError(Exception):
    pass


def _child_pid(info_fd: int, deadline: float) -> int:
    data = b""
    while time.monotonic() < deadline:
        chunk = os.read(info_fd, 4096)
        if not chunk:
            break
        data += chunk
        try:
            return int(json.loads(data)["child-pid"])
        except (ValueError, KeyError):
            continue
    raise SetupError("bwrap did not report its sandbox")


def _wait_until_set_up(pid: int, bwrap: subprocess.Popen, deadline: float) -> None:
    """Until the sandbox has its own root (bwrap's namespace setup, loopback included, is
    done before it): slirp4netns must not race bwrap's own configuration."""
    host = os.stat("/").st_dev
    while time.monotonic() < deadline:
        if bwrap.poll() is not None:
            raise SetupError(f"bwrap exited ({bwrap.returncode}) before its sandbox was set up")
        try:
            if os.stat(f"/proc/{pid}/root/").st_dev != host:
                return
        except OSError as exc:
            raise SetupError(f"cannot see the sandbox: {exc}") from exc
        time.sleep(0.002)
    raise SetupError("the sandbox was not set up in time")


def _host_addresses(ip: str) -> list[str]:
    """The host's own IPv4 addresses outside the loopback range."""
    done = subprocess.run([ip, "-4", "-o", "addr", "show"], capture_output=True, text=True)
    found = []
    for line in done.stdout.splitlines():
        fields = line.split()
        if "inet" in fields:
            address = fields[fields.index("inet") + 1].split("/", 1)[0]
            if not address.startswith("127."):
                found.append(address)
    return found


NS_GET_USERNS = 0xB701  # linux/nsfs.h: _IO(0xb7, 0x1)


def _owner_userns(pid: int) -> int | None:
    """An fd of the user namespace owning the sandbox's network namespace, or None when it
    is ours (root). bwrap may nest another user namespace for --uid: that one (the sandbox's
    own) does not own the network namespace, so joining it would not do."""
    net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        owner = fcntl.ioctl(net, NS_GET_USERNS)
    finally:
        os.close(net)
    if os.fstat(owner).st_ino == os.stat("/proc/self/ns/user").st_ino:
        os.close(owner)
        return None
    return owner


def _start_slirp(
    slirp: str, pid: int, owner: int | None, deadline: float
) -> tuple[subprocess.Popen, int]:
    """slirp4netns on the sandbox's network namespace, ready; returns it and its exit fd."""
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    argv = [slirp, "--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox"]
    argv += [f"--ready-fd={ready_w}", f"--exit-fd={exit_r}", "--netns-type=path"]
    if owner is not None:
        argv.append(f"--userns-path=/proc/self/fd/{owner}")
    argv += [f"/proc/{pid}/ns/net", TAP]
    process = subprocess.Popen(
        argv,
        pass_fds=(ready_w, exit_r, *([owner] if owner is not None else [])),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    os.close(ready_w)
    os.close(exit_r)
    os.set_blocking(ready_r, False)
    while time.monotonic() < deadline:
        try:
            ready = os.read(ready_r, 1)
        except BlockingIOError:
            if process.poll() is not None:
                break
            time.sleep(0.002)
            continue
        if ready == b"1":
            os.close(ready_r)
            return process, exit_w
        break
    os.close(ready_r)
    process.kill()
    detail = process.stderr.read().decode(errors="replace").strip() if process.stderr else ""
    raise SetupError(f"slirp4netns did not come up: {detail[-300:]}")


def _block_routes(nsenter: str, ip: str, pid: int, owner: int | None) -> None:
    ranges = [*BLOCKED, *(f"{a}/32" for a in _host_addresses(ip))]
    batch = "".join(f"route add prohibit {cidr}\n" for cidr in ranges)
    enter = [nsenter, f"--net=/proc/{pid}/ns/net"]
    if owner is not None:
        enter += [f"--user=/proc/self/fd/{owner}", "--preserve-credentials"]
    done = subprocess.run(
        [*enter, ip, "-batch", "-"],
        input=batch.encode(),
        capture_output=True,
        timeout=15,
        pass_fds=(owner,) if owner is not None else (),
    )
    if done.returncode != 0:
        raise SetupError(f"cannot add its routes: {done.stderr.decode(errors='replace')[-300:]}")


def _status_fd(bwrap_argv: list[str]) -> int | None:
    """The fd bwrap's `--json-status-fd` names (an option before its `--`), if any."""
    for index, arg in enumerate(bwrap_argv[:-1]):
        if arg == "--":
            break
        if arg == "--json-status-fd":
            with contextlib.suppress(ValueError):
                return int(bwrap_argv[index + 1])
    return None


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        print("usage: netns.py SLIRP4NETNS NSENTER IP -- BWRAP ARGS...", file=sys.stderr)
        return 2
    slirp, nsenter, ip = argv[:3]
    bwrap_argv = argv[4:]
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    command = [bwrap_argv[0], "--info-fd", str(info_w), "--block-fd", str(block_r)]
    command += bwrap_argv[1:]
    deadline = time.monotonic() + SETUP_TIMEOUT_S
    status = _status_fd(bwrap_argv)
    kept = (info_w, block_r, *([status] if status is not None else []))
    bwrap = subprocess.Popen(command, pass_fds=kept)
    os.close(info_w)
    os.close(block_r)
    if status is not None:
        os.close(status)  # bwrap alone writes it: it says the command started
    slirp_process = None
    pid = None
    try:
        pid = _child_pid(info_r, deadline)
        _wait_until_set_up(pid, bwrap, deadline)
        owner = _owner_userns(pid)
        slirp_process, exit_w = _start_slirp(slirp, pid, owner, deadline)
        _block_routes(nsenter, ip, pid, owner)
    except (SetupError, OSError, subprocess.SubprocessError) as exc:
        if pid is not None:  # the sandbox itself first: it must never run its command
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        bwrap.kill()
        bwrap.wait()
        if slirp_process is not None:
            slirp_process.kill()
        print(f"metaeval: cannot give the sandbox its network: {exc}", file=sys.stderr)
        return SETUP_FAILED
    os.write(block_w, b"1")  # the command may start now
    os.close(block_w)
    code = bwrap.wait()
    os.close(exit_w)  # slirp4netns ends with the sandbox
    try:
        slirp_process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        slirp_process.kill()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
