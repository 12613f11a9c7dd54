"""sandbox/apiserver/endpointslice_rules.py: an EndpointSlice the real apiserver refuses is
refused, with its words; one it takes is taken."""

from __future__ import annotations

from typing import Any

import pytest

from kubemu.endpointslice_rules import endpointslice_causes


def slice_(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"], "nodeName": "node-1"}],
        "ports": [{"port": 80}],
    }
    body.update(fields)
    return {k: v for k, v in body.items() if v is not None}


def test_a_slice_as_the_endpointslice_controller_writes_it_is_valid() -> None:
    assert endpointslice_causes(slice_()) == []
    fqdn = slice_(addressType="FQDN", endpoints=[{"addresses": ["db.example.org"]}])
    assert endpointslice_causes(fqdn) == []


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"addressType": None}, "addressType", "Required value"),
        ({"addressType": "IPv5"}, "addressType", 'Unsupported value: "IPv5"'),
        ({"endpoints": [{"addresses": []}]}, "endpoints[0].addresses", "at least 1 address"),
        (
            {"endpoints": [{"addresses": ["2001:db8::1"]}]},
            "endpoints[0].addresses[0]",
            "must be a valid IPv4 address",
        ),
        (
            {"endpoints": [{"addresses": ["10.0.0.1"], "nodeName": "Node_1"}]},
            "endpoints[0].nodeName",
            "RFC 1123 subdomain",
        ),
        ({"endpoints": [{"addresses": ["10.0.0.1"]}] * 1001}, "endpoints", "at most 1000"),
        ({"ports": [{"port": 1}] * 101}, "ports", "at most 100"),
    ],
)
def test_what_the_apiserver_refuses(fields: dict[str, Any], field: str, message: str) -> None:
    causes = endpointslice_causes(slice_(**fields))
    assert [c["field"] for c in causes] == [field]
    assert message in causes[0]["message"]
