import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.runtime.values import (
    BindAddress,
    int_range,
    one_of,
    parse_bind_address,
    parse_bool,
    parse_duration,
    positive_duration,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("2s", 2.0), ("1m30s", 90.0), ("1.5s", 1.5), ("3", 3.0), ("1h", 3600.0)],
)
def test_durations_parse_to_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["10x", "", "s", "1s2", "ms5", "-1s", "-3", "1 s"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_zero_is_a_duration_but_not_a_positive_one() -> None:
    assert parse_duration("0s") == 0
    with pytest.raises(ValueError, match="greater than zero"):
        positive_duration("0s")


@given(st.integers(min_value=0, max_value=10**6))
def test_milliseconds_round_trip(ms: int) -> None:
    assert parse_duration(f"{ms}ms") == pytest.approx(ms / 1000)


def test_booleans() -> None:
    assert parse_bool("True") is True
    assert parse_bool("off") is False
    with pytest.raises(ValueError, match="invalid boolean"):
        parse_bool("maybe")


def test_int_range_names_the_bound() -> None:
    parse = int_range(1, 128)
    assert parse("32") == 32
    with pytest.raises(ValueError, match="between 1 and 128"):
        parse("200")
    with pytest.raises(ValueError, match="invalid integer"):
        parse("x")


def test_one_of_lists_the_choices() -> None:
    with pytest.raises(ValueError, match="spread, single"):
        one_of(("spread", "single"))("round")


def test_bind_addresses() -> None:
    assert parse_bind_address(":8080") == BindAddress("0.0.0.0", 8080)
    assert parse_bind_address("127.0.0.1:0") == BindAddress("127.0.0.1", 0)
    assert parse_bind_address("127.0.0.1:0").enabled
    assert not parse_bind_address("0").enabled
    assert parse_bind_address("[::1]:9000") == BindAddress("::1", 9000)
    with pytest.raises(ValueError):
        parse_bind_address("localhost")
    with pytest.raises(ValueError):
        parse_bind_address(":70000")
