"""`kubectl get ipnodes` as an operator reads it: LIVE, LAST HEARTBEAT and, with `-o wide`,
REPORTED ADDRESSES (deploy/crds/ipnodes.yaml's printer columns; docs/operations.md).

The real kubectl (v1.37, from the venv) against the API emulator, which must build the table
as the real API server does (apiextensions' table convertor): LIVE is the JSONPath filter
`.status.conditions[?(@.type=="Live")].status`, and no match is a null cell, which kubectl
prints empty; a list in a string column is printed as compact JSON; a date is an age, and a
time more than a second ahead of the server's clock is `<invalid>`. The statuses are written
the way the processes write them: the controller's heartbeat as a status merge patch, the
scheduler leader's Live condition with `mark_live` as a status update.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubectl_runner import run_kubectl

from eipctl.core.fields import format_time
from eipctl.core.ipnode import REASON_NO_REPLY, REASON_REPLYING, mark_live
from eipctl.kube.client import IPNODES, KubeApi
from kubemu import ApiServer
from kubemu.tables import go_json, human_age

pytestmark = pytest.mark.kubectl

COLUMNS = ["NAME", "LINK", "LIVE", "LAST HEARTBEAT", "AGE"]
WIDE = ["NAME", "LINK", "LIVE", "ELIGIBILITY", "LAST HEARTBEAT", "REPORTED ADDRESSES", "AGE"]
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def kubectl(kubeconfig: Path, home: Path, *args: str) -> str:
    """Run the real kubectl; its stdout (the test fails on a non-zero exit)."""
    code, out, err = await run_kubectl(kubeconfig, home, *args)
    assert code == 0, f"kubectl {' '.join(args)}: {err}"
    return out


def rows(text: str, header: list[str]) -> dict[str, dict[str, str]]:
    """kubectl's table by name and column. Cells may be empty and headers hold spaces, so
    each cell is cut at its header's offset (kubectl pads columns left-aligned)."""
    first, *lines = text.rstrip("\n").split("\n")
    starts, pos = [], 0
    for name in header:
        pos = first.index(name, pos)
        starts.append(pos)
        pos += len(name)
    assert first.split() == " ".join(header).split(), first
    out = {}
    for line in lines:
        cells = [
            line[start:end].strip()
            for start, end in zip(starts, [*starts[1:], len(line)], strict=True)
        ]
        out[cells[0]] = dict(zip(header, cells, strict=True))
    return out


async def heartbeat(
    api: KubeApi, node: str, counter: int, at: datetime, addresses: list[str]
) -> None:
    """The controller's API heartbeat with its addresses (a status merge patch)."""
    status = {"heartbeat": counter, "lastHeartbeatTime": format_time(at), "addresses": addresses}
    await api.patch(IPNODES, node, {"status": status}, status=True)


async def judge(api: KubeApi, node: str, live: bool, reason: str) -> None:
    """The scheduler leader's Live condition (read, `mark_live`, status update)."""
    obj = await api.get(IPNODES, node)
    mark_live(live, reason, "written by the test")(obj)
    await api.replace(IPNODES, obj, status=True)


async def exclude(api: KubeApi, node: str) -> None:
    """The scheduler leader's Eligible condition for a node excluded for maintenance."""
    obj = await api.get(IPNODES, node)
    condition = {
        "type": "Eligible",
        "status": "False",
        "reason": "NodeExcluded",
        "message": "written by the test",
        "lastTransitionTime": "2026-12-01T00:00:00Z",
    }
    obj.setdefault("status", {}).setdefault("conditions", []).append(condition)
    await api.replace(IPNODES, obj, status=True)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


