"""`kubectl apply -f` of a `kind: List` and `kubectl explain -o plaintext-openapiv2`, which read
/openapi/v2 as protobuf (openapi_proto.py), against the emulator with kubectl's default
validation.

kubectl's default `--validate=strict` leaves field validation to the server (fieldValidation=
Strict on each request) when /openapi/v3 says the server supports it, but never for a List:
its items are validated client-side against the /openapi/v2 definitions before anything is
sent, so an unknown field in a List is refused by kubectl itself, as against a real server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_emulator_kubectl import CRDS, Kubectl

from kubemu import ApiServer

pytestmark = pytest.mark.kubectl

LIST = """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: shop}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: settings, namespace: shop}
  data: {mode: fast}
- apiVersion: eipctl.io/v1alpha1
  kind: IpClaimPool
  metadata: {name: pool-a}
  spec: {cidr: 203.0.113.0/24, autoAssign: true}
"""

SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80}]
  externalIps: [203.0.113.9]
"""
BAD_LIST = """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: before, namespace: default}
- """ + SERVICE.strip().replace("\n", "\n  ")


@pytest.fixture
def kubectl(kubeconfig_path: Path, tmp_path: Path) -> Kubectl:
    return Kubectl(kubeconfig_path, tmp_path)


@pytest.fixture
async def crds(apiserver: ApiServer) -> ApiServer:
    await apiserver.load_crds_from_dir(CRDS)
    return apiserver


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


async def test_apply_a_list_with_default_validation(crds: ApiServer, kubectl: Kubectl) -> None:
    path = write(kubectl.cache.parent, "list.yaml", LIST)
    _, out, err = await kubectl.run("apply", "-f", path, "-v=6")
    assert out.splitlines() == [
        "namespace/shop created",
        "configmap/settings created",
        "ipclaimpool.eipctl.io/pool-a created",
    ]
    # the items were validated client-side against the protobuf /openapi/v2
    assert re.search(r'verb="GET" url="[^"]*/openapi/v2\?[^"]*" status="200 OK"', err)
    cm = json.loads(await kubectl.out("get", "configmap", "settings", "-n", "shop", "-o", "json"))
    assert cm["data"] == {"mode": "fast"}
    pool = json.loads(await kubectl.out("get", "ipclaimpool", "pool-a", "-o", "json"))
    assert pool["spec"]["cidr"] == "203.0.113.0/24" and pool["spec"]["autoAssign"] is True

    write(kubectl.cache.parent, "list.yaml", LIST.replace("mode: fast", "mode: slow"))
    out = await kubectl.out("apply", "-f", path)
    assert out.splitlines() == [
        "namespace/shop unchanged",
        "configmap/settings configured",
        "ipclaimpool.eipctl.io/pool-a unchanged",
    ]
    assert (
        await kubectl.out("get", "configmap", "settings", "-n", "shop", "-o", "jsonpath={.data}")
        == '{"mode":"slow"}'
    )


async def test_unknown_field_in_a_list_is_refused_by_kubectl(
    apiserver: ApiServer, kubectl: Kubectl
) -> None:
    path = write(kubectl.cache.parent, "bad.yaml", BAD_LIST)
    rc, out, err = await kubectl.run("apply", "-f", path, check=False)
    assert rc == 1 and out == ""
    assert err.strip() == (
        f'error: error validating "{path}": error validating data: ValidationError(Service.spec): '
        'unknown field "externalIps" in io.k8s.api.core.v1.ServiceSpec; if you choose to ignore '
        "these errors, turn validation off with --validate=false"
    )
    assert apiserver.store.find("", "configmaps", "before", "default") is None  # nothing sent

    # --validate=warn: no client-side validation for a List, the server warns per item
    rc, out, err = await kubectl.run("apply", "-f", path, "--validate=warn")
    assert out.splitlines() == ["configmap/before created", "service/web created"]
    assert "cannot perform warn validation if server-side field validation is unsupported" in err
    assert 'Warning: unknown field "spec.externalIps"' in err
    await kubectl.out("delete", "-f", path)


async def test_unknown_field_outside_a_list_is_refused_by_the_server(
    apiserver: ApiServer, kubectl: Kubectl
) -> None:
    rc, _, err = await kubectl.run("apply", "-f", "-", stdin=SERVICE, check=False)
    assert rc == 1
    assert err.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": Service in version "v1" '
        'cannot be handled as a Service: strict decoding error: unknown field "spec.externalIps"'
    )


async def test_explain_reads_v3_by_default_and_v2_on_request(
    crds: ApiServer, kubectl: Kubectl
) -> None:
    _, out, err = await kubectl.run("explain", "ipclaimpool.spec.cidr", "-v=6")
    assert "/openapi/v3" in err and "/openapi/v2" not in err
    assert "The pool's network, IPv4 or IPv6" in out

    out = await kubectl.out("explain", "service.spec.ports", "-o", "plaintext-openapiv2")
    assert out.splitlines()[:4] == [
        "KIND:     Service",
        "VERSION:  v1",
        "",
        "RESOURCE: ports <[]Object>",
    ]
    assert "ServicePort contains information on service's port." in out
    assert "   appProtocol\t<string>" in out

    out = await kubectl.out("explain", "ipclaimpool.spec", "-o", "plaintext-openapiv2")
    lines = out.splitlines()
    assert lines[:4] == [
        "KIND:     IpClaimPool",
        "VERSION:  eipctl.io/v1alpha1",
        "",
        "RESOURCE: spec <Object>",
    ]
    assert "   cidr\t<string> -required-" in lines
