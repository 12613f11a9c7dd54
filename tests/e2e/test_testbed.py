"""The bed itself, without eipctl: what it builds answers like a network, and nothing it
makes outlives it — not after a failure, not after Ctrl-C, not after a SIGKILL."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from eipctl.sandbox.namespaces import (
    call_in_netns,
    list_namespaces,
    nft_unavailable,
    why_unavailable,
)
from eipctl.sandbox.testbed import BedOptions, LocalBed, wait_for

pytestmark = [pytest.mark.netns]
if (_reason := why_unavailable()) is not None:
    pytestmark.append(pytest.mark.skip(reason=_reason))

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def plain_bed() -> Iterator[LocalBed]:
    """Two nodes and a client, the API emulator, no eipctl processes."""
    with LocalBed(BedOptions(nodes=2, eipctl=False, keep_logs=False)) as bed:
        yield bed


def test_an_address_put_on_a_node_answers_the_client_with_that_nodes_name(
    plain_bed: LocalBed,
) -> None:
    node = plain_bed.node("node-1")
    node.add_address("203.0.113.201")
    node.add_address("2001:db8:f::201")
    try:
        assert plain_bed.client.ask("203.0.113.201") == "node-1"
        assert plain_bed.wait_answering("2001:db8:f::201", timeout=5) == "node-1"
        assert plain_bed.client.arp_who_has("203.0.113.201") == {node.mac}
        assert plain_bed.network.client_neighbour("203.0.113.201")[0] == node.mac
        assert plain_bed.client.ask("203.0.113.202", timeout=0.3) is None
    finally:
        node.del_address("203.0.113.201")
        node.del_address("2001:db8:f::201")


def test_a_node_whose_link_is_down_does_not_answer(plain_bed: LocalBed) -> None:
    node = plain_bed.node("node-0")
    node.add_address("203.0.113.203")
    try:
        assert plain_bed.client.ask("203.0.113.203") == "node-0"
        node.link_down()
        assert plain_bed.client.ask("203.0.113.203", timeout=0.5) is None
        assert plain_bed.client.arp_who_has("203.0.113.203") == set()
    finally:
        node.link_up()
        node.del_address("203.0.113.203")


def test_probe_series_measure_an_outage_with_20ms_resolution(plain_bed: LocalBed) -> None:
    node = plain_bed.node("node-0")
    ip = "203.0.113.204"
    node.add_address(ip)
    series = plain_bed.client.start_probes([ip], interval=0.02)
    try:
        time.sleep(0.3)
        removing = time.monotonic()
        node.del_address(ip)
        removed = time.monotonic()
        time.sleep(0.3)
        adding = time.monotonic()
        node.add_address(ip)
        added = time.monotonic()
        time.sleep(0.3)
    finally:
        plain_bed.client.stop_probes(series)
        node.del_address(ip)
    outage = series.longest_outage(ip)
    # from the removal to the re-adding, give or take one probe interval
    assert adding - removed - 0.02 <= outage <= added - removing + 0.04, outage
    assert series.answerers(ip) == ["node-0"]
    assert len(series.of(ip)) >= 30


def test_two_macs_answering_for_one_ip_are_seen_and_timed(plain_bed: LocalBed) -> None:
    ip = "203.0.113.205"
    a, b = plain_bed.node("node-0"), plain_bed.node("node-1")
    a.add_address(ip)
    watch = plain_bed.client.start_arp_watch([ip], period=0.05)
    try:
        time.sleep(0.3)
        b.add_address(ip)
        time.sleep(0.4)
        b.del_address(ip)
        time.sleep(0.3)
    finally:
        plain_bed.client.stop_arp_watch(watch)
        a.del_address(ip)
    assert watch.all_macs(ip) == {a.mac, b.mac}
    assert 0.3 <= watch.longest_double_answer(ip) <= 0.6, watch.longest_double_answer(ip)
    # the watcher's probes never touch the client's own neighbour table
    assert plain_bed.network.client_neighbour(ip) is None


def _udp_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, port))
    sock.settimeout(0.3)
    return sock


def _udp_round_trip(sender: socket.socket, receiver: socket.socket, target: str) -> bool:
    """A datagram from `sender` to `receiver` (at `target`:9473) and an answer back."""
    try:
        sender.sendto(b"probe", (target, 9473))
        data, peer = receiver.recvfrom(64)
        receiver.sendto(b"reply", peer)
        return data == b"probe" and sender.recvfrom(64)[0] == b"reply"
    except TimeoutError:
        return False


def test_the_control_namespace_reaches_a_node_over_udp_until_its_liveness_is_cut(
    plain_bed: LocalBed,
) -> None:
    if (reason := nft_unavailable()) is not None:
        pytest.skip(f"cut_liveness {reason} (apt-get install nftables)")
    node = plain_bed.node("node-0")
    other = plain_bed.node("node-1")
    assert plain_bed.network.control is not None
    control = plain_bed.network.control.name
    prober = call_in_netns(control, _udp_socket, "0.0.0.0", 0)
    responder = call_in_netns(node.ns.name, _udp_socket, node.ip4, 9473)
    neighbour = call_in_netns(other.ns.name, _udp_socket, other.ip4, 9473)
    try:
        assert _udp_round_trip(prober, responder, node.ip4)
        plain_bed.cut_liveness("node-0")
        assert node.liveness_cut()
        assert not _udp_round_trip(prober, responder, node.ip4)
        assert _udp_round_trip(prober, neighbour, other.ip4), "only that node is cut"
        assert plain_bed.client.ask("198.51.100.10") == "node-0", "its TCP still answers"
        plain_bed.heal()  # the reset between scenarios removes the cut too
        assert not node.liveness_cut()
        assert plain_bed.liveness_cut == set()
        assert _udp_round_trip(prober, responder, node.ip4)
    finally:
        for sock in (prober, responder, neighbour):
            sock.close()
        plain_bed.heal()


def _get_version(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/version", timeout=1) as resp:
        return str(resp.status)


def test_a_node_cut_off_from_the_api_gets_no_answer_until_reconnected(
    plain_bed: LocalBed,
) -> None:
    ns = plain_bed.node("node-0").ns.name
    other = plain_bed.node("node-1").ns.name
    assert call_in_netns(ns, _get_version, 6443) == "200"
    plain_bed.cut_from_api("node-0")
    try:
        with pytest.raises(OSError):  # a black hole: the request times out
            call_in_netns(ns, _get_version, 6443)
        assert call_in_netns(other, _get_version, 6443) == "200"
    finally:
        plain_bed.reconnect_to_api("node-0")
    assert call_in_netns(ns, _get_version, 6443) == "200"


def test_the_emulator_restarts_with_its_data(plain_bed: LocalBed) -> None:
    plain_bed.kube.create_service("survivor", annotation=None)
    try:
        plain_bed.restart_api()
        assert plain_bed.kube.service("survivor") is not None
    finally:
        plain_bed.kube.delete_service("survivor")


def test_a_call_made_as_soon_as_restart_api_returns_meets_the_restarted_api(
    plain_bed: LocalBed,
) -> None:
    """restart_api() returns once the restarted server answers, not while the old one still
    finishes its answers: the soak's `drop_watches` right after a restart (seed 777,
    iteration 165) was refused when it returned early."""
    for restart in range(1, 101):
        plain_bed.restart_api()
        req = urllib.request.Request(  # one attempt, no retry
            f"{plain_bed.api_url}/_emulator/faults",
            data=b'{"drop_watches": true}',
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                assert resp.status == 200
        except OSError as exc:
            pytest.fail(f"restart {restart}: the call right after restart_api() failed: {exc!r}")


CHILD = textwrap.dedent(
    """
    import time
    from eipctl.sandbox.testbed import BedOptions, LocalBed, install_signal_handlers
    install_signal_handlers()
    with LocalBed(BedOptions(nodes=1, eipctl=False, keep_logs=False)) as bed:
        print(bed.network.run_id, bed.api.pid, flush=True)
        time.sleep(60)
    """
)


def _start_child_bed() -> tuple[subprocess.Popen[str], str, int]:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    run_id, api_pid = child.stdout.readline().split()
    return child, run_id, int(api_pid)


def _ours(run_id: str) -> list[str]:
    return [n for n in list_namespaces() if n.startswith(run_id)]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") >= 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_removes_everything(sig: signal.Signals) -> None:
    child, run_id, api_pid = _start_child_bed()
    assert _ours(run_id)
    child.send_signal(sig)
    child.wait(30)
    assert _ours(run_id) == []
    assert _gone(api_pid)


def test_what_a_killed_run_left_is_removed_by_the_next_one() -> None:
    child, run_id, api_pid = _start_child_bed()
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    wait_for(lambda: _gone(api_pid), 5, what="the orphaned emulator to die with its parent")
    assert _ours(run_id), "namespaces of a killed run stay until the next run"
    with LocalBed(BedOptions(nodes=1, eipctl=False, keep_logs=False)) as bed:
        assert _ours(run_id) == []
    for crashed in bed.run_dir.parent.glob(f"eipctl-e2e-{child.pid}-*"):  # its logs, kept
        shutil.rmtree(crashed)
