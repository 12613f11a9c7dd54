"""The container image, built on this machine without Docker and run as the cluster runs it.

`tools/image/build.py` builds it (wheels on the host, a Debian base by mmdebstrap, `podman
build --network none` of the Dockerfile). Then, with podman:

- `eipctl version` and every process's `--help` run in it as uid 65532 on a read-only root
  filesystem, as the Deployments run it; the image's own user is 65532 and its entrypoint
  `eipctl`;
- node-0's controller of a two-node test bed runs from the image, as the DaemonSet runs it:
  in the node's network namespace, uid 0 with only NET_ADMIN and NET_RAW, read-only, no new
  privileges, the kubeconfig and the liveness key mounted read-only. It holds the IPs the
  scheduler places on node-0 and the client reaches them there; when the Services go, it
  removes them; SIGTERM (`podman stop`) ends it with status 0.

Needs root, podman, mmdebstrap and an OCI runtime (crun, or runc where crun cannot run): it
skips saying what is missing (`tox -e image` installs them). Containers carry the label
`eipctl-image-test=<pid of the test run>`: they are removed at the end, and a later run
removes those of a run that died. The image is removed at the end; the Debian base stays
cached (/var/cache/eipctl-image and podman's storage), so the next build is warm.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import eipctl
from eipctl.sandbox.namespaces import why_unavailable as netns_unavailable
from eipctl.sandbox.testbed import BedOptions, LocalBed, Process, wait_for
from eipctl.sandbox.testbed.checks import (
    create_services,
    wait_answered_by,
    wait_bound,
    wait_for_ips,
)

ROOT = Path(__file__).resolve().parents[2]
TAG = "localhost/eipctl:image-test"
LABEL = "eipctl-image-test"
PROCESSES = ("allocator", "scheduler", "controller", "nodeips")
NET_ADMIN_AND_NET_RAW = (1 << 12) | (1 << 13)
AS_DEPLOYMENTS = ["--read-only", "--read-only-tmpfs=false", "--user", "65532:65532"]

# a cold build (mmdebstrap, pip wheel) takes minutes on a busy 2-core machine
pytestmark = pytest.mark.timeout(900)


def _load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "eipctl_image_build", ROOT / "tools/image/build.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


builder = _load_builder()


def podman(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*builder.podman(), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def run_in(image: str, *args: str, options: list[str]) -> subprocess.CompletedProcess[str]:
    """`podman run --rm` without network; the container carries this run's label."""
    label = f"{LABEL}={os.getpid()}"
    common = ["--rm", "--network", "none", "--label", label, *builder.ulimits()]
    return podman("run", *common, *options, image, *args)


def remove_containers(*, leftovers: bool) -> None:
    """This run's containers, or (leftovers) those of runs whose process is gone."""
    listed = podman("ps", "--all", "--filter", f"label={LABEL}", "--format", "json").stdout
    for container in json.loads(listed or "[]"):
        owner = (container.get("Labels") or {}).get(LABEL, "")
        gone = not owner.isdigit() or not Path(f"/proc/{owner}").exists()
        if (gone and leftovers) or (owner == str(os.getpid()) and not leftovers):
            podman("rm", "--force", "--time", "0", container["Id"])


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    if (reason := builder.why_unavailable()) is not None:
        pytest.skip(f"cannot build the image here: {reason}")
    remove_containers(leftovers=True)
    try:
        result = builder.build(TAG)
    except builder.BuildError as exc:
        pytest.fail(f"image build: {exc}")
    print(result.summary())
    try:
        yield result.image
    finally:
        remove_containers(leftovers=False)
        builder.remove_image(TAG)


def test_version_runs_read_only_as_65532(image: str) -> None:
    out = run_in(image, "version", options=AS_DEPLOYMENTS)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"eipctl {eipctl.__version__}"


