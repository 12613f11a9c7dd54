"""Policy ``spread``'s choice of node for every claim a pass places, without a sort per claim.

`placement.plan` gives each claim that must move the least-loaded candidate, ties broken
round-robin after a cursor. Done one claim at a time (sort the candidates, find the least
load, list the ties) that is O(nodes) per claim: at 1,000 nodes a pass placing a few hundred
claims took ~0.3 s, every pass, while a burst of claims was created ([scale]).
`SpreadChoice` keeps one candidate set sorted once, with how many of its nodes carry each
load; the plan tells it each load it adds (`added`), so the least load is known at once and
the next tie after the cursor is usually a step or two away. Same answers as the
claim-at-a-time rule (a property test holds them equal).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping


def fewest(candidates: Iterable[str], load: Mapping[str, int], cursor: str) -> str:
    """The least-loaded candidate; among equals the first name after ``cursor`` (wrapping).
    The rule, one claim at a time (`SpreadChoice` answers the same, faster)."""
    ranked = sorted(candidates)
    least = min(load.get(n, 0) for n in ranked)
    ties = [n for n in ranked if load.get(n, 0) == least]
    return next((n for n in ties if n > cursor), ties[0])


class SpreadChoice:
    """`fewest` over one fixed, non-empty candidate set, kept current as loads grow."""

    __slots__ = ("least", "levels", "members", "ranked")

    def __init__(self, candidates: frozenset[str], load: Mapping[str, int]) -> None:
        self.members = candidates
        self.ranked = sorted(candidates)
        self.levels: Counter[int] = Counter(load.get(n, 0) for n in self.ranked)
        """load -> how many candidates carry it."""
        self.least = min(self.levels)

    def pick(self, load: Mapping[str, int], cursor: str) -> str:
        """`fewest(candidates, load, cursor)`, given that every load change since this was
        made went through `added`."""
        ranked, least = self.ranked, self.least
        start, count = bisect_right(ranked, cursor), len(ranked)
        for step in range(count):
            name = ranked[(start + step) % count]
            if load.get(name, 0) == least:
                return name
        raise AssertionError("a SpreadChoice missed a load change")

    def added(self, node: str, before: int) -> None:
        """``node``'s load went from ``before`` to ``before + 1``."""
        if node not in self.members:
            return
        levels = self.levels
        levels[before] -= 1
        levels[before + 1] += 1
        if not levels[before]:
            del levels[before]
            if before == self.least:
                self.least = before + 1
