"""The Kubernetes CEL IP/CIDR library in cel-python: what each function answers, checked
against the examples in k8s.io/apiserver/pkg/cel/library ip.go and cidr.go."""

from __future__ import annotations

from typing import Any, cast

import celpy
import pytest
from celpy.evaluation import CELEvalError

from kubemu import cel_net

ENV = celpy.Environment()


def cel(expression: str, **variables: Any) -> Any:
    prog = ENV.program(ENV.compile(expression), functions=cast(Any, cel_net.FUNCTIONS))
    activation = {**cel_net.VARIABLES}
    activation.update({k: celpy.json_to_cel(v) for k, v in variables.items()})
    return prog.evaluate(activation)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("isIP('127.0.0.1')", True),
        ("isIP('::1')", True),
        ("isIP('2001:DB8::ABCD')", True),
        ("isIP('64:ff9b::1.2.3.4')", True),  # dotted quad allowed when not IPv4-mapped
        ("isIP('127.0.0.256')", False),
        ("isIP(':::1')", False),
        ("isIP('01.2.3.4')", False),  # leading zero
        ("isIP('::ffff:1.2.3.4')", False),  # IPv4-mapped
        ("isIP('::ffff:102:304')", False),  # IPv4-mapped, hex spelling
        ("isIP('fe80::1%eth0')", False),  # zone
        ("isIP('203.0.113.7/32')", False),
        ("isIP('')", False),
        ("ip('127.0.0.1').family()", 4),
        ("ip('::1').family()", 6),
        ("ip('0.0.0.0').isUnspecified()", True),
        ("ip('::').isUnspecified()", True),
        ("ip('127.0.0.1').isUnspecified()", False),
        ("ip('127.0.0.1').isLoopback()", True),
        ("ip('::1').isLoopback()", True),
        ("ip('2001:db8::abcd').isLoopback()", False),
        ("ip('224.0.0.1').isLinkLocalMulticast()", True),
        ("ip('224.0.1.1').isLinkLocalMulticast()", False),
        ("ip('ff02::1').isLinkLocalMulticast()", True),
        ("ip('fd00::1').isLinkLocalMulticast()", False),
        ("ip('169.254.169.254').isLinkLocalUnicast()", True),
        ("ip('192.168.0.1').isLinkLocalUnicast()", False),
        ("ip('fe80::1').isLinkLocalUnicast()", True),
        ("ip('fd80::1').isLinkLocalUnicast()", False),
        ("ip('192.168.0.1').isGlobalUnicast()", True),
        ("ip('255.255.255.255').isGlobalUnicast()", False),
        ("ip('2001:db8::abcd').isGlobalUnicast()", True),
        ("ip('ff00::1').isGlobalUnicast()", False),
        ("ip.isCanonical('127.0.0.1')", True),
        ("ip.isCanonical('2001:db8::abcd')", True),
        ("ip.isCanonical('2001:DB8::ABCD')", False),
        ("ip.isCanonical('2001:db8::0:0:0:abcd')", False),
        ("string(ip('2001:DB8:0:0::1'))", "2001:db8::1"),
        ("ip('10.0.0.1') == ip('10.0.0.1')", True),
        ("ip('10.0.0.1') == ip('10.0.0.2')", False),
        ("isCIDR('192.168.0.0/16')", True),
        ("isCIDR('::1/128')", True),
        ("isCIDR('192.168.0.1/16')", True),  # host bits are allowed; masked() clears them
        ("isCIDR('192.168.0.0/33')", False),
        ("isCIDR('::1/129')", False),
        ("isCIDR('10.0.0.0/08')", False),  # leading zero in the length
        ("isCIDR('10.0.0.0/+8')", False),
        ("isCIDR('10.0.0.0')", False),
        ("isCIDR('::ffff:1.2.3.4/120')", False),
        ("isCIDR('fe80::%eth0/64')", False),
        ("cidr('192.168.0.0/16').prefixLength()", 16),
        ("cidr('::1/128').prefixLength()", 128),
        ("cidr('192.168.0.1/24').ip() == ip('192.168.0.1')", True),
        ("cidr('::1/128').ip().family()", 6),
        ("cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')", True),
        ("cidr('192.168.0.0/24') == cidr('192.168.0.0/24').masked()", True),
        ("cidr('192.168.0.1/24') == cidr('192.168.0.1/24').masked()", False),
        ("string(cidr('2001:DB8::1/64').masked())", "2001:db8::/64"),
        ("cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))", True),
        ("cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))", False),
        ("cidr('192.168.0.0/24').containsIP('192.168.0.1')", True),
        ("cidr('192.168.0.0/24').containsIP('2001:db8::1')", False),
        ("cidr('192.168.0.0/16').containsCIDR(cidr('192.168.10.0/24'))", True),
        ("cidr('192.168.1.0/24').containsCIDR(cidr('192.168.2.0/24'))", False),
        ("cidr('192.168.0.0/16').containsCIDR('192.168.10.0/24')", True),
        ("cidr('192.168.10.0/24').containsCIDR('192.168.0.0/16')", False),
    ],
)
def test_library_answers(expression: str, expected: Any) -> None:
    assert cel(expression) == expected


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("ip('127.0.0.256')", "parse error"),
        ("ip('fe80::1%eth0')", "with zone value is not allowed"),
        ("ip('::ffff:1.2.3.4')", "IPv4-mapped IPv6 address"),
        ("cidr('192.168.0.0/33')", "network address parse error"),
        ("cidr('192.168.0.0/24').containsIP('x')", "parse error"),
    ],
)
def test_bad_input_is_an_evaluation_error(expression: str, why: str) -> None:
    with pytest.raises(CELEvalError) as exc:
        cel(expression)
    assert why in str(exc.value.args[0])


def test_rules_over_self() -> None:
    rule = "isCIDR(self) && cidr(self).prefixLength() <= (cidr(self).ip().family() == 4 ? 30 : 126)"
    assert cel(rule, self="203.0.113.0/24") is not None
    assert bool(cel(rule, self="203.0.113.0/24"))
    assert not bool(cel(rule, self="203.0.113.0/31"))
    assert not bool(cel(rule, self="garbage"))  # && short-circuits before cidr() fails
    assert bool(cel("self.all(a, isIP(a))", self=["192.0.2.1", "2001:db8::1"]))
    assert not bool(cel("self.all(a, isIP(a))", self=["192.0.2.1", "2001:db8::1/64"]))