def test_the_image_runs_eipctl_as_65532_by_default(image: str) -> None:
    config = json.loads(podman("image", "inspect", image).stdout)[0]["Config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["eipctl"]
    ids = "import os; print(os.getuid(), os.getgid())"
    out = run_in(image, "-c", ids, options=["--read-only", "--entrypoint", "python3"])
    assert (out.returncode, out.stdout.strip()) == (0, "65532 65532"), out.stderr


def test_the_image_has_neither_the_sandbox_nor_the_emulator(image: str) -> None:
    probe = (
        "import importlib.util as u; print(u.find_spec('kubemu'), u.find_spec('eipctl.sandbox'))"
    )
    out = run_in(image, "-c", probe, options=["--read-only", "--entrypoint", "python3"])
    assert (out.returncode, out.stdout.strip()) == (0, "None None"), out.stderr
    out = run_in(image, "sandbox", options=AS_DEPLOYMENTS)
    assert out.returncode == 2
    assert "installed without the sandbox" in out.stderr, out.stderr


@pytest.mark.parametrize("process", PROCESSES)
def test_help_of_each_process(image: str, process: str) -> None:
    out = run_in(image, process, "--help", options=AS_DEPLOYMENTS)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: eipctl {process} "), out.stdout[:200]


def controller_in_container(bed: LocalBed, node: str, image: str, name: str) -> Process:
    """Node `node`'s controller with the bed's flags, run from the image as the DaemonSet
    runs it (deploy/workloads/controller.yaml)."""
    argv = bed.controllers[node].argv
    args = argv[argv.index("controller") :]
    kubeconfig = args[args.index("--kubeconfig") + 1]
    key = args[args.index("--liveness-key-file") + 1]
    inside = {kubeconfig: "/etc/eipctl/kubeconfig", key: "/etc/eipctl-liveness/key"}
    podman_run = [*builder.podman(), "run", "--rm", "--name", name]
    podman_run += ["--label", f"{LABEL}={os.getpid()}", *builder.ulimits()]
    podman_run += ["--network", f"ns:/run/netns/{bed.node(node).ns.name}"]
    podman_run += ["--cap-drop", "ALL", "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW"]
    podman_run += ["--user", "0:0", "--read-only", "--read-only-tmpfs=false"]
    podman_run += ["--security-opt", "no-new-privileges"]
    podman_run += [arg for path, to in inside.items() for arg in ("-v", f"{path}:{to}:ro")]
    return Process(
        f"controller-{node}", [*podman_run, image, *[inside.get(a, a) for a in args]], bed.run_dir
    )


def container_status(name: str) -> dict[str, str]:
    """The Uid, CapEff and NoNewPrivs lines of the container's process (its pid 1)."""
    pid = podman("inspect", "--format", "{{.State.Pid}}", name).stdout.strip()
    if not pid.isdigit() or pid == "0":
        return {}
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def test_the_controller_from_the_image_holds_ips_on_the_bed(image: str) -> None:
    if (reason := netns_unavailable()) is not None:
        pytest.skip(reason)
    with LocalBed(BedOptions(nodes=2, keep_logs=False)) as bed:
        node = bed.node_names[0]
        name = f"{LABEL}-{os.getpid()}-{node}"
        try:
            container = controller_in_container(bed, node, image, name)
            bed.controllers[node].kill()  # the bed's own controller of node-0 makes way
            bed.controllers[node] = container
            bed.start_controller(node)
            bed.wait_in_service(bed.node_names, timeout=60)

            status = container_status(name)
            assert status["Uid"].split()[:2] == ["0", "0"]
            assert int(status["CapEff"], 16) == NET_ADMIN_AND_NET_RAW, status["CapEff"]
            assert status["NoNewPrivs"] == "1"

            names = [f"image-{i}" for i in range(4)]
            create_services(bed, names)
            placed = wait_bound(bed, wait_for_ips(bed, names).values())
            held = [ip for ip, on in placed.items() if on == node]
            assert held, f"the scheduler placed nothing on {node}: {placed}"
            wait_answered_by(bed, placed)  # the client reaches each IP on its node
            for ip in held:
                assert bed.holders(ip) == [node]

            bed.reset(timeout=30)  # the Services go: the controller removes their addresses
            assert not any(n.external_addresses() for n in bed.network.nodes)

            podman("stop", "--time", "15", name)
            assert container.popen is not None
            assert wait_for(lambda: container.popen.poll() is not None, 30, what="podman stop")
            assert container.popen.returncode == 0, container.log_tail()
        except BaseException:
            bed.options.keep_logs = True
            print(bed.diagnostics())
            raise
        finally:
            podman("rm", "--force", "--time", "0", name)
