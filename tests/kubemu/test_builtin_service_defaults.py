"""What a real apiserver (1.37) writes into a Service: SetDefaults_Service (type,
sessionAffinity, protocol, targetPort, externalTrafficPolicy, internalTrafficPolicy,
allocateLoadBalancerNodePorts, status ingress ipMode) and the Service storage's allocators
(ipFamilyPolicy, ipFamilies, clusterIPs, nodePorts, healthCheckNodePort), kept across updates
that omit them; and the allocator's ingress write, which must be a no-op when the stored
entry differs only by the ipMode the server added."""

from __future__ import annotations

import copy
import ipaddress
from typing import Any

from eipctl.allocator.views import set_ingress
from kubemu import ApiServer


def create(srv: ApiServer, name: str = "web", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"ports": [{"port": 80}]}
    body.update(spec)
    return srv.store.create("", "services", {"metadata": {"name": name}, "spec": body}, "default")


def test_load_balancer_defaults(apiserver: ApiServer) -> None:
    spec = create(apiserver, type="LoadBalancer")["spec"]
    assert spec["sessionAffinity"] == "None"
    assert spec["ipFamilyPolicy"] == "SingleStack" and spec["ipFamilies"] == ["IPv4"]
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert ipaddress.ip_address(spec["clusterIP"]) in ipaddress.ip_network("10.96.0.0/12")
    assert spec["externalTrafficPolicy"] == "Cluster"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["allocateLoadBalancerNodePorts"] is True
    [port] = spec["ports"]
    assert port["protocol"] == "TCP" and port["targetPort"] == 80
    assert 30000 <= port["nodePort"] <= 32767
    assert "healthCheckNodePort" not in spec


def test_cluster_ip_defaults(apiserver: ApiServer) -> None:
    spec = create(apiserver)["spec"]
    assert spec["type"] == "ClusterIP" and spec["internalTrafficPolicy"] == "Cluster"
    assert "externalTrafficPolicy" not in spec and "allocateLoadBalancerNodePorts" not in spec
    assert "nodePort" not in spec["ports"][0]
    with_ips = create(apiserver, "ext", externalIPs=["203.0.113.7"])["spec"]
    assert with_ips["externalTrafficPolicy"] == "Cluster"  # externally accessible


def test_local_traffic_gets_a_health_check_port_and_node_ports_are_unique(
    apiserver: ApiServer,
) -> None:
    a = create(apiserver, "a", type="LoadBalancer", externalTrafficPolicy="Local")["spec"]
    b = create(apiserver, "b", type="NodePort")["spec"]
    assert 30000 <= a["healthCheckNodePort"] <= 32767
    taken = [a["ports"][0]["nodePort"], a["healthCheckNodePort"], b["ports"][0]["nodePort"]]
    assert len(set(taken)) == 3


def test_dual_stack_policy_gets_both_families(apiserver: ApiServer) -> None:
    spec = create(apiserver, type="LoadBalancer", ipFamilyPolicy="PreferDualStack")["spec"]
    assert spec["ipFamilies"] == ["IPv4", "IPv6"]
    assert [ipaddress.ip_address(ip).version for ip in spec["clusterIPs"]] == [4, 6]
    v6 = create(apiserver, "v6", ipFamilies=["IPv6"])["spec"]
    assert ipaddress.ip_address(v6["clusterIP"]).version == 6


def test_updates_keep_allocated_values(apiserver: ApiServer) -> None:
    before = create(apiserver, type="LoadBalancer")
    replacement = copy.deepcopy(before)
    spec = replacement["spec"]
    for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
        del spec[key]
    del spec["ports"][0]["nodePort"]
    after = apiserver.store.update("", "services", replacement)
    assert after["spec"] == before["spec"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_type_change_to_cluster_ip_drops_node_ports(apiserver: ApiServer) -> None:
    create(apiserver, type="LoadBalancer")
    out = apiserver.store.patch(
        "", "services", "web", {"spec": {"type": "ClusterIP"}}, namespace="default"
    )
    assert "nodePort" not in out["spec"]["ports"][0]
    assert "externalTrafficPolicy" not in out["spec"]
    assert "allocateLoadBalancerNodePorts" not in out["spec"]


def test_ingress_ip_mode_is_defaulted_and_the_allocator_does_not_rewrite_it(
    apiserver: ApiServer,
) -> None:
    create(apiserver, type="LoadBalancer")
    ip = ipaddress.ip_address("203.0.113.7")
    svc = apiserver.store.get("", "services", "web", "default")
    set_ingress([ip], [ip])(svc)  # the allocator writes an entry without ipMode
    stored = apiserver.store.update("", "services", svc, status=True)
    assert stored["status"]["loadBalancer"]["ingress"] == [{"ip": "203.0.113.7", "ipMode": "VIP"}]
    again = copy.deepcopy(stored)
    set_ingress([ip], [ip])(again)  # the next reconcile, from what the server stored
    assert again == stored  # nothing to write
    rewritten = apiserver.store.update("", "services", again, status=True)
    assert rewritten["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
