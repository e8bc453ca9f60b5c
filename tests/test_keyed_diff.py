"""``reconciliation.keyed_diff``: any two one-row-per-key tables, each key's status and deltas,
exact for decimals, null-safe, a repeated key refused rather than summed."""

from decimal import Decimal as D

import pytest

from reconciliation.keyed_diff import DuplicateKeys, keyed_diff, refusing_repeated_keys, status_counts

SCHEMA = "region string, meter string, kwh decimal(18,3), readings long"


def test_every_key_gets_one_status_and_exact_deltas(spark):
    truth = spark.createDataFrame(
        [
            ("eu", "m1", D("1.250"), 3),
            ("eu", "m2", D("0.001"), 1),
            ("us", "m1", None, 2),
            ("us", "m9", D("4.000"), 1),  # the stream never served it
        ],
        SCHEMA,
    )
    stream = spark.createDataFrame(
        [
            ("eu", "m1", D("1.250"), 3),  # equal
            ("eu", "m2", D("0.002"), 1),  # a thousandth apart: exact, so a mismatch
            ("us", "m1", None, 2),  # null equals null
            ("us", "m3", D("1.000"), 1),  # the truth has no such key
        ],
        SCHEMA,
    )
    diff = keyed_diff(truth, stream, ["region", "meter"], ["kwh", "readings"])
    rows = {(r["region"], r["meter"]): r for r in diff.collect()}
    assert {key: row["status"] for key, row in rows.items()} == {
        ("eu", "m1"): "match",
        ("eu", "m2"): "value_mismatch",
        ("us", "m1"): "match",
        ("us", "m3"): "extra_in_stream",
        ("us", "m9"): "missing_in_stream",
    }
    assert rows[("eu", "m2")]["delta_kwh"] == D("0.001") and rows[("eu", "m2")]["delta_readings"] == 0
    assert rows[("us", "m9")]["truth_kwh"] == D("4.000") and rows[("us", "m9")]["stream_kwh"] is None
    assert status_counts(diff) == {"match": 2, "value_mismatch": 1, "missing_in_stream": 1, "extra_in_stream": 1}


def test_a_key_held_twice_is_refused_not_summed(spark):
    truth = spark.createDataFrame([("eu", "m1", D("1.000"), 1)], SCHEMA)
    stream = spark.createDataFrame([("eu", "m1", D("0.500"), 1), ("eu", "m1", D("0.500"), 1)], SCHEMA)
    diff = keyed_diff(truth, stream, ["region", "meter"], ["kwh"])  # lazy: the counting job finds it
    with pytest.raises(DuplicateKeys, match=r"the stream holds key \{'region': 'eu', 'meter': 'm1'\} 2 times"):
        status_counts(diff)
    with pytest.raises(DuplicateKeys, match="the stream holds key"), refusing_repeated_keys():
        diff.where("status = 'match'").collect()


def test_a_key_with_a_null_field_held_twice_is_refused_though_it_matches_nothing(spark):
    twice = [(None, "m7", D("7.000"), 7), (None, "m7", D("7.000"), 7)]
    truth = spark.createDataFrame(twice, SCHEMA)
    stream = spark.createDataFrame(twice[:1], SCHEMA)
    with pytest.raises(DuplicateKeys, match=r"the truth holds key \{'region': None, 'meter': 'm7'\} 2 times"):
        status_counts(keyed_diff(truth, stream, ["region", "meter"], ["kwh", "readings"]))
