"""Network namespaces, veth pairs and bridges, always cleaned up: the sandbox's `--netns`
nodes, the test bed and the network tests all build on these.

Every namespace is named ``<prefix><pid>-<tag>`` (``eipt-`` for tests and the bed, ``eipsbx-``
for the sandbox), so concurrent runs never collide and leftovers of dead runs are
recognisable: `reap_leftovers(prefix)` kills what still runs in, then deletes, the namespaces
whose owning pid is gone. Links are created *inside* the namespaces (``ip -n A link add ...
peer name ... netns B``), so the host namespace never sees one, not even briefly.

Typical use::

    with NamespaceSet() as spaces:
        a, b = spaces.namespace("a"), spaces.namespace("b")
        spaces.veth(a, "ea0", b, "eb0")
        a.ip("addr add 192.0.2.1/24 dev ea0")
        await run_in_netns(a.name, some_function, arg)   # code that opens sockets

Tests use only TEST-NET addresses (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
2001:db8::/32).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import inspect
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

PREFIX = "eipt-"
"""Namespaces of tests and of the test bed (the sandbox has its own, `eipctl.sandbox.netns`)."""
CLONE_NEWNET = 0x40000000
_counter = itertools.count()
_T = TypeVar("_T")


def why_unavailable() -> str | None:
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (creates network namespaces)"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip`"
    return None


def nft_unavailable() -> str | None:
    """Why nftables rules cannot be made here (the bed's `cut_liveness`), or None."""
    return None if shutil.which("nft") is not None else "needs nftables' `nft` binary"


def sh(*args: str, check: bool = True, stdin: str | None = None) -> str:
    """Run a command (no shell), `stdin` fed to it; stderr is included in the error."""
    proc = subprocess.run(
        args, input=stdin, capture_output=True, text=True, check=False, timeout=30
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def list_namespaces() -> list[str]:
    return [line.split()[0] for line in sh("ip", "netns", "list").splitlines() if line.strip()]


def pid_alive(pid: int) -> bool:
    """Whether a process exists (leftover detection)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_pids_in(name: str) -> None:
    """SIGKILL every process in namespace `name` (a namespace outlives `ip netns del` while
    something runs in it)."""
    for pid in sh("ip", "netns", "pids", name, check=False).split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def reap_leftovers(prefix: str = PREFIX) -> list[str]:
    """Kill what runs in, then delete, the ``<prefix><pid>-`` namespaces of dead runs."""
    owner = re.compile(rf"^{re.escape(prefix)}(\d+)-")
    removed = []
    for name in list_namespaces():
        m = owner.match(name)
        if m and not pid_alive(int(m.group(1))):
            kill_pids_in(name)
            sh("ip", "netns", "del", name, check=False)
            removed.append(name)
    return removed


@dataclass
class Namespace:
    name: str

    def ip(self, args: str, check: bool = True) -> str:
        """``ip -n <ns> <args>``, e.g. ``ns.ip("-4 addr show dev ea0")``."""
        return sh("ip", "-n", self.name, *args.split(), check=check)

    def exec(self, *args: str, check: bool = True, stdin: str | None = None) -> str:
        return sh("ip", "netns", "exec", self.name, *args, check=check, stdin=stdin)

    def sysctl(self, key: str, value: str | int) -> None:
        self.exec("sysctl", "-qw", f"{key}={value}")

    def mac(self, ifname: str) -> bytes:
        out = self.ip(f"-o link show dev {ifname}")
        m = re.search(r"link/ether ([0-9a-f:]{17})", out)
        if m is None:
            raise RuntimeError(f"no MAC for {ifname} in {self.name}: {out}")
        return bytes.fromhex(m.group(1).replace(":", ""))


def new_run_id(prefix: str = PREFIX) -> str:
    """``<prefix><our pid>-<n>``: unique in this process, recognisable after it died."""
    return f"{prefix}{os.getpid()}-{next(_counter)}"


@dataclass
class NamespaceSet:
    """Owns namespaces; deleting a namespace deletes its links, so teardown is one loop."""

    run_id: str = field(default_factory=new_run_id)
    namespaces: list[Namespace] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __enter__(self) -> NamespaceSet:
        reap_leftovers()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        errors = []
        for ns in reversed(self.namespaces):
            try:
                sh("ip", "netns", "del", ns.name)
            except RuntimeError as err:  # keep going: remove all we can
                errors.append(str(err))
        self.namespaces.clear()
        if errors:
            raise RuntimeError("; ".join(errors))

    def remove(self, ns: Namespace) -> None:
        """Kill what runs in `ns`, then delete it (with its links and addresses)."""
        with self._lock:
            if ns in self.namespaces:
                self.namespaces.remove(ns)
        kill_pids_in(ns.name)
        sh("ip", "netns", "del", ns.name)

    def namespace(self, tag: str, *, ipv6_dad: bool = False) -> Namespace:
        """A new namespace with lo up. DAD off by default so test links are usable at once.
        Safe to call from several threads at once."""
        ns = Namespace(f"{self.run_id}-{tag}")
        sh("ip", "netns", "add", ns.name)
        with self._lock:
            self.namespaces.append(ns)
        ns.ip("link set lo up")
        if not ipv6_dad:
            ns.sysctl("net.ipv6.conf.all.accept_dad", 0)
            ns.sysctl("net.ipv6.conf.default.accept_dad", 0)
        return ns

    def veth(self, a: Namespace, a_if: str, b: Namespace, b_if: str, *, up: bool = True) -> None:
        """A veth pair from `a` (named `a_if`) to `b` (named `b_if`), created inside `a`."""
        a.ip(f"link add {a_if} type veth peer name {b_if} netns {b.name}")
        if up:
            a.ip(f"link set {a_if} up")
            b.ip(f"link set {b_if} up")

    def bridge(self, ns: Namespace, name: str, ports: list[str]) -> None:
        """A bridge in `ns` enslaving `ports` (links already in `ns`); all set up."""
        ns.ip(f"link add {name} type bridge")
        for port in ports:
            ns.ip(f"link set {port} master {name}")
            ns.ip(f"link set {port} up")
        ns.ip(f"link set {name} up")


def listening_socket(
    host: str, port: int, backlog: int, *, dual_stack: bool = False
) -> socket.socket:
    """A non-blocking TCP listener, to serve from an event loop. Called in a namespace's
    thread (`call_in_netns`), it listens in that namespace whichever thread serves it."""
    family = socket.AF_INET6 if dual_stack else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if dual_stack:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


_libc = ctypes.CDLL(None, use_errno=True)


def enter_netns(name: str) -> None:
    """Move the *calling thread* into namespace `name`, for good (use a dedicated thread)."""
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({name}): {os.strerror(err)}")
    finally:
        os.close(fd)


@overload
def call_in_netns(
    name: str, fn: Callable[..., Coroutine[Any, Any, _T]], *args: Any, **kwargs: Any
) -> _T: ...
@overload
def call_in_netns(name: str, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T: ...
def call_in_netns(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run `fn(*args, **kwargs)` in a fresh thread that joined namespace `name`; return its result.

    A fresh thread, never a pooled one, because setns() changes the calling thread for good.
    A coroutine function is run with its own event loop inside that thread.
    """
    result: list[Any] = []
    error: list[BaseException] = []

    def body() -> None:
        try:
            enter_netns(name)
            value = fn(*args, **kwargs)
            if inspect.iscoroutine(value):
                value = asyncio.run(value)
            result.append(value)
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=body, name=f"netns-{name}", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


async def run_in_netns(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`call_in_netns` without blocking the caller's event loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def body() -> None:
        try:
            value = call_in_netns(name, fn, *args, **kwargs)
        except BaseException as exc:
            loop.call_soon_threadsafe(_settle, future, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, future, value, None)

    threading.Thread(target=body, daemon=True).start()
    return await future


def _settle(future: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(value)
