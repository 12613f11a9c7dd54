"""Fixtures of the end-to-end scenarios: one test bed per session, reset before each scenario.

`bed` is the local bed (network namespaces, the emulator, real eipctl processes; needs root)
or, when `EIPCTL_E2E_KUBECONFIG` names a kubeconfig, a real cluster running eipctl. Scenarios
that need namespaces ask for `local_bed` and skip on a real cluster. When a scenario fails,
the tail of every process log is attached to its report.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from eipctl.sandbox.namespaces import why_unavailable
from eipctl.sandbox.testbed import BedOptions, LocalBed, RemoteCluster

REMOTE_KUBECONFIG = os.environ.get("EIPCTL_E2E_KUBECONFIG")
BED_NODES = 3
KEEP_LOGS = "EIPCTL_E2E_KEEP_LOGS"


@pytest.fixture(scope="session")
def _bed_session(request: pytest.FixtureRequest) -> Iterator[Any]:
    if REMOTE_KUBECONFIG:
        with RemoteCluster(REMOTE_KUBECONFIG) as cluster:
            yield cluster
        return
    if (reason := why_unavailable()) is not None:
        pytest.skip(reason)
    with LocalBed(BedOptions(nodes=BED_NODES)) as bed:
        yield bed
        # logs are kept when something failed (or EIPCTL_E2E_KEEP_LOGS is set)
        bed.options.keep_logs = bool(request.session.testsfailed or os.environ.get(KEEP_LOGS))


@pytest.fixture
def bed(_bed_session: Any) -> Iterator[Any]:
    """The shared bed, healed and emptied of the previous scenario's Services."""
    try:
        _bed_session.reset()
    except Exception as exc:
        raise RuntimeError(f"bed reset failed: {exc}\n{_bed_session.diagnostics()}") from exc
    yield _bed_session
    _bed_session.heal()


@pytest.fixture
def local_bed(bed: Any) -> LocalBed:
    if not bed.local:
        pytest.skip("needs the local bed (network namespaces), not a real cluster")
    assert isinstance(bed, LocalBed)
    return bed


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Scenarios on the local bed need namespaces: mark them `netns` (`-m "not netns"`)."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        on_local_bed = "local_bed" in names or ("bed" in names and not REMOTE_KUBECONFIG)
        if on_local_bed and item.path.name.startswith("test_scenarios_"):
            item.add_marker(pytest.mark.netns)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, Any]:
    report = yield
    if report.failed and report.when == "call":
        bed = getattr(item, "funcargs", {}).get("bed")
        if isinstance(bed, LocalBed | RemoteCluster):  # other modules have their own `bed`
            report.sections.append(("eipctl process logs", bed.diagnostics()))
    return report
