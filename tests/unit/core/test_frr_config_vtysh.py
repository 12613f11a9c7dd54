"""FRR's own verdict on what `core.frr_config.render` writes (FRR 8.4, no daemon running).

Two checks, both offline:

- ``vtysh --dryrun --inputfile FILE`` parses the whole file against every daemon's command
  grammar (keywords, argument kinds and ranges) and exits non-zero on a line it cannot
  parse. It does not run the commands, so it takes ``set community 70000:1``.
- ``bgpd --dryrun --config_file FILE`` runs bgpd's own handlers on the bgpd part of the file
  (without the ``bfd`` block, bfdd's, and the ``nht`` lines, zebra's), which refuse what
  the grammar lets through (communities, timers). It exits 0 either way, so its output is
  read: every refused line is logged with an ``[EC ...]`` code or a ``%`` message. It runs
  with ``--no_zebra --bgp_port 0 --skip_runas``: no socket, no listener, no privilege.

Each check is also shown to fail on a deliberately broken line, so a pass means something.
Skipped when FRR is not installed (apt-get install frr).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eipctl.core.bgp_peer import WELL_KNOWN_COMMUNITIES, BfdProfile, BgpPeer, BgpPeerSpec
from eipctl.core.frr_config import BgpPool, NodeBgpFacts, render
from eipctl.core.selectors import LabelSelector

VTYSH = Path("/usr/bin/vtysh")
BGPD = Path("/usr/lib/frr/bgpd")
CRASHLOG_DIR = Path("/var/tmp/frr")
"""Every FRR daemon makes /var/tmp/frr/<daemon>.<pid> at start; a dry run leaves it."""

pytestmark = pytest.mark.skipif(
    not VTYSH.exists(), reason="FRR is not installed (no /usr/bin/vtysh): apt-get install frr"
)
needs_bgpd = pytest.mark.skipif(
    not BGPD.exists(), reason="FRR's bgpd is not installed (no /usr/lib/frr/bgpd)"
)

PASSWORD = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~Az09"
SECRET_PASSWORD = "s3cret-from-a-Secret"


def peer(name: str, address: str, **spec: object) -> BgpPeer:
    fields: dict[str, object] = {"peer_address": address, "peer_asn": 65001, "my_asn": 65000}
    fields.update(spec)
    return BgpPeer.named(name, BgpPeerSpec(**fields))  # type: ignore[arg-type]


REPRESENTATIVE_PEERS = [
    peer(
        "tor-a",
        "192.0.2.1",
        password=PASSWORD,
        hold_time_seconds=9,
        keepalive_time_seconds=3,
        connect_time_seconds=5,
        bfd=BfdProfile(
            receive_interval_ms=10,
            transmit_interval_ms=60000,
            detect_multiplier=255,
            echo_mode=True,
            passive_mode=True,
            minimum_ttl=1,
        ),
        communities=("0:0", "65535:65535", *WELL_KNOWN_COMMUNITIES),
        large_communities=("0:0:0", "4294967295:4294967295:4294967295"),
        pools=("pool-a", "pool-host"),
    ),
    peer(
        "tor-b6",
        "2001:DB8::1",
        peer_asn=4294967295,
        peer_port=1179,
        source_address="2001:db8::10",
        ebgp_multi_hop=True,
        password_secret="tor-b6-md5",
        bfd=BfdProfile(),
        communities=("65000:100",),
    ),
    peer("rr", "198.51.100.1", peer_asn=65000, hold_time_seconds=0),
    peer("keepalive-only", "198.51.100.2", keepalive_time_seconds=30000),
    peer("no-pool", "198.51.100.3", pools=("pool-6",)),
    peer("x" * 253, "198.51.100.4", bfd=BfdProfile(detect_multiplier=2)),
    peer("other-asn", "198.51.100.5", my_asn=65100),
    peer("missing-secret", "198.51.100.6", password_secret="nowhere"),
    peer(
        "elsewhere",
        "198.51.100.7",
        node_selector=LabelSelector(match_labels={"rack": "r9"}),
    ),
]
POOLS = [
    BgpPool("pool-a", "203.0.113.9/24"),
    BgpPool("pool-host", "192.0.2.77/32"),
    BgpPool("pool-6", "2001:db8:1::/64"),
    BgpPool("pool-6-host", "2001:db8:2::9/128"),
]
NODE = NodeBgpFacts("node-1", {"rack": "r1"}, router_id="10.0.0.5", link="eipctl-bgp")


def representative() -> str:
    config = render(NODE, REPRESENTATIVE_PEERS, POOLS, {"tor-b6-md5": SECRET_PASSWORD})
    assert config.peers == ("keepalive-only", "no-pool", "rr", "tor-a", "tor-b6", "x" * 253)
    assert {p.reason for p in config.problems} == {"ASNConflict", "PasswordMissing", "NoPool"}
    return config.text


# --- the two checks ------------------------------------------------------------------------


def vtysh_dryrun(text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``vtysh --dryrun``, reading an empty vtysh.conf of its own (not /etc/frr's)."""
    config_dir = tmp_path / "vtysh"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "vtysh.conf").write_text("")
    path = tmp_path / "frr.conf"
    path.write_text(text)
    return subprocess.run(
        [str(VTYSH), "--config_dir", str(config_dir), "--dryrun", "--inputfile", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def bgpd_part(text: str) -> str:
    """The file without what is not bgpd's: the ``bfd`` block and zebra's ``nht`` lines."""
    out, in_bfd = [], False
    for line in text.splitlines():
        if line == "bfd":
            in_bfd = True
        elif in_bfd:
            in_bfd = line != "exit"
        elif not re.fullmatch(r"ipv?6? nht resolve-via-default", line):
            out.append(line)
    return "\n".join(out) + "\n"


def bgpd_refusals(text: str, tmp_path: Path) -> list[str]:
    """The lines of bgpd's dry-run output that report a refused command."""
    path = tmp_path / "bgpd.conf"
    path.write_text(bgpd_part(text))
    argv = [
        str(BGPD),
        "--dryrun",
        "--config_file",
        str(path),
        "--skip_runas",
        "--no_zebra",
        "--bgp_port",
        "0",
        "--log",
        "stdout",
        "--vty_socket",
        str(tmp_path),
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
    )
    try:
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        with contextlib.suppress(OSError):  # only the (empty) directory of this very process
            os.rmdir(CRASHLOG_DIR / f"bgpd.{proc.pid}")
    return [
        line
        for line in output.splitlines()
        if "[EC " in line or line.startswith("%") or "Unknown command" in line
    ]


# --- what FRR accepts ----------------------------------------------------------------------


def test_vtysh_accepts_the_representative_config(tmp_path: Path) -> None:
    text = representative()
    result = vtysh_dryrun(text, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr + text


@needs_bgpd
def test_bgpd_accepts_the_representative_config(tmp_path: Path) -> None:
    text = representative()
    assert bgpd_refusals(text, tmp_path) == [], text


def test_vtysh_accepts_a_node_without_peers(tmp_path: Path) -> None:
    text = render(NODE, [], POOLS, {}).text
    assert "router bgp" not in text
    result = vtysh_dryrun(text, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


# --- and what it refuses: the checks can fail ----------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (" remote-as 65001", " remote-az 65001"),  # a misspelt keyword
        (" timers connect 5", " timers connect 0"),  # out of range (1-65535)
        ("router bgp 65000", "router bgp 4294967296"),  # out of range
        ("  detect-multiplier 255", "  detect-multiplier 1"),  # bfdd's grammar (2-255)
    ],
)
def test_vtysh_rejects_a_broken_line(tmp_path: Path, old: str, new: str) -> None:
    text = representative()
    assert old in text
    result = vtysh_dryrun(text.replace(old, new, 1), tmp_path)
    assert result.returncode != 0
    assert new.strip() in result.stdout + result.stderr


@needs_bgpd
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("set community 0:0 ", "set community 70000:0 "),  # AA > 65535
        ("set community 0:0 ", "set community local-as "),  # FRR spells it local-AS
        ("set large-community 0:0:0 ", "set large-community 0:0 "),
        (" timers 3 9", " timers 3 2"),  # hold time 1..2
    ],
)
def test_bgpd_rejects_what_the_grammar_lets_through(tmp_path: Path, old: str, new: str) -> None:
    broken = representative().replace(old, new, 1)
    assert broken != representative()
    assert vtysh_dryrun(broken, tmp_path).returncode == 0  # the grammar alone takes it
    assert bgpd_refusals(broken, tmp_path) != []


