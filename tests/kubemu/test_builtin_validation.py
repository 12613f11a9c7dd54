"""Built-in kinds are decoded and validated as a real apiserver (1.37) does: wrong JSON types
are a 400 worded as Go's decoder words it, unknown fields are dropped with a Warning header
(400 under fieldValidation=Strict), and the semantic rules of pkg/apis/core/validation,
pkg/apis/coordination/validation and apimachinery's metadata validation refuse with 422.

The expectations come from the Kubernetes sources (validation.go: ValidateService,
validateServicePort, ValidateNonSpecialIP, ValidateLoadBalancerStatus, legacyValidateEvent,
ValidateConfigMap; coordination ValidateLeaseSpec; apimachinery IsQualifiedName,
IsValidLabelValue, ValidateAnnotations; metav1.MicroTime's RFC3339Micro layout) and the API
conventions for fieldValidation (Warn is the default)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from widget_crd import GROUP, PLURAL, VERSION, widget

from kubemu import ApiServer

NS = "/api/v1/namespaces/default"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"


async def call(
    srv: ApiServer, method: str, path: str, body: Any = None, content_type: str = ""
) -> tuple[int, Any, list[str]]:
    headers = {"Content-Type": content_type} if content_type else None
    async with (
        aiohttp.ClientSession(srv.url) as http,
        http.request(method, path, json=body, headers=headers) as r,
    ):
        return r.status, await r.json(), r.headers.getall("Warning", [])


def service(name: str = "web", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "LoadBalancer", "ports": [{"port": 80}]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": body}


def causes(status: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in status["details"]["causes"]]


# --- decoding: wrong types are a 400 ------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (
            f"{NS}/services",
            service(ports=[{"port": "80"}]),
            'Service in version "v1" cannot be handled as a Service: json: cannot unmarshal '
            "string into Go struct field ServicePort.spec.ports.port of type int32",
        ),
        (
            f"{NS}/configmaps",
            {"metadata": {"name": "c"}, "data": {"n": 1}},
            'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot '
            "unmarshal number into Go struct field ConfigMap.data of type string",
        ),
        (
            LEASES,
            {"metadata": {"name": "l"}, "spec": {"renewTime": "2026-01-01T00:00:00Z"}},
            'Lease in version "v1" cannot be handled as a Lease: parsing time '
            '"2026-01-01T00:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" '
            'as ".000000"',
        ),
    ],
    ids=["string-port", "number-in-configmap", "renewtime-without-micros"],
)
async def test_wrong_types_are_bad_requests(
    apiserver: ApiServer, path: str, body: dict[str, Any], message: str
) -> None:
    code, status, _ = await call(apiserver, "POST", path, body)
    assert (code, status["reason"], status["message"]) == (400, "BadRequest", message)


async def test_micro_time_with_six_digits_and_time_with_none_are_fine(apiserver: ApiServer) -> None:
    spec = {
        "renewTime": "2026-01-01T00:00:00.123456Z",
        "acquireTime": "2026-01-01T00:00:00.000000Z",
    }
    code, out, _ = await call(apiserver, "POST", LEASES, {"metadata": {"name": "l"}, "spec": spec})
    assert code == 201 and out["spec"]["renewTime"] == "2026-01-01T00:00:00.123456Z"
    event = {
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Service", "name": "web", "namespace": "default"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
    }
    assert (await call(apiserver, "POST", f"{NS}/events", event))[0] == 201


# --- unknown fields -----------------------------------------------------------------------


async def test_unknown_fields_are_dropped_with_a_warning(apiserver: ApiServer) -> None:
    body = service(externalIps=["203.0.113.7"])
    body["metadata"]["colour"] = "blue"
    code, out, warnings = await call(apiserver, "POST", f"{NS}/services", body)
    assert code == 201
    assert "externalIps" not in out["spec"] and "colour" not in out["metadata"]
    assert warnings == [
        '299 - "unknown field \\"metadata.colour\\""',
        '299 - "unknown field \\"spec.externalIps\\""',
    ]
    assert "externalIps" not in apiserver.store.get("", "services", "web", "default")["spec"]


async def test_unknown_fields_under_strict_are_a_bad_request(apiserver: ApiServer) -> None:
    code, status, _ = await call(
        apiserver,
        "POST",
        f"{NS}/services?fieldValidation=Strict",
        service(externalIps=["203.0.113.7"]),
    )
    assert (code, status["message"]) == (
        400,
        'Service in version "v1" cannot be handled as a Service: strict decoding error: '
        'unknown field "spec.externalIps"',
    )
    assert apiserver.store.find("", "services", "web", "default") is None


async def test_unknown_fields_under_ignore_are_dropped_silently(apiserver: ApiServer) -> None:
    code, out, warnings = await call(
        apiserver,
        "POST",
        f"{NS}/configmaps?fieldValidation=Ignore",
        {"metadata": {"name": "c"}, "dta": {}},
    )
    assert (code, warnings) == (201, []) and "dta" not in out


async def test_patch_with_an_unknown_field_warns(apiserver: ApiServer) -> None:
    assert (await call(apiserver, "POST", f"{NS}/services", service()))[0] == 201
    code, out, warnings = await call(
        apiserver,
        "PATCH",
        f"{NS}/services/web",
        {"spec": {"externalIps": ["203.0.113.7"]}},
        "application/merge-patch+json",
    )
    assert code == 200 and warnings == ['299 - "unknown field \\"spec.externalIps\\""']
    assert "externalIps" not in out["spec"]


# --- semantic rules: 422 -------------------------------------------------------------------

_LOOPBACK = "may not be in the loopback range (127.0.0.0/8, ::1/128)"
_BAD_IP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"externalIPs": ["not-an-ip"]},
            ("spec.externalIPs[0]", f'Invalid value: "not-an-ip": {_BAD_IP}'),
        ),
        (
            {"externalIPs": ["127.0.0.1"]},
            ("spec.externalIPs[0]", f'Invalid value: "127.0.0.1": {_LOOPBACK}'),
        ),
        (
            {"externalIPs": ["169.254.1.1"]},
            (
                "spec.externalIPs[0]",
                'Invalid value: "169.254.1.1": may not be in the link-local range '
                "(169.254.0.0/16, fe80::/10)",
            ),
        ),
        (
            {"externalIPs": ["0.0.0.0"]},
            ("spec.externalIPs[0]", 'Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)'),
        ),
        (
            {"externalIPs": ["224.0.0.5"]},
            (
                "spec.externalIPs[0]",
                'Invalid value: "224.0.0.5": may not be in the link-local multicast range '
                "(224.0.0.0/24, ff02::/10)",
            ),
        ),
        (
            {"type": "LoadBalancerX"},
            (
                "spec.type",
                'Unsupported value: "LoadBalancerX": supported values: "ClusterIP", '
                '"ExternalName", "LoadBalancer", "NodePort"',
            ),
        ),
        ({"ports": []}, ("spec.ports", "Required value")),
        ({"ports": [{"port": 80}, {"port": 81}]}, ("spec.ports[0].name", "Required value")),
        (
            {"ports": [{"port": 0}]},
            ("spec.ports[0].port", "Invalid value: 0: must be between 1 and 65535, inclusive"),
        ),
        (
            {"ports": [{"port": 80, "protocol": "HTTP"}]},
            (
                "spec.ports[0].protocol",
                'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"',
            ),
        ),
        (
            {"ports": [{"name": "a", "port": 80}, {"name": "a", "port": 81}]},
            ("spec.ports[1].name", 'Duplicate value: "a"'),
        ),
        ({"loadBalancerIP": "nope"}, ("spec.loadBalancerIP", f'Invalid value: "nope": {_BAD_IP}')),
    ],
    ids=[
        "not-an-ip",
        "loopback",
        "link-local",
        "unspecified",
        "link-local-multicast",
        "type",
        "no-ports",
        "two-unnamed-ports",
        "port-zero",
        "protocol",
        "duplicate-port-names",
        "load-balancer-ip",
    ],
)
async def test_service_rules(
    apiserver: ApiServer, spec: dict[str, Any], expected: tuple[str, str]
) -> None:
    code, status, _ = await call(apiserver, "POST", f"{NS}/services", service(**spec))
    assert (code, status["reason"]) == (422, "Invalid")
    assert expected in causes(status)
    assert status["message"].startswith('Service "web" is invalid: ')


async def test_duplicate_port_and_protocol(apiserver: ApiServer) -> None:
    ports = [{"name": "a", "port": 80}, {"name": "b", "port": 80}]
    code, status, _ = await call(apiserver, "POST", f"{NS}/services", service(ports=ports))
    assert code == 422
    assert [f for f, _ in causes(status)] == ["spec.ports[1]"]
    assert causes(status)[0][1].startswith("Duplicate value: core.ServicePort{")


async def test_same_port_on_two_protocols_is_fine(apiserver: ApiServer) -> None:
    ports = [{"name": "dns", "port": 53}, {"name": "dns-udp", "port": 53, "protocol": "UDP"}]
    assert (await call(apiserver, "POST", f"{NS}/services", service(ports=ports)))[0] == 201


async def test_service_name_is_a_dns_1035_label(apiserver: ApiServer) -> None:
    code, status, _ = await call(apiserver, "POST", f"{NS}/services", service(name="1web"))
    assert code == 422
    assert causes(status) == [
        (
            "metadata.name",
            'Invalid value: "1web": a DNS-1035 label must consist of lower case alphanumeric '
            "characters or '-', start with an alphabetic character, and end with an "
            "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation "
            "is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        )
    ]


async def test_ingress_ip_must_be_an_ip(apiserver: ApiServer) -> None:
    assert (await call(apiserver, "POST", f"{NS}/services", service()))[0] == 201
    code, status, _ = await call(
        apiserver,
        "PATCH",
        f"{NS}/services/web/status",
        {"status": {"loadBalancer": {"ingress": [{"ip": "not-an-ip", "ipMode": "VIP"}]}}},
        "application/merge-patch+json",
    )
    assert code == 422
    assert causes(status) == [
        ("status.loadBalancer.ingress[0].ip", f'Invalid value: "not-an-ip": {_BAD_IP}')
    ]


async def test_lease_duration_must_be_positive(apiserver: ApiServer) -> None:
    body = {"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}}
    code, status, _ = await call(apiserver, "POST", LEASES, body)
    assert code == 422
    assert causes(status) == [
        ("spec.leaseDurationSeconds", "Invalid value: 0: must be greater than 0"),
        ("spec.leaseTransitions", "Invalid value: -1: must be greater than or equal to 0"),
    ]


async def test_event_in_another_namespace_than_its_object(apiserver: ApiServer) -> None:
    event = {
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Service", "name": "web", "namespace": "kube-system"},
        "reason": "Allocated",
    }
    code, status, _ = await call(apiserver, "POST", f"{NS}/events", event)
    assert code == 422
    assert causes(status) == [
        ("involvedObject.namespace", 'Invalid value: "kube-system": does not match event.namespace')
    ]


async def test_configmap_keys(apiserver: ApiServer) -> None:
    body = {"metadata": {"name": "c"}, "data": {"a/b": "x"}}
    code, status, _ = await call(apiserver, "POST", f"{NS}/configmaps", body)
    assert code == 422
    [(fld, message)] = causes(status)
    assert fld == "data[a/b]"
    assert message.startswith('Invalid value: "a/b": a valid config key must consist of')


async def test_namespace_name_is_a_dns_1123_label(apiserver: ApiServer) -> None:
    code, status, _ = await call(
        apiserver, "POST", "/api/v1/namespaces", {"metadata": {"name": "a.b"}}
    )
    assert code == 422
    assert causes(status)[0][1].startswith('Invalid value: "a.b": a lowercase RFC 1123 label')


# --- item 3: labels, annotations, finalizers -----------------------------------------------


async def test_ipv6_address_as_label_value_is_refused(apiserver: ApiServer) -> None:
    body = {"metadata": {"name": "c", "labels": {"ip": "2001:db8::1"}}}
    code, status, _ = await call(apiserver, "POST", f"{NS}/configmaps", body)
    assert code == 422
    assert causes(status) == [
        (
            "metadata.labels",
            'Invalid value: "2001:db8::1": a valid label must be an empty string or consist of '
            "alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
            "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        )
    ]


@pytest.mark.parametrize(
    ("meta", "fld", "start"),
    [
        ({"labels": {"a/b/c": "x"}}, "metadata.labels", 'Invalid value: "a/b/c": a qualified name'),
        ({"labels": {"x": "a" * 64}}, "metadata.labels", 'Invalid value: "' + "a" * 64),
        (
            {"annotations": {"-bad": "x"}},
            "metadata.annotations",
            'Invalid value: "-bad": name part',
        ),
        (
            {"finalizers": ["Not Qualified"]},
            "metadata.finalizers",
            'Invalid value: "Not Qualified"',
        ),
        (
            {"annotations": {"big": "x" * (256 * 1024)}},
            "metadata.annotations",
            "Too long: may not be more than 262144 bytes",
        ),
    ],
    ids=["label-key", "label-value-length", "annotation-key", "finalizer", "annotations-size"],
)
async def test_metadata_rules(
    apiserver: ApiServer, meta: dict[str, Any], fld: str, start: str
) -> None:
    code, status, _ = await call(
        apiserver, "POST", f"{NS}/configmaps", {"metadata": {"name": "c", **meta}}
    )
    assert code == 422
    assert [f for f, _ in causes(status)] == [fld]
    assert causes(status)[0][1].startswith(start)


async def test_metadata_rules_apply_to_custom_resources(widgets: ApiServer) -> None:
    body = widget("w")
    body["metadata"]["labels"] = {"ip": "10.0.0.1/24"}
    code, status, _ = await call(widgets, "POST", f"/apis/{GROUP}/{VERSION}/{PLURAL}", body)
    assert code == 422 and causes(status)[0][0] == "metadata.labels"


async def test_qualified_names_pass(apiserver: ApiServer) -> None:
    meta = {
        "name": "c",
        "labels": {"eipctl.io/pool": "pool-a", "app.kubernetes.io/name": "web", "empty": ""},
        "annotations": {"eipctl.io/allocated-ips": "203.0.113.7,2001:db8::7"},
        "finalizers": ["eipctl.io/release"],
    }
    assert (await call(apiserver, "POST", f"{NS}/configmaps", {"metadata": meta}))[0] == 201


async def test_pod_disruption_budgets_and_network_policies_are_served(
    apiserver: ApiServer,
) -> None:
    """deploy/ ships PodDisruptionBudgets (policy/v1); both kinds are typed and pruned."""
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "eipctl-scheduler", "namespace": "default"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "x"}}, "bogus": 1},
    }
    stored = apiserver.store.create("policy", "poddisruptionbudgets", pdb, namespace="default")
    assert stored["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "x"}}}
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "metrics", "namespace": "default"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }
    apiserver.store.create("networking.k8s.io", "networkpolicies", policy, namespace="default")
    assert apiserver.store.get("networking.k8s.io", "networkpolicies", "metrics", "default")
