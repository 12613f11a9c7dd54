"""The faults the scenarios inject into a `LocalBed`, and undoing them between scenarios.

A node dies or comes back, is cut from the API or from the schedulers' liveness probes, or
its controller freezes; the API server restarts or drops its watches. `heal()` undoes every
fault in force, `reset()` also removes what the last scenario created.
"""

from __future__ import annotations

from eipctl.sandbox.namespaces import nft_unavailable
from eipctl.sandbox.testbed.network import CONTROL4, CONTROL6
from eipctl.sandbox.testbed.pools import POOLS
from eipctl.sandbox.testbed.processes import wait_for
from eipctl.sandbox.testbed.state import BedState

LIVENESS_PORT = 9473  # the controllers' default --liveness-port


class BedFaults(BedState):
    """Faults and their undoing; `BedState.dead`, `cut`, ... say which are in force."""

    def kill_node(self, name: str) -> None:
        """The node dies: its controller is SIGKILLed and its link goes down at once (then its
        FRR is killed: with the link down no TCP reset leaves, the router sees BFD's silence)."""
        if name in self.controllers:
            self.controllers[name].kill()
        self.network.node(name).link_down()
        if name in self.frr:
            self.frr[name].kill()
        self.dead.add(name)

    def revive_node(self, name: str) -> None:
        node = self.network.node(name)
        node.link_up()
        if self.router is not None:
            self.router.route_back(node)  # the link going down took it
        if name in self.frr and not self.frr[name].alive:
            self.frr[name].kill()  # what is left of it
            self.frr[name].start()
        if name in self.controllers and not self.controllers[name].alive:
            self.start_controller(name)
        self.dead.discard(name)

    def cut_from_api(self, name: str) -> None:
        assert self.loop is not None
        self.loop.run(self.relays[name].cut())
        self.cut.add(name)

    def reconnect_to_api(self, name: str) -> None:
        assert self.loop is not None
        self.loop.run(self.relays[name].heal())
        self.cut.discard(name)

    def cut_liveness(self, name: str, only: str | None = None) -> None:
        """The node's liveness UDP (port 9473, both ways) is dropped inside its namespace;
        its API and its link for the client stay. ``only="schedulers"``: just what it
        exchanges with the schedulers' namespace (its peers still reach it);
        ``only="peers"``: just what it exchanges with the other nodes. Needs `nft`."""
        if (reason := nft_unavailable()) is not None:
            raise RuntimeError(f"cut_liveness {reason}")
        hosts: list[str] | None = None
        if only == "schedulers":
            hosts = [CONTROL4, CONTROL6]
        elif only == "peers":
            hosts = [a for n in self.network.nodes if n.name != name for a in (n.ip4, n.ip6)]
        elif only is not None:
            raise ValueError(f"cut_liveness: only is schedulers or peers, not {only!r}")
        self.liveness_cut.add(name)  # first: heal() removes even a half-made table
        self.network.node(name).cut_liveness(LIVENESS_PORT, hosts)

    def heal_liveness(self, name: str) -> None:
        self.network.node(name).heal_liveness()
        self.liveness_cut.discard(name)

    def freeze_controller(self, name: str) -> None:
        self.controllers[name].freeze()
        self.frozen.add(name)

    def thaw_controller(self, name: str) -> None:
        self.controllers[name].thaw()
        self.frozen.discard(name)

    def stop_api(self, how: str = "freeze") -> None:
        """The API server becomes unavailable to every eipctl process on the node network
        (schedulers and controllers): ``freeze`` SIGSTOPs it (requests hang, as on an
        overloaded or partitioned server), ``refuse`` makes every relay refuse connections
        (as when the process is gone: requests fail at once). The allocators, which reach it
        directly, and the bed itself are not cut under ``refuse``."""
        assert self.loop is not None and self.emulator is not None
        if how == "freeze":
            self.emulator.process.freeze()
        elif how == "refuse":
            for relay in self.relays.values():
                self.loop.run(relay.refuse())
        else:
            raise ValueError(f"stop_api: how is freeze or refuse, not {how!r}")
        self.api_down = how

    def start_api(self) -> None:
        assert self.loop is not None and self.emulator is not None
        if self.api_down == "freeze":
            self.emulator.process.thaw()
        elif self.api_down == "refuse":
            for name, relay in self.relays.items():
                if name not in self.cut:
                    self.loop.run(relay.heal())
        self.api_down = None

    def freeze_schedulers(self, which: list[int] | None = None) -> None:
        """SIGSTOP scheduler replicas (all by default): they neither probe nor write."""
        for i in range(len(self.schedulers)) if which is None else which:
            self.schedulers[i].freeze()
            self.frozen_schedulers.add(i)

    def thaw_schedulers(self) -> None:
        for i in sorted(self.frozen_schedulers):
            self.schedulers[i].thaw()
        self.frozen_schedulers.clear()

    def stop_control_plane(self, how: str = "freeze") -> None:
        """The API server (`stop_api`) and every scheduler replica (frozen) away together."""
        self.stop_api(how)
        self.freeze_schedulers()

    def start_control_plane(self) -> None:
        self.thaw_schedulers()
        self.start_api()

    def reboot_control_plane_node(self) -> None:
        """A control-plane node goes down: the API server (connections refused) and the
        scheduler replica on it (`schedulers[0]`, SIGKILLed) together."""
        self.stop_api("refuse")
        self.schedulers[0].kill()

    def control_plane_node_back(self) -> None:
        self.start_api()
        self.schedulers[0].start()

    def restart_api(self) -> int:
        """The API server restarts: every connection (all watches) drops; the data stays.
        Returns once the restarted server answers (its restart generation, which it returns,
        moved), so the next call cannot land in the restart."""
        assert self.emulator is not None
        return self.emulator.restart()

    def drop_watches(self) -> int:
        assert self.emulator is not None
        return self.emulator.drop_watches()

    # ---- between scenarios ----

    def heal(self) -> None:
        """Undo every fault: thaw, reconnect, revive nodes, restart dead processes.

        Then fails if a node that stayed up lost one of its admin addresses meanwhile (they
        are put back first). A dead node's link went down, which dropped its IPv6 addresses:
        that is not eipctl's doing, and reviving the node puts them back.
        """
        lost = self.admin_addresses_lost([n for n in self.node_names if n not in self.dead])
        if self.api_down is not None:
            self.start_api()
        self.thaw_schedulers()
        for name in list(self.frozen):
            self.thaw_controller(name)
        for name in list(self.cut):
            self.reconnect_to_api(name)
        for name in list(self.liveness_cut):
            self.heal_liveness(name)
        for name in list(self.dead):
            self.revive_node(name)
        for frr in self.frr.values():
            if not frr.alive:
                frr.kill()
                frr.start()
        for name, proc in self.controllers.items():
            if not proc.alive:
                self.start_controller(name)
        for proc in [*self.schedulers, *self.allocators]:
            if not proc.alive:
                proc.start()
        if lost:
            raise RuntimeError(f"eipctl removed admin addresses (put back now): {lost}")

    def admin_addresses_lost(self, nodes: list[str]) -> list[str]:
        """The admin addresses (`NodeNet.admin_addresses`) missing from these nodes' links,
        each put back at once so that the next scenario starts whole."""
        lost = []
        for node in self.network.nodes:
            missing = node.missing_admin_addresses() if node.name in nodes else set()
            if missing:
                lost += [f"{address} on {node.name}" for address in sorted(missing)]
                node.configure()
        return lost

    def reset(self, timeout: float = 20.0) -> None:
        """Heal, delete the scenarios' Services, wait until their claims and addresses are gone.

        If eipctl does not clean up within `timeout`, the leftovers are removed by hand (so the
        next scenario starts clean) and this reset fails, naming them.
        """
        self.heal()
        for svc in self.kube.services():
            self.kube.delete_service(svc["metadata"]["name"])
        for name, spec in POOLS.items():
            self.kube.apply_pool(name, spec)
        left: list[str] = []
        try:
            wait_for(lambda: not self.kube.claims(), timeout, what="every IpClaim released")
        except TimeoutError:
            for claim in self.kube.claims():
                left.append(f"claim {claim['metadata']['name']} {claim.get('spec')}")
                self.kube.delete_claim(claim["metadata"]["name"])
        try:
            wait_for(
                lambda: not any(n.external_addresses() for n in self.network.nodes),
                timeout,
                what="every external address removed from the nodes",
            )
        except TimeoutError:
            for node in self.network.nodes:
                for ip in node.external_addresses():
                    left.append(f"{ip} on {node.name}")
                    node.del_address(ip)
        self.wait_in_service(self.node_names, timeout)
        # what a restarted controller does after this is seen by the next heal()
        lost = self.admin_addresses_lost(self.node_names)
        if left:
            raise RuntimeError(f"eipctl did not clean up (removed by hand now): {left}")
        if lost:
            raise RuntimeError(f"eipctl removed admin addresses (put back now): {lost}")
