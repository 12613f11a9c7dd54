"""The passwords of BGP sessions through API trouble (controller/bgp.py).

An API outage must not take a session down: a passwordSecret whose read gets no answer keeps
the password last read; one the API says is gone or forbidden is left out, as before."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from eipctl.controller.bgp import FrrConfigWriter
from eipctl.core.bgp_peer import BgpPeer
from eipctl.kube.errors import Forbidden, NotFound, ServerError, TransportError

NAMESPACE = "eipctl-bgp"


class SecretsApi:
    """Answers Secret GETs from `answers`: a password, or an exception to raise."""

    def __init__(self) -> None:
        self.answers: dict[str, str | Exception] = {}
        self.asked: list[tuple[str, str | None]] = []

    async def get(self, _ref: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.asked.append((name, namespace))
        answer = self.answers[name]
        if isinstance(answer, Exception):
            raise answer
        return {"data": {"password": base64.b64encode(answer.encode()).decode()}}


class NoPools:
    def bgp_pools(self) -> dict[str, str]:
        return {}


def writer(api: SecretsApi, tmp_path: Path) -> FrrConfigWriter:
    return FrrConfigWriter(
        api=api,  # type: ignore[arg-type]
        writer=None,  # type: ignore[arg-type]
        events=None,  # type: ignore[arg-type]
        node="node-1",
        path=str(tmp_path / "frr.conf"),
        pools=NoPools(),
        bgp_link="eipctl-bgp",
        secret_namespace=NAMESPACE,
        router_id=lambda: "192.0.2.10",
    )


def peer(name: str, secret: str) -> BgpPeer:
    return BgpPeer.from_dict(
        {
            "metadata": {"name": name},
            "spec": {
                "peerAddress": "192.0.2.1",
                "peerASN": 64500,
                "myASN": 64512,
                "passwordSecret": secret,
            },
        }
    )


async def test_a_password_is_read_from_the_configured_namespace(tmp_path: Path) -> None:
    api = SecretsApi()
    api.answers["tor-a"] = "s3cret"
    assert await writer(api, tmp_path)._passwords([peer("a", "tor-a")]) == {"tor-a": "s3cret"}
    assert api.asked == [("tor-a", NAMESPACE)]


@pytest.mark.parametrize(
    "failure",
    [
        TimeoutError(),
        TransportError("connection refused"),
        ServerError(503, "ServiceUnavailable", "etcd leader changed"),
        ServerError(429, "TooManyRequests", "throttled"),
    ],
    ids=["timeout", "refused", "503", "429"],
)
async def test_a_read_that_gets_no_answer_keeps_the_password_last_read(
    tmp_path: Path, failure: Exception
) -> None:
    api = SecretsApi()
    frr = writer(api, tmp_path)
    peers = [peer("a", "tor-a"), peer("b", "tor-b")]
    api.answers = {"tor-a": "s3cret", "tor-b": "other"}
    await frr._passwords(peers)
    api.answers["tor-a"] = failure
    assert await frr._passwords(peers) == {"tor-a": "s3cret", "tor-b": "other"}
    api.answers["tor-a"] = "rotated"  # the API is back: what it says wins
    assert await frr._passwords(peers) == {"tor-a": "rotated", "tor-b": "other"}


@pytest.mark.parametrize(
    "answer",
    [NotFound(404, "NotFound", "gone"), Forbidden(403, "Forbidden", "not in the Role")],
    ids=["deleted", "forbidden"],
)
async def test_a_secret_the_api_refuses_leaves_its_peer_out(
    tmp_path: Path, answer: Exception
) -> None:
    api = SecretsApi()
    frr = writer(api, tmp_path)
    api.answers["tor-a"] = "s3cret"
    await frr._passwords([peer("a", "tor-a")])
    api.answers["tor-a"] = answer
    assert await frr._passwords([peer("a", "tor-a")]) == {}
    api.answers["tor-a"] = TimeoutError()  # nothing left to keep after a definite answer
    assert await frr._passwords([peer("a", "tor-a")]) == {}


async def test_a_password_never_read_is_not_invented_during_an_outage(tmp_path: Path) -> None:
    api = SecretsApi()
    api.answers["tor-a"] = TimeoutError()
    assert await writer(api, tmp_path)._passwords([peer("a", "tor-a")]) == {}