# --- generated peers -----------------------------------------------------------------------

addresses = st.sampled_from(["192.0.2.1", "192.0.2.2", "2001:db8::1", "2001:db8::2"])


@st.composite
def generated(draw: st.DrawFn) -> str:
    peers = []
    names = draw(st.lists(st.from_regex(r"[a-z][a-z0-9.-]{0,70}", fullmatch=True), max_size=4))
    for name in dict.fromkeys(names):
        hold = draw(st.none() | st.sampled_from([0, 3, 65535]))
        peers.append(
            peer(
                name,
                draw(addresses),
                peer_asn=draw(st.sampled_from([1, 65000, 65001, 4294967295])),
                peer_port=draw(st.integers(1, 65535)),
                password=draw(st.sampled_from(["", PASSWORD, "x" * 80])),
                hold_time_seconds=hold,
                keepalive_time_seconds=draw(st.none() | st.integers(1, 2)) if hold else None,
                bfd=draw(
                    st.none()
                    | st.builds(
                        BfdProfile,
                        receive_interval_ms=st.integers(10, 60000),
                        detect_multiplier=st.integers(2, 255),
                        minimum_ttl=st.none() | st.integers(1, 254),
                    )
                ),
                communities=tuple(draw(st.lists(st.sampled_from(WELL_KNOWN_COMMUNITIES)))),
                pools=tuple(draw(st.lists(st.sampled_from(["pool-a", "pool-6", "gone"])))),
            )
        )
    return render(NODE, peers, POOLS, {}).text


@needs_bgpd
@settings(
    deadline=None, max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(generated())
def test_frr_accepts_generated_configs(tmp_path: Path, text: str) -> None:
    result = vtysh_dryrun(text, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr + text
    assert bgpd_refusals(text, tmp_path) == [], text
