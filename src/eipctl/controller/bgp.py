"""This node's FRR configuration, rendered from the BGPPeers and kept applied (docs/bgp.md).

eipctl never speaks BGP. The node's FRR (a container beside the controller) announces the
host routes the controller keeps on the BGP link; this module writes FRR's whole
configuration for this node (`core.frr_config.render`: the peers whose nodeSelector admits
the node, the BGP pools, passwords read from Secrets) to `--frr-config`, atomically and only
when it changed. The reloader in the FRR container (deploy/workloads/frr/reload.sh) applies
the file with frr-reload.py and writes ``<file>.status``: ``<sha256> applied`` or
``<sha256> failed`` and the tail of frr-reload's output. This module reads that back and
reports it as the IpNode condition ``BGPConfigured`` (one write per transition), with an
Event on a failure; a peer that cannot be rendered (another ASN, a missing password) gets a
Warning Event on the BGPPeer.

Inputs change rarely: a render runs when a BGPPeer or a pool changes, when the node's labels
change (read at every IpNode refresh), and every `recheck` seconds (a Secret's password).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import structlog

from eipctl.core.bgp_peer import BgpPeer
from eipctl.core.conditions import Condition, put_condition
from eipctl.core.fields import Mutation, ResourceError, name_of
from eipctl.core.frr_config import BgpPool, FrrConfig, NodeBgpFacts, peers_for_node, render
from eipctl.core.naming import API_VERSION
from eipctl.kube.client import BGPPEERS, IPNODES, SECRETS, KubeApi, Obj
from eipctl.kube.errors import ApiError
from eipctl.kube.events import EventType, reference
from eipctl.kube.informer import Informer
from eipctl.kube.verbs import WritesStatus

from .metrics import FRR_CONFIG_APPLIED, FRR_CONFIG_WRITES

log = structlog.get_logger(__name__)

CONDITION = "BGPConfigured"
PASSWORD_KEY = "password"


class EventSink(Protocol):
    def emit(self, involved: Obj, type_: EventType, reason: str, message: str) -> None: ...


class BgpPools(Protocol):
    def bgp_pools(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class Applied:
    """What the reloader last said of a file: its sha256, and whether FRR took it."""

    sha256: str
    ok: bool
    detail: str = ""


def read_status(path: Path) -> Applied | None:
    """``<config>.status`` as the reloader wrote it; None while there is none (or garbage)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    first, _, rest = text.partition("\n")
    words = first.split()
    if len(words) != 2 or words[1] not in ("applied", "failed"):
        return None
    return Applied(words[0], words[1] == "applied", rest.strip()[-800:])


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` in one rename: the reloader never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o640)  # it may carry BGP passwords
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def mark_configured(ok: bool, reason: str, message: str) -> Mutation:
    condition = Condition(
        type=CONDITION,
        status="True" if ok else "False",
        reason=reason,
        message=message[:1000],
        last_transition_time=datetime.now(UTC),
    )

    def mutate(obj: dict[str, Any]) -> None:
        put_condition(obj.setdefault("status", {}), condition)

    return mutate


class FrrConfigWriter:
    """Renders, writes and watches the application of this node's FRR configuration."""

    def __init__(
        self,
        *,
        api: KubeApi,
        writer: WritesStatus,
        events: EventSink,
        node: str,
        path: str,
        pools: BgpPools,
        bgp_link: str,
        secret_namespace: str,
        router_id: Callable[[], str],
        recheck: float = 60.0,
        status_poll: float = 1.0,
    ) -> None:
        self._api = api
        self._writer = writer
        self._events = events
        self._node = node
        self.path = Path(path)
        self._pools = pools
        self._bgp_link = bgp_link
        self._secret_namespace = secret_namespace
        self._router_id = router_id
        self._recheck = recheck
        self._status_poll = status_poll
        self._peers = Informer(api, BGPPEERS, backoff_max=1.0)
        self._peers.add_key_handler(lambda _key: self.changed())
        self._wake = asyncio.Event()
        self._labels: dict[str, str] | None = None
        self._written: str | None = None  # sha256 of what we last wrote
        self._reported: tuple[bool, str] | None = None  # (ok, reason) last written
        self._applied: str | None = None  # sha256 the reloader last said FRR took
        self._told: set[tuple[str, str, str]] = set()  # (peer, reason, message) Events sent
        self._invalid: dict[str, str] = {}  # peer -> resourceVersion already reported
        self._last_passwords: dict[str, str] = {}  # Secret -> its password, last read
        self.renders = 0

    # -- inputs --------------------------------------------------------------------------
    def changed(self) -> None:
        """Something the configuration depends on changed: render again soon."""
        self._wake.set()

    def set_labels(self, labels: Mapping[str, str]) -> None:
        """The node's labels (the IpNode's, copied from the Node), at every refresh."""
        new = dict(labels)
        if new != self._labels:
            self._labels = new
            self.changed()

    # -- the loop ------------------------------------------------------------------------
    async def run(self) -> None:
        self._peers.start()
        try:
            await self._peers.wait_synced()
            while True:
                if self._labels is not None:
                    try:
                        await self.render_once()
                    except Exception:
                        log.exception("bgp.render_failed", node=self._node)
                await self._watch_applied()
        finally:
            await self._peers.stop()

    async def _watch_applied(self) -> None:
        """Until the next input change or `recheck`: follow the reloader's status file, read
        every `status_poll` only until FRR took what was written (then nothing changes it)."""
        self._wake.clear()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._recheck
        while (left := deadline - loop.time()) > 0:
            if self._applied != self._written:
                self._check_applied()
            wait = left if self._applied == self._written else min(left, self._status_poll)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()
                    return

    async def render_once(self) -> FrrConfig:
        peers = self._parsed_peers()
        labels = self._labels or {}
        selected = peers_for_node(peers, labels)
        passwords = await self._passwords(selected)
        facts = NodeBgpFacts(
            node=self._node, labels=labels, router_id=self._router_id(), link=self._bgp_link
        )
        pools = [BgpPool(name, cidr) for name, cidr in self._pools.bgp_pools().items()]
        config = render(facts, selected, pools, passwords)
        self.renders += 1
        for problem in config.problems:
            self._tell_peer(problem.peer, problem.reason, problem.message)
        digest = sha256_of(config.text)
        if digest != self._written or not self._on_disk(digest):
            await asyncio.to_thread(write_atomically, self.path, config.text)
            self._written = digest
            FRR_CONFIG_WRITES.inc()
            log.info(
                "bgp.config_written",
                node=self._node,
                path=str(self.path),
                peers=list(config.peers),
                sha256=digest[:12],
            )
        return config

    def _on_disk(self, digest: str) -> bool:
        try:
            return sha256_of(self.path.read_text(encoding="utf-8")) == digest
        except OSError:
            return False

    def _parsed_peers(self) -> list[BgpPeer]:
        peers: list[BgpPeer] = []
        for obj in sorted(self._peers.objects(), key=name_of):
            try:
                peers.append(BgpPeer.from_dict(obj))
            except (ResourceError, ValueError) as exc:
                rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
                name = name_of(obj)
                if self._invalid.get(name) != rv:
                    self._invalid[name] = rv
                    log.warning("bgp.peer_invalid", peer=name, error=str(exc))
                    self._tell_peer(name, "InvalidSpec", f"{self._node} ignores it: {exc}")
        return peers

    async def _passwords(self, peers: list[BgpPeer]) -> dict[str, str]:
        """Each passwordSecret's password (key ``password``). A Secret the API says is gone
        or forbidden leaves its peer out of the map (render reports it: never rendered
        without it). A read that got no answer (a timeout, a 5xx, a 429: the API is away or
        busy) keeps the password last read: an API outage must not take a session down at
        the next recheck (docs/liveness.md, "Outages")."""
        out: dict[str, str] = {}
        wanted = {p.spec.password_secret for p in peers if p.spec.password_secret}
        for secret in sorted(wanted):
            try:
                obj = await self._api.get(SECRETS, secret, namespace=self._secret_namespace)
            except (ApiError, TimeoutError) as exc:
                transient = isinstance(exc, TimeoutError) or exc.retryable
                kept = self._last_passwords.get(secret) if transient else None
                log.warning(
                    "bgp.secret_unreadable",
                    secret=secret,
                    namespace=self._secret_namespace,
                    kept_last_read=kept is not None,
                    error=repr(exc),
                )
                if kept is not None:
                    out[secret] = kept
                continue
            value = _secret_value(obj, PASSWORD_KEY)
            if value is not None:
                out[secret] = value
        self._last_passwords = dict(out)
        return out

    # -- reporting -----------------------------------------------------------------------
    def _check_applied(self) -> None:
        if self._written is None:
            return
        status = read_status(Path(f"{self.path}.status"))
        if status is None or status.sha256 != self._written:
            return  # the reloader has not looked at this version yet
        if status.ok:
            self._applied = status.sha256
        reason = "Applied" if status.ok else "ReloadFailed"
        if self._reported == (status.ok, reason):
            return
        self._reported = (status.ok, reason)
        FRR_CONFIG_APPLIED.labels(str(self.path)).set(1 if status.ok else 0)
        message = (
            f"FRR runs the configuration eipctl rendered ({status.sha256[:12]})"
            if status.ok
            else f"frr-reload refused {status.sha256[:12]}: {status.detail}"
        )
        log.info("bgp.config_status", node=self._node, applied=status.ok, sha256=status.sha256[:12])
        if not status.ok:
            involved = reference(API_VERSION, "IpNode", {"metadata": {"name": self._node}})
            self._events.emit(involved, "Warning", "FrrReloadFailed", message[:1000])
        asyncio.get_running_loop().create_task(self._write_condition(status.ok, reason, message))

    async def _write_condition(self, ok: bool, reason: str, message: str) -> None:
        try:
            await self._writer.update_status(
                IPNODES, self._node, mark_configured(ok, reason, message)
            )
        except Exception as exc:
            self._reported = None  # try again at the next look
            log.warning("bgp.condition_failed", node=self._node, error=repr(exc))

    def _tell_peer(self, peer: str, reason: str, message: str) -> None:
        key = (peer, reason, message)
        if key in self._told:
            return
        self._told.add(key)
        log.warning("bgp.peer_problem", peer=peer, node=self._node, reason=reason, detail=message)
        involved = reference(API_VERSION, "BGPPeer", {"metadata": {"name": peer}})
        self._events.emit(involved, "Warning", reason, message)


def _secret_value(obj: Mapping[str, Any], key: str) -> str | None:
    data = obj.get("data") or {}
    raw = data.get(key) if isinstance(data, Mapping) else None
    if not isinstance(raw, str):
        return None
    try:
        return base64.b64decode(raw, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
