"""is_expired and the filter expression on their own (no DynamoDB needed)."""

import time
from decimal import Decimal

import pytest

from precise_ttl_read import FIVE_YEARS, HIDE_EXPIRED, is_expired

NOW = Decimal(1_800_000_000)


@pytest.mark.parametrize(
    "ttl, expired",
    [
        (NOW, True),
        (NOW - 1, True),
        (NOW - FIVE_YEARS, True),
        (NOW - FIVE_YEARS - Decimal("0.001"), False),
        (NOW + Decimal("0.001"), False),
        (NOW * 1000, False),
        (NOW - Decimal("0.5"), True),
    ],
)
def test_window_in_both_shapes(ttl, expired):
    assert is_expired({"ttl": ttl}, now=NOW) is expired
    assert is_expired({"ttl": {"N": str(ttl)}}, now=NOW) is expired


@pytest.mark.parametrize(
    "value",
    [None, {"S": str(NOW - 1)}, str(NOW - 1), {"NULL": True}, {"NS": ["1"]}, True, {"N": "x"}],
)
def test_anything_but_a_number_is_visible(value):
    assert not is_expired({"ttl": value}, now=NOW)


def test_numbers_are_compared_exactly():
    # 38 significant digits, one unit in the last place beyond now: not expired.
    just_after = "1800000000.0000000000000000000000000001"
    assert not is_expired({"ttl": {"N": just_after}}, now=NOW)
    assert is_expired({"ttl": {"N": "1799999999.9999999999999999999999999999"}}, now=NOW)


def test_missing_item_attribute_name_and_clock():
    assert not is_expired(None)
    assert not is_expired({}, now=NOW)
    assert is_expired({"expires_at": NOW - 1}, ttl_attribute="expires_at", now=NOW)
    assert not is_expired({"ttl": NOW - 1}, ttl_attribute="expires_at", now=NOW)
    assert is_expired({"ttl": 1}, now=2.5) and not is_expired({"ttl": 1})
    assert is_expired({"ttl": Decimal(time.time()) - 1})


def test_the_filter_is_the_spec_s():
    assert HIDE_EXPIRED == (
        "NOT (attribute_type(#precise_ttl_attr, :precise_ttl_number)"
        " AND #precise_ttl_attr BETWEEN :precise_ttl_oldest AND :precise_ttl_now)"
    )
