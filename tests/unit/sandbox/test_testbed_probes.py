"""The bed client's probe arithmetic (ProbeSeries): outages, the prober's stalls, cuts."""

from __future__ import annotations

from eipctl.sandbox.testbed.client import ProbeSeries, Sample


def series(*samples: tuple[float, str | None, bool], took: float = 0.01) -> ProbeSeries:
    s = ProbeSeries(["ip"], interval=0.02, timeout=0.5, started=0.0, stopped=1.0)
    s.samples = [Sample("ip", at, answer, took, reset) for at, answer, reset in samples]
    return s


def test_a_connection_reset_by_the_new_holder_is_a_cut_not_a_loss() -> None:
    """Opened to the old holder, its next packet reached the new one, which reset it: the IP
    answered all along (the 50-IP maintenance gaps, session 6)."""
    s = series(
        (0.00, "node-0", False),
        (0.04, None, True),
        (0.08, None, True),
        (0.12, "node-2", False),
        (1.00, "node-2", False),
    )
    assert s.longest_outage("ip") == 0.12
    assert s.longest_outage_outside_stalls("ip") == 0.12
    assert s.longest_loss("ip") == 0.0
    assert s.cut("ip") == 2


def test_a_probe_nobody_answered_is_a_loss_beside_the_cuts() -> None:
    s = series(
        (0.00, "node-0", False),
        (0.04, None, True),
        (0.08, None, False),  # timed out: no node answered
        (0.12, "node-2", False),
        (1.00, "node-2", False),
    )
    assert s.longest_loss("ip") == 0.12
    assert s.cut("ip") == 1


def test_a_failure_in_the_probers_own_pause_is_neither() -> None:
    s = ProbeSeries(["ip"], interval=0.02, timeout=0.5, started=0.0, stopped=1.0)
    s.samples = [
        Sample("ip", 0.00, "node-0", 0.01),
        Sample("ip", 0.01, None, 0.35),  # in flight while the prober paused 0.01 -> 0.30
        Sample("ip", 0.30, "node-0", 0.01),
        Sample("ip", 1.00, "node-0", 0.01),
    ]
    assert s.longest_outage("ip") == 0.30
    assert s.longest_outage_outside_stalls("ip", longer_than=0.1) == 0.0
    assert s.longest_loss("ip", longer_than=0.1) == 0.0
