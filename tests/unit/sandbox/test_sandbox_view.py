"""The live table: rows from API objects, rendering, TTY redraw and line-per-change output."""

from __future__ import annotations

import copy
import io
from typing import Any

from eipctl.sandbox.view import (
    NO_IP,
    LiveView,
    NodeLine,
    Row,
    Snapshot,
    describe_changes,
    render,
    rows_from,
)


def service(name: str, ips: list[str] | None = None, annotated: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if annotated:
        meta["annotations"] = {"external-ip": "auto"}
    spec: dict[str, Any] = {"ports": [{"port": 80}]}
    if ips:
        spec["externalIPs"] = ips
    return {"metadata": meta, "spec": spec}


def claim(ip: str, node: str = "", phase: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": ip.replace(".", "-")},
        "spec": {"ip": ip, "nodeName": node},
    }
    if phase:
        obj["status"] = {"phase": phase}
    return obj


NODES = (NodeLine("node-1", "up", 1), NodeLine("node-2", "killed", 0))


def test_rows_join_services_claims_and_links() -> None:
    services = [
        service("web", ["203.0.113.1"]),
        service("api"),
        service("plain", annotated=False),
        service("manual", ["203.0.113.9"], annotated=False),
    ]
    claims = [claim("203.0.113.1", "node-1", "Bound")]
    inputs = copy.deepcopy((services, claims))
    rows = rows_from(services, claims, {"203.0.113.1": "node-1"}.get)
    assert rows == (
        Row("default/api", NO_IP, "", "no IP yet", ""),
        Row("default/manual", "203.0.113.9", "", "no claim", ""),
        Row("default/web", "203.0.113.1", "node-1", "Bound", "node-1"),
    )
    assert (services, claims) == inputs  # inputs untouched


def test_claim_without_status_is_pending() -> None:
    rows = rows_from([service("web", ["203.0.113.1"])], [claim("203.0.113.1")], lambda _ip: None)
    assert rows[0].phase == "Pending"
    assert rows[0].cells() == ("default/web", "203.0.113.1", "-", "Pending", "-")


def test_render_aligns_columns_and_summarises() -> None:
    snap = Snapshot(
        12.0,
        (
            Row("default/web", "203.0.113.1", "node-1", "Bound", "node-1"),
            Row("default/api", NO_IP, "", "no IP yet", ""),
        ),
        NODES,
    )
    lines = render(snap)
    assert lines[0].split() == ["SERVICE", "IP", "NODE", "PHASE", "ON", "LINK"]
    assert lines[1].index("203.0.113.1") == lines[0].index("IP")
    assert lines[-2] == "nodes: node-1 up (1 IP), node-2 KILLED"
    assert lines[-1] == "1/2 services have an IP, 1 claims Bound, 12s"


def test_a_thousand_nodes_fit_on_one_line() -> None:
    nodes = tuple(NodeLine(f"node-{n}", "up", 1 if n in (7, 900) else 0) for n in range(1, 1001))
    nodes = (*nodes[:4], NodeLine("node-5", "killed", 0), *nodes[5:])
    lines = render(Snapshot(1.0, (), nodes))
    assert lines[-2] == "nodes: 999/1000 up; node-5 KILLED, node-7 up (1 IP), node-900 up (1 IP)"
    assert describe_changes(None, Snapshot(1.0, (), nodes)) == ["[   1.0s] nodes: 1 killed, 999 up"]
    busy = tuple(NodeLine(f"node-{n}", "up", 1) for n in range(1, 21))
    assert render(Snapshot(1.0, (), busy))[-2].endswith("node-12 up (1 IP), ... 8 more")


def test_render_truncates_to_room() -> None:
    rows = tuple(Row(f"default/s{i}", NO_IP, "", "no IP yet", "") for i in range(10))
    lines = render(Snapshot(0, rows, NODES), max_rows=3)
    assert len(lines) == 1 + 3 + 1 + 2
    assert lines[4].startswith("... 7 more")


def test_changes_tell_the_story_of_a_failover() -> None:
    start = Snapshot(0.5, (Row("default/web", NO_IP, "", "no IP yet", ""),), NODES[:1])
    bound = Snapshot(
        2.0, (Row("default/web", "203.0.113.1", "node-1", "Bound", "node-1"),), NODES[:1]
    )
    moved = Snapshot(
        9.0,
        (Row("default/web", "203.0.113.1", "node-2", "Bound", "node-2"),),
        (NodeLine("node-1", "killed", 0),),
    )
    assert describe_changes(None, start) == [
        "[   0.5s] default/web - node=- phase=no IP yet on-link=-",
        "[   0.5s] node node-1 up",
    ]
    # the "no IP yet" row is replaced, not reported gone
    assert describe_changes(start, bound) == [
        "[   2.0s] default/web 203.0.113.1 node=node-1 phase=Bound on-link=node-1"
    ]
    assert describe_changes(bound, bound) == []
    assert describe_changes(bound, moved) == [
        "[   9.0s] default/web 203.0.113.1 node=node-2 phase=Bound on-link=node-2",
        "[   9.0s] node node-1 killed",
    ]
    assert describe_changes(moved, Snapshot(10.0, (), moved.nodes)) == [
        "[  10.0s] default/web 203.0.113.1 gone"
    ]


def test_plain_output_writes_only_changes() -> None:
    out = io.StringIO()
    view = LiveView(out, tty=False)
    snap = Snapshot(1.0, (Row("default/web", "203.0.113.1", "node-1", "Bound", "node-1"),), ())
    view.update(snap)
    view.update(Snapshot(1.5, snap.rows, ()))
    assert out.getvalue().splitlines() == [
        "[   1.0s] default/web 203.0.113.1 node=node-1 phase=Bound on-link=node-1"
    ]
    assert "\x1b" not in out.getvalue()


def test_tty_output_redraws_in_place() -> None:
    out = io.StringIO()
    view = LiveView(out, tty=True, header=["title"])
    snap = Snapshot(1.0, (Row("default/web", "203.0.113.1", "node-1", "Bound", "node-1"),), ())
    view.update(snap)
    first = out.getvalue()
    assert first.startswith("\x1b[J")
    drawn = first.count("\n")
    assert drawn == 1 + 2 + 2  # header, table (head + 1 row), nodes, totals
    view.update(snap)
    table = drawn - 1  # the header is written once and stays: only the table is redrawn
    assert out.getvalue()[len(first) :].startswith(f"\x1b[{table}F\x1b[J")
    view.message("node-1 killed")
    tail = out.getvalue().rsplit("node-1 killed\n", 1)[1]
    assert tail.startswith("\x1b[J") and "default/web" in tail  # the table comes back below


def test_notes_show_under_the_table_and_once_in_plain_output() -> None:
    note = "scheduler exited 2 time(s), see sandbox-state/scheduler.log"
    snap = Snapshot(3.0, (), NODES, (note,))
    assert note in render(snap)
    assert describe_changes(None, snap)[0] == f"[   3.0s] {note}"
    assert describe_changes(snap, Snapshot(3.5, (), NODES, (note,))) == []


def test_rows_sort_naturally() -> None:
    """#33: the table read demo-1, demo-10, demo-11, demo-2."""
    services = [service(f"demo-{n}") for n in (10, 2, 11, 1)]
    rows = rows_from(services, [], {}.get)
    assert [r.service for r in rows] == [f"default/demo-{n}" for n in (1, 2, 10, 11)]


def test_on_a_tty_event_lines_go_under_the_banner_not_above_it() -> None:
    """#33: a message erased the whole drawn block, banner included, and wrote itself above
    it. The banner is written once and stays first; messages pile up under it, the table
    is redrawn under them."""
    out = io.StringIO()
    view = LiveView(out, tty=True, header=["BANNER", ""])
    view.message("before any table")
    snap = Snapshot(1.0, (Row("default/web", "203.0.113.1", "node-1", "Bound", "node-1"),), ())
    view.update(snap)
    view.message("node-1 killed")
    view.update(snap)
    screen = replay(out.getvalue())
    assert screen[0] == "BANNER"
    assert screen.count("BANNER") == 1
    assert screen.index("before any table") < screen.index("node-1 killed")
    assert screen.index("node-1 killed") < next(
        i for i, line in enumerate(screen) if "default/web" in line
    )


def replay(written: str) -> list[str]:
    """The lines left on a terminal after `written` (only the cursor-up-and-erase the view
    uses: ESC[nF moves n lines up, ESC[J erases from there down)."""
    import re

    screen: list[str] = []
    for part in re.split(r"(\x1b\[\d*F|\x1b\[J)", written):
        if not part:
            continue
        if part.endswith("F"):
            up = int(part[2:-1] or "1")
            cursor = len(screen) - up
            del screen[cursor:]
        elif part == "\x1b[J":
            continue
        else:
            screen += part.splitlines()
    return screen
