"""The bed's handle on the API emulator: restarts that return once the restarted server
answers, and admin calls that retry only where a real client would (no root needed)."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eipctl.sandbox.testbed.emulator import REFUSED, RESET, AdminError, Emulator
from eipctl.sandbox.testbed.processes import Process


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[Emulator]:
    em = Emulator(tmp_path)
    em.start()
    try:
        yield em
    finally:
        em.process.kill()


def _standing_in(tmp_path: Path, url: str, argv: list[str] | None = None) -> Emulator:
    """An Emulator whose process is a stand-in (alive unless `argv` exits) at `url`."""
    em = Emulator(tmp_path)
    em.process = Process(
        "stand-in", argv or [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path
    )
    em.process.start()
    em.url = url
    return em


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_restart_returns_once_the_restarted_server_answers(emulator: Emulator) -> None:
    generations = []
    for _ in range(20):
        generations.append(emulator.restart())
        # deadline 0: one attempt; a refused call here means restart() returned early
        assert "latency" in emulator.call("POST", "faults", {"drop_watches": True}, deadline=0)
    assert generations == list(range(1, 21))


def test_a_restart_of_an_emulator_that_died_says_so_at_once(emulator: Emulator) -> None:
    emulator.process.kill()
    started = time.monotonic()
    with pytest.raises(AdminError, match=r"exited with status -9") as caught:
        emulator.restart()
    assert caught.value.kind == REFUSED
    assert time.monotonic() - started < 2


def test_a_refused_call_is_tried_again_until_its_deadline(tmp_path: Path) -> None:
    em = _standing_in(tmp_path, f"http://127.0.0.1:{_unused_port()}")
    try:
        started = time.monotonic()
        with pytest.raises(AdminError, match=r"POST /_emulator/faults .* connection refused"):
            em.post("faults", {"drop_watches": True}, deadline=0.5)
        assert 0.5 <= time.monotonic() - started < 3
        assert em.retried["POST faults refused"] >= 2
    finally:
        em.process.kill()


class _Hangup:
    """Accepts, reads the request, closes without answering: a reset mid-call."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            with conn:
                conn.recv(65536)

    def close(self) -> None:
        self.done.set()
        self.thread.join(5)
        self.sock.close()


def test_a_post_cut_off_before_its_answer_is_not_sent_again_but_a_get_is(
    tmp_path: Path,
) -> None:
    server = _Hangup()
    em = _standing_in(tmp_path, server.url)
    try:
        with pytest.raises(AdminError) as caught:
            em.post("faults", {"drop_watches": True}, deadline=5)
        assert caught.value.kind == RESET
        assert server.connections == 1  # it may have been served: a client would not resend
        with pytest.raises(AdminError) as caught:
            em.state(deadline=0.5)
        assert caught.value.kind == RESET
        assert server.connections >= 3  # a read is safe to repeat
    finally:
        em.process.kill()
        server.close()


def test_nothing_is_retried_once_the_emulator_has_exited(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; print('no port for me'); sys.exit(3)"]
    em = _standing_in(tmp_path, f"http://127.0.0.1:{_unused_port()}", argv)
    assert em.process.popen is not None
    em.process.popen.wait(10)
    with pytest.raises(AdminError, match=r"(?s)exited with status 3.*no port for me"):
        em.state(deadline=10)
    assert not em.retried
