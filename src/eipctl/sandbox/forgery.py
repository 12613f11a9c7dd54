"""What the forgery stories' attacker runs inside a node's namespace: it sniffs the liveness
datagrams reaching the node and sends UDP with a forged IPv4 source (raw IP, so the
victim sees the address and port of whoever it claims to be). Test infrastructure, run as
``python -c`` in the namespace (tests/e2e/test_scenarios_forgery.py,
test_scenarios_peer_forgery.py). It lives beside the test bed, not in it: importing
`eipctl.sandbox.testbed` takes the whole bed (0.9 s), and a forger that starts late lets a
killed node be declared dead before it speaks for it. Imports the stdlib only."""

from __future__ import annotations

import socket
import struct

LIVENESS_PORT = 9473


class Forger:
    def __init__(self, iface: str = "eth0") -> None:
        self._sniff = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
        self._sniff.bind((iface, 0))
        self._sniff.settimeout(0.2)
        self._raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)

    def next_liveness(self) -> tuple[bytes, bytes, int, bytes] | None:
        """The next IPv4 UDP datagram to the liveness port seen on the link, as (source
        address, destination address, source port, payload); None after 0.2 s of none."""
        try:
            data = self._sniff.recv(4096)
        except TimeoutError:
            return None
        ihl = (data[0] & 15) * 4
        if data[9] != 17 or len(data) < ihl + 8:
            return None
        sport, dport = struct.unpack("!HH", data[ihl : ihl + 4])
        if dport != LIVENESS_PORT:
            return None
        return data[12:16], data[16:20], sport, data[ihl + 8 :]

    def send(self, source: bytes, destination: bytes, dport: int, body: bytes) -> None:
        """``body`` as UDP from ``source``:9473 to ``destination``:``dport`` (IPv4, packed)."""
        udp = struct.pack("!HHHH", LIVENESS_PORT, dport, 8 + len(body), 0) + body
        head = struct.pack(
            "!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, source, destination
        )
        self._raw.sendto(head + udp, (socket.inet_ntoa(destination), 0))
