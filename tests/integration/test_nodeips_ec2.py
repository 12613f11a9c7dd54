"""EC2 for the cloud stories: moto's server on loopback, behind a proxy that injects faults.

moto runs as a real HTTP endpoint (`ThreadedMotoServer` on 127.0.0.1, a free port) and the
code under test talks to it through aiobotocore like to EC2. Between them sits `Ec2Proxy`
(aiohttp, loopback): it forwards every request and, on demand, answers an action with an
EC2 error or forwards it and then cuts the connection before the answer (a lost response).

Holds no tests (named to sit with the stories that import it).
"""

from __future__ import annotations

import contextlib
import logging
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    """moto's EC2 server on loopback for the whole session (reset before each test)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, moto_url: str) -> str:
    """Credentials through the standard chain (environment), nothing from the host's files."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(key, value)
    request = urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST")
    with urllib.request.urlopen(request, timeout=10):
        pass
    return moto_url


@dataclass
class Ec2Proxy:
    """Loopback proxy in front of moto; set faults per EC2 action (e.g. ``AllocateAddress``)."""

    upstream: str
    lose_response: dict[str, int] = field(default_factory=dict)
    """Action -> how many more times to forward it and then drop the answer."""
    errors: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Action -> (error code, message) to answer with instead of forwarding."""
    hide_addresses: int = 0
    """Answer this many more DescribeAddresses with no address (EC2's eventual consistency)."""
    calls: dict[str, int] = field(default_factory=dict)
    """Action -> how many requests reached moto."""
    url: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        action = urllib.parse.parse_qs(body.decode()).get("Action", [""])[0]
        if action in self.errors:
            code, message = self.errors[action]
            xml = (
                '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
                f"<Code>{code}</Code><Message>{message}</Message></Error></Errors>"
                "<RequestID>proxy</RequestID></Response>"
            )
            return web.Response(status=400, body=xml.encode(), content_type="text/xml")
        if action == "DescribeAddresses" and self.hide_addresses > 0:
            self.hide_addresses -= 1
            xml = (
                '<DescribeAddressesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
                "<requestId>proxy</requestId><addressesSet/></DescribeAddressesResponse>"
            )
            return web.Response(status=200, body=xml.encode(), content_type="text/xml")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host",)}
        async with (
            aiohttp.ClientSession() as session,
            session.post(self.upstream + request.path_qs, data=body, headers=headers) as resp,
        ):
            payload = await resp.read()
            status = resp.status
            content_type = resp.headers.get("Content-Type", "text/xml")
        self.calls[action] = self.calls.get(action, 0) + 1
        if self.lose_response.get(action, 0) > 0:
            self.lose_response[action] -= 1
            assert request.transport is not None
            request.transport.abort()  # moto did it; the caller never hears
            raise ConnectionResetError("answer dropped by the test proxy")
        return web.Response(status=status, body=payload, headers={"Content-Type": content_type})


@pytest_asyncio.fixture(name="ec2_proxy")
async def ec2_proxy_fixture(aws_env: str) -> AsyncIterator[Ec2Proxy]:
    proxy = Ec2Proxy(upstream=aws_env)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    proxy.url = f"http://127.0.0.1:{port}"
    try:
        yield proxy
    finally:
        await runner.cleanup()


@dataclass
class Instance:
    instance_id: str
    eni: str
    private_ip: str

    @property
    def provider_id(self) -> str:
        return f"aws:///{REGION}a/{self.instance_id}"


@contextlib.asynccontextmanager
async def ec2_client(url: str) -> AsyncIterator[Any]:
    from aiobotocore.session import get_session

    async with get_session().create_client("ec2", region_name=REGION, endpoint_url=url) as ec2:
        yield ec2


async def make_instances(url: str, n: int) -> list[Instance]:
    """``n`` instances in one VPC subnet (each with its primary interface)."""
    async with ec2_client(url) as ec2:
        vpc = (await ec2.create_vpc(CidrBlock="10.0.0.0/16"))["Vpc"]["VpcId"]
        subnet = (await ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24"))["Subnet"]
        image = (await ec2.describe_images())["Images"][0]["ImageId"]
        out = []
        for _ in range(n):
            raw = await ec2.run_instances(
                ImageId=image, MinCount=1, MaxCount=1, SubnetId=subnet["SubnetId"]
            )
            inst = raw["Instances"][0]
            eni = inst["NetworkInterfaces"][0]
            out.append(
                Instance(inst["InstanceId"], eni["NetworkInterfaceId"], eni["PrivateIpAddress"])
            )
        return out


async def addresses(url: str) -> list[dict[str, Any]]:
    async with ec2_client(url) as ec2:
        return list((await ec2.describe_addresses())["Addresses"])