async def test_get_ipnodes_shows_live_and_last_heartbeat_and_wide_the_addresses(
    apiserver: ApiServer, api: KubeApi, kubeconfig_path: Path, home: Path
) -> None:
    now = datetime.now(UTC)
    for name in ("node-live", "node-dead", "node-new", "node-ahead"):
        spec = {"link": "eth0", "livenessAddress": "192.0.2.11", "livenessPort": 9473}
        await api.create(IPNODES, {"metadata": {"name": name}, "spec": spec})
    await heartbeat(
        api, "node-live", 3, now - timedelta(seconds=7), ["203.0.113.7/32", "2001:db8::7/128"]
    )
    await judge(api, "node-live", True, REASON_REPLYING)
    await heartbeat(api, "node-dead", 9, now - timedelta(seconds=200), ["203.0.113.9/32"])
    await judge(api, "node-dead", False, REASON_NO_REPLY)
    await exclude(api, "node-dead")
    # a controller whose clock runs 30 s ahead of the API server's; not judged yet
    await heartbeat(api, "node-ahead", 1, now + timedelta(seconds=30), [])

    table = rows(await kubectl(kubeconfig_path, home, "get", "ipnodes"), COLUMNS)
    assert sorted(table) == ["node-ahead", "node-dead", "node-live", "node-new"]
    live, dead, new, ahead = (
        table[n] for n in ("node-live", "node-dead", "node-new", "node-ahead")
    )
    assert (live["LINK"], live["LIVE"], dead["LIVE"]) == ("eth0", "True", "False")
    assert re.fullmatch(r"\d+s", live["LAST HEARTBEAT"]), live
    assert 7 <= int(live["LAST HEARTBEAT"][:-1]) < 60, live  # 60: a slow, shared machine
    assert re.fullmatch(r"3m[2-5]\ds", dead["LAST HEARTBEAT"]), dead
    # no Live condition (no match for the filter) and no heartbeat yet: empty cells
    assert (new["LIVE"], new["LAST HEARTBEAT"]) == ("", "")
    assert (ahead["LIVE"], ahead["LAST HEARTBEAT"]) == ("", "<invalid>")
    assert all(re.fullmatch(r"\d+s", row["AGE"]) for row in table.values())

    wide = rows(await kubectl(kubeconfig_path, home, "get", "ipnodes", "-o", "wide"), WIDE)
    assert wide["node-live"]["REPORTED ADDRESSES"] == '["203.0.113.7/32","2001:db8::7/128"]'
    assert wide["node-dead"]["REPORTED ADDRESSES"] == '["203.0.113.9/32"]'
    assert wide["node-ahead"]["REPORTED ADDRESSES"] == "[]"
    assert wide["node-new"]["REPORTED ADDRESSES"] == ""
    # ELIGIBILITY: the reason of a maintenance exclusion; empty on a node never excluded
    assert (wide["node-dead"]["ELIGIBILITY"], wide["node-live"]["ELIGIBILITY"]) == (
        "NodeExcluded",
        "",
    )
    assert {n: r["LIVE"] for n, r in wide.items()} == {n: r["LIVE"] for n, r in table.items()}

    # what the server sends for no value: null cells, as the real one does
    async with (
        aiohttp.ClientSession(apiserver.url) as http,
        http.get("/apis/eipctl.io/v1alpha1/ipnodes", headers={"Accept": TABLE}) as resp,
    ):
        sent: dict[str, Any] = await resp.json()
    names = [c["name"] for c in sent["columnDefinitions"]]
    assert names == ["Name", *WIDE[1:]]
    assert [c["priority"] for c in sent["columnDefinitions"]] == [0, 0, 0, 1, 0, 1, 0]
    by_name = {r["cells"][0]: dict(zip(names, r["cells"], strict=True)) for r in sent["rows"]}
    assert by_name["node-new"]["LIVE"] is None
    assert by_name["node-new"]["LAST HEARTBEAT"] is None
    assert by_name["node-new"]["REPORTED ADDRESSES"] is None


async def test_a_live_condition_among_others_is_the_one_shown(
    api: KubeApi, kubeconfig_path: Path, home: Path
) -> None:
    await api.create(IPNODES, {"metadata": {"name": "node-1"}, "spec": {"link": "eth1"}})
    obj = await api.get(IPNODES, "node-1")
    stamp = format_time(datetime.now(UTC))
    obj["status"] = {
        "conditions": [
            {"type": "Example", "status": "True", "lastTransitionTime": stamp},
            {"type": "Live", "status": "Unknown", "lastTransitionTime": stamp},
        ]
    }
    await api.replace(IPNODES, obj, status=True)
    table = rows(await kubectl(kubeconfig_path, home, "get", "ipn"), COLUMNS)
    assert table["node-1"]["LIVE"] == "Unknown"
    judged = await api.get(IPNODES, "node-1")
    mark_live(False, REASON_NO_REPLY, "no reply")(judged)
    await api.replace(IPNODES, judged, status=True)
    table = rows(await kubectl(kubeconfig_path, home, "get", "ipn"), COLUMNS)
    assert table["node-1"]["LIVE"] == "False"


# apimachinery's duration.HumanDuration, which the server's date cells use
@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-2, "<invalid>"),
        (-1.5, "0s"),
        (0, "0s"),
        (119, "119s"),
        (190, "3m10s"),
        (600, "10m"),
        (70 * 60, "70m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (47 * 3600, "47h"),
        (49 * 3600, "2d1h"),
        ((8 * 24 + 2) * 3600, "8d"),
        (367 * 86400, "367d"),
        ((365 * 2 * 24 + 25) * 3600, "2y1d"),
        (365 * 3 * 86400, "3y"),
        ((365 * 8 * 24 + 2) * 3600, "8y"),
    ],
)
def test_date_cells_read_like_the_api_servers(seconds: float, shown: str) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    then = now - timedelta(seconds=seconds)
    assert human_age(then.isoformat(), now) == shown


def test_list_cells_are_go_json() -> None:
    assert go_json(["192.0.2.7/32", "2001:db8::7/128"]) == '["192.0.2.7/32","2001:db8::7/128"]'
    assert go_json({"b": 1, "a": "<&>"}) == '{"a":"\\u003c\\u0026\\u003e","b":1}'
    assert go_json(["é"]) == '["é"]'
