"""scheduler/claim_messages.py: the claim's Event and condition wording (pure)."""

from __future__ import annotations

from eipctl.core.placement import Decision, Reason
from eipctl.scheduler.claim_messages import (
    claim_event,
    no_live_node_message,
    placed_message,
    unplaceable_reason,
)

C = "198-51-100-1"


def test_every_reason_has_an_event_and_an_unplace_warns() -> None:
    for reason in Reason:
        assert claim_event(Decision(C, "n1", "n2", reason))[1]
    assert claim_event(Decision(C, "n1", "n2", Reason.NODE_DEAD)) == ("Warning", "NodeDead")
    unplace = Decision(C, "n1", "", Reason.NO_LOCAL_ENDPOINT, unplace=True)
    assert claim_event(unplace) == ("Warning", "NoLocalEndpoint")


def test_messages_say_where_and_why() -> None:
    assert placed_message(Decision(C, "", "n2", Reason.UNPLACED), 0.4) == "placed on n2"
    dead = placed_message(Decision(C, "n1", "n2", Reason.NODE_DEAD), 0.4)
    assert dead == "moved from n1 to n2: node n1 is dead (no liveness reply for 0.4s)"
    cordoned = placed_message(Decision(C, "n1", "n2", Reason.NODE_CORDONED), 0.4)
    assert cordoned == "moved from n1 to n2: n1 cordoned"
    moved = placed_message(Decision(C, "n1", "n2", Reason.NO_LOCAL_ENDPOINT), 0.4)
    assert moved == "moved from n1 to n2: no ready endpoint on n1 any more"
    off = placed_message(Decision(C, "n1", "", Reason.NO_LOCAL_ENDPOINT, unplace=True), 0.4)
    assert off == "taken off n1: no ready endpoint on n1 any more, and none on any live node"


def test_a_waiting_claim_says_which_wait() -> None:
    local = Decision(C, "", "", Reason.NO_LOCAL_ENDPOINT)
    assert unplaceable_reason(local) == "NoLocalEndpoint"
    assert "unplaced" in no_live_node_message(local)
    dead = Decision(C, "n1", "", Reason.NODE_DEAD)
    assert unplaceable_reason(dead) == "NoLiveNode"
    assert no_live_node_message(dead) == "no live eligible node to take it over from n1 (NodeDead)"
