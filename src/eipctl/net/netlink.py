"""`LinkBackend` on the kernel, through pyroute2's AsyncIPRoute (stock asyncio loop only).

Marker: every address eipctl adds carries IFA_PROTO = `EIPCTL_ADDR_PROTO` (kernel >= 5.18,
IPv4 and IPv6 alike). Addresses without it (an admin's `ip addr add`, the kernel's own
link-locals) are never renewed, taken over or removed. IPv4 labels were rejected: they
exist only for IPv4 and are limited to 15 characters that must start with the link name.

Flags: IFA_F_NOPREFIXROUTE always (a /24 external IP must not install a connected route and
steal traffic for its whole subnet; a /32 or /128 has none anyway), IFA_F_NODAD for IPv6 so
the address is usable, and announceable, at once: the controller runs its own probe first.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator, Awaitable, Callable
from ipaddress import IPv4Address, IPv4Network
from socket import AF_INET, AF_INET6
from typing import Any, TypeVar

import structlog
from pyroute2 import AsyncIPRoute
from pyroute2.netlink.exceptions import NetlinkError as PyrNetlinkError
from pyroute2.netlink.rtnl.ifaddrmsg import (
    IFA_F_NODAD,
    IFA_F_NOPREFIXROUTE,
    IFA_F_SECONDARY,
)

from eipctl.core.link_choice import HostLinks
from eipctl.net.errors import (
    ForeignAddressError,
    LinkNotFoundError,
    NetError,
    NetlinkError,
    NetPermissionError,
)
from eipctl.net.inventory import host_links_of
from eipctl.net.link import IPAddress, LinkAddress, ManagedAddress, parse_ip

log = structlog.get_logger(__name__)

EIPCTL_ADDR_PROTO = 0xE1
"""IFA_PROTO value marking eipctl's addresses (0-3 are the kernel's: unspec, lo, ra, ll).
iproute2 6.1 (this image) neither prints nor filters it; read it with pyroute2."""

_INFINITY = 0xFFFFFFFF
_T = TypeVar("_T")


def _map_error(exc: BaseException, what: str) -> NetError:
    code = getattr(exc, "code", None) or getattr(exc, "errno", None)
    if code in (errno.EPERM, errno.EACCES):
        return NetPermissionError(f"{what}: permission denied (need CAP_NET_ADMIN)")
    if code == errno.ENODEV:
        return LinkNotFoundError(f"{what}: no such link")
    if isinstance(exc, FileNotFoundError):
        return LinkNotFoundError(f"{what}: network namespace not found")
    return NetlinkError(f"{what}: {exc}", errno=code if isinstance(code, int) else None)


class NetlinkLinkBackend:
    """Real links via netlink. One netlink socket, opened lazily, reused for every call.

    `netns` is for tests only: the controller runs in the host namespace (hostNetwork).
    A missing namespace is an error, never silently created (pyroute2's default).
    """

    def __init__(self, *, netns: str | None = None, proto: int = EIPCTL_ADDR_PROTO) -> None:
        self._netns = netns
        self._proto = proto
        self._ipr: Any = None
        self._lock = asyncio.Lock()
        self._marker_checked = False

    async def _iproute(self) -> Any:
        if self._ipr is None:
            if type(asyncio.get_running_loop()).__module__.startswith("uvloop"):
                raise NetError("pyroute2's async netlink does not work under uvloop (#1335)")
            self._ipr = AsyncIPRoute(netns=self._netns, flags=0) if self._netns else AsyncIPRoute()
        return self._ipr

    async def _call(self, what: str, fn: Callable[[Any], Awaitable[_T]]) -> _T:
        try:
            return await fn(await self._iproute())
        except NetError:
            raise
        except (PyrNetlinkError, OSError) as exc:
            raise _map_error(exc, what) from exc

    async def _index(self, ifname: str) -> int:
        async def lookup(ipr: Any) -> list[int]:
            return list(await ipr.link_lookup(ifname=ifname))

        found = await self._call(f"link {ifname}", lookup)
        if not found:
            raise LinkNotFoundError(f"link {ifname}: no such link")
        return found[0]

    async def _dump(self, ifname: str) -> list[tuple[LinkAddress, int]]:
        """(address, kernel flags) for each address on the link."""
        index = await self._index(ifname)

        async def dump(ipr: Any) -> list[Any]:
            msgs: AsyncIterator[Any] = await ipr.addr("dump", index=index)
            return [m async for m in msgs]

        out: list[tuple[LinkAddress, int]] = []
        for msg in await self._call(f"dump {ifname}", dump):
            raw = msg.get("local") or msg.get("address")
            if raw is None:
                continue
            cache = msg.get("cacheinfo") or {}
            valid = cache.get("ifa_valid", _INFINITY)
            addr = LinkAddress(
                ip=parse_ip(raw),
                prefixlen=int(msg["prefixlen"]),
                managed=msg.get("proto") == self._proto,
                valid_lft=None if valid == _INFINITY else float(valid),
            )
            out.append((addr, int(msg.get("flags") or msg["flags"])))
        return out

    async def list_all(self, ifname: str) -> list[LinkAddress]:
        return [a for a, _ in await self._dump(ifname)]

    async def list_managed(self, ifname: str) -> set[ManagedAddress]:
        return {
            ManagedAddress(a.ip, a.prefixlen, a.valid_lft)
            for a, _ in await self._dump(ifname)
            if a.managed
        }

    async def add(self, ifname: str, ip: str | IPAddress, prefixlen: int, valid_lft: int) -> None:
        addr = parse_ip(ip)
        if valid_lft <= 0 or valid_lft >= _INFINITY:
            raise ValueError(f"valid_lft must be a finite positive number, got {valid_lft}")
        async with self._lock:  # check-then-write must not interleave with another call
            await self._add(ifname, addr, prefixlen, valid_lft)

    async def _add(self, ifname: str, addr: IPAddress, prefixlen: int, valid_lft: int) -> None:
        index = await self._index(ifname)
        for have, _ in await self._dump(ifname):
            if have.ip != addr:
                continue
            if not have.managed:
                raise ForeignAddressError(f"{addr} on {ifname} was not added by eipctl")
            if have.prefixlen != prefixlen:
                await self._delete(ifname, index, addr, have.prefixlen)
        flags = IFA_F_NOPREFIXROUTE | (IFA_F_NODAD if addr.version == 6 else 0)

        async def replace(ipr: Any) -> None:
            await ipr.addr(
                "replace",
                index=index,
                address=str(addr),
                prefixlen=prefixlen,
                proto=self._proto,
                flags=flags,
                valid_lft=valid_lft,
                preferred_lft=valid_lft,
            )

        await self._call(f"add {addr}/{prefixlen} on {ifname}", replace)
        if not self._marker_checked:
            await self._check_marker(ifname, index, addr, prefixlen)
        log.debug("netlink.address_ensured", link=ifname, ip=str(addr), valid_lft=valid_lft)

    async def _check_marker(self, ifname: str, index: int, addr: IPAddress, prefixlen: int) -> None:
        """Once per backend: a kernel older than 5.18 drops IFA_PROTO silently, and then
        eipctl could not tell its addresses from an admin's. Undo the add and fail loudly."""
        for have, _ in await self._dump(ifname):
            if have.ip == addr and have.prefixlen == prefixlen:
                if have.managed:
                    self._marker_checked = True
                    return
                await self._delete(ifname, index, addr, prefixlen)
                raise NetError("the kernel does not keep IFA_PROTO on addresses (needs >= 5.18)")

    async def remove(self, ifname: str, ip: str | IPAddress, prefixlen: int) -> bool:
        async with self._lock:
            return await self._remove(ifname, parse_ip(ip), prefixlen)

    async def _remove(self, ifname: str, addr: IPAddress, prefixlen: int) -> bool:
        index = await self._index(ifname)
        dump = await self._dump(ifname)
        target = [(a, f) for a, f in dump if a.ip == addr and a.prefixlen == prefixlen]
        if not target:
            return False
        have, flags = target[0]
        if not have.managed:
            raise ForeignAddressError(f"{addr}/{prefixlen} on {ifname} was not added by eipctl")
        if isinstance(addr, IPv4Address) and not flags & IFA_F_SECONDARY:
            await self._check_secondaries(ifname, addr, prefixlen, dump)
        await self._delete(ifname, index, addr, prefixlen)
        log.info("netlink.address_removed", link=ifname, ip=str(addr), prefixlen=prefixlen)
        return True

    async def _check_secondaries(
        self,
        ifname: str,
        addr: IPv4Address,
        prefixlen: int,
        dump: list[tuple[LinkAddress, int]],
    ) -> None:
        """Refuse to delete a primary IPv4 address that would take admin addresses with it.

        With promote_secondaries=0 (the kernel default) deleting a primary deletes every
        secondary of the same subnet too; with 1 the first secondary is promoted instead.
        """
        net = IPv4Network(f"{addr}/{prefixlen}", strict=False)
        at_risk = [
            a
            for a, f in dump
            if f & IFA_F_SECONDARY
            and not a.managed
            and a.prefixlen == prefixlen
            and isinstance(a.ip, IPv4Address)
            and a.ip in net
        ]
        if at_risk and not await self._promotes_secondaries(ifname):
            raise ForeignAddressError(
                f"removing {addr}/{prefixlen} from {ifname} would also remove "
                f"{', '.join(str(a.ip) for a in at_risk)} (promote_secondaries=0)"
            )

    async def _promotes_secondaries(self, ifname: str) -> bool:
        async def dump(ipr: Any) -> list[Any]:
            return [m async for m in await ipr.link("dump", ifname=ifname)]

        for msg in await self._call(f"link {ifname}", dump):
            inet = (msg.get("af_spec") or {}).get("AF_INET") or {}
            return bool(inet.get("promote_secondaries"))
        return False

    async def _delete(self, ifname: str, index: int, addr: IPAddress, prefixlen: int) -> None:
        async def delete(ipr: Any) -> None:
            await ipr.addr("del", index=index, address=str(addr), prefixlen=prefixlen)

        try:
            await self._call(f"remove {addr}/{prefixlen} on {ifname}", delete)
        except NetlinkError as exc:
            if exc.errno != errno.EADDRNOTAVAIL:  # expired or removed meanwhile: fine
                raise

    async def link_mac(self, ifname: str) -> bytes:
        index = await self._index(ifname)

        async def get(ipr: Any) -> list[Any]:
            return list(await ipr.link("get", index=index))

        msgs = await self._call(f"link {ifname}", get)
        mac = msgs[0].get("address") if msgs else None
        if not mac:
            raise NetlinkError(f"link {ifname} has no hardware address")
        return bytes.fromhex(str(mac).replace(":", ""))

    async def link_exists(self, ifname: str) -> bool:
        try:
            await self._index(ifname)
        except LinkNotFoundError:
            return False
        return True

    async def ensure_dummy(self, ifname: str) -> bool:
        """Kind ``dummy``; a kernel built without it (no module) gets ``ifb``, which is as
        inert for this: NOARP, no carrier of its own to lose, no traffic through it."""
        created = False
        if not await self.link_exists(ifname):
            for kind in ("dummy", "ifb"):

                async def create(ipr: Any, kind: str = kind) -> None:
                    await ipr.link("add", ifname=ifname, kind=kind)

                try:
                    await self._call(f"create {ifname} ({kind})", create)
                    created = True
                    log.info("netlink.link_created", link=ifname, kind=kind)
                    break
                except NetlinkError as exc:
                    if exc.errno == errno.EEXIST:  # made meanwhile by another pass or process
                        break
                    if exc.errno != errno.EOPNOTSUPP or kind == "ifb":
                        raise
        index = await self._index(ifname)

        async def up(ipr: Any) -> None:
            await ipr.link("set", index=index, state="up")

        await self._call(f"up {ifname}", up)
        return created

    async def host_links(self) -> HostLinks:
        """`inventory.LinkInventory`: every link, its addresses, the default routes' links."""

        async def dump(ipr: Any) -> tuple[list[Any], list[Any], list[Any]]:
            links = [m async for m in await ipr.link("dump")]
            addresses = [m async for m in await ipr.addr("dump")]
            routes = [m async for m in await ipr.route("dump", family=AF_INET)]
            routes += [m async for m in await ipr.route("dump", family=AF_INET6)]
            return links, addresses, routes

        return host_links_of(*await self._call("dump links", dump))

    async def close(self) -> None:
        if self._ipr is not None:
            ipr, self._ipr = self._ipr, None
            ipr.close()
