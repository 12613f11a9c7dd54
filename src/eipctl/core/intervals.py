"""Sets of integers as sorted, disjoint, inclusive intervals.

Pools can be an IPv6 /64 (2**64 addresses), so nothing here ever enumerates a set: every
operation works on interval endpoints, and the in-use addresses are a sorted list searched
with bisect. Addresses are plain ints here; `core.pool` converts them to and from `ipaddress`.

A "span" is a tuple of intervals that is sorted, disjoint and non-adjacent (adjacent or
overlapping intervals are merged), as returned by `normalize`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence

Interval = tuple[int, int]
"""Inclusive bounds ``(first, last)`` with ``first <= last``."""

Span = tuple[Interval, ...]


def normalize(intervals: Iterable[Interval]) -> Span:
    """Sort and merge overlapping or touching intervals, so later walks can stop early."""
    merged: list[Interval] = []
    for first, last in sorted(intervals):
        if first > last:
            raise ValueError(f"empty interval ({first}, {last})")
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return tuple(merged)


def subtract(base: Span, cut: Span) -> Span:
    """Return ``base`` minus ``cut``; both spans, walked together in one pass."""
    result: list[Interval] = []
    j = 0
    for first, last in base:
        start = first
        while j < len(cut) and cut[j][1] < start:
            j += 1
        k = j
        while k < len(cut) and cut[k][0] <= last:
            if cut[k][0] > start:
                result.append((start, cut[k][0] - 1))
            start = max(start, cut[k][1] + 1)
            k += 1
        if start <= last:
            result.append((start, last))
    return tuple(result)


def intersect(a: Span, b: Span) -> Span:
    """Return the common part of two spans (two-pointer merge, no enumeration)."""
    result: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        first = max(a[i][0], b[j][0])
        last = min(a[i][1], b[j][1])
        if first <= last:
            result.append((first, last))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(result)


def total(span: Span) -> int:
    """Count the integers in a span."""
    return sum(last - first + 1 for first, last in span)


def member(span: Span, n: int) -> bool:
    """Tell whether ``n`` lies in the span, in O(log len(span))."""
    i = bisect_right(span, n, key=lambda iv: iv[0]) - 1
    return i >= 0 and span[i][1] >= n


def lowest_free(span: Span, used: Sequence[int]) -> int | None:
    """Return the lowest integer of ``span`` absent from ``used`` (sorted, distinct), or None.

    A block of consecutive used values is jumped in one binary search (`_run_end`), so a
    99%-full pool costs O(log n) per interval touched, not one step per used address.
    """
    for first, last in span:
        candidate = first
        i = bisect_left(used, first)
        if i < len(used) and used[i] == first:
            candidate = used[_run_end(used, i)] + 1
        if candidate <= last:
            return candidate
    return None


def _run_end(used: Sequence[int], start: int) -> int:
    """Index of the last element of the consecutive run ``used[start], used[start]+1, ...``.

    For sorted distinct ints, ``used[k] - k`` never decreases and stays equal exactly along a
    run of consecutive values, so the end of the run is found by binary search.
    """
    offset = used[start] - start
    lo, hi = start, len(used) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if used[mid] - mid == offset:
            lo = mid
        else:
            hi = mid - 1
    return lo
