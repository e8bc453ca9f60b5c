"""``reconciliation.range_diff``: the same statuses and deltas as the full join (``keyed_diff``),
joining only the keys whose checksums differ."""

import random
from decimal import Decimal as D

import pytest
from pyspark.sql import functions as F

from reconciliation.keyed_diff import DuplicateKeys, keyed_diff, status_counts
from reconciliation.range_diff import range_diff
from reconciliation.tolerance import Tolerance

SCHEMA = "region string, meter string, kwh decimal(38,6), readings long"
KEYS, MEASURES = ["region", "meter"], ["kwh", "readings"]
TWELVE = [("eu", f"m{i}", D(f"{i}.250000"), i) for i in range(12)]


def by_key(frame):
    return {(r["region"], r["meter"]): r.asDict() for r in frame.collect()}


def same_as_full_join(truth, stream, tolerance=None, **options):
    """The range diff (``options``: ``range_diff``'s), after checking it against the full join:
    its rows are the join's rows of the same keys, every key it did not join is a match there,
    the counts are the join's, and ``rows()`` is the join's every row, value for value and type
    for type."""
    ranged = range_diff(truth, stream, KEYS, MEASURES, tolerance, **options)
    full_diff = keyed_diff(truth, stream, KEYS, MEASURES, tolerance)
    full = by_key(full_diff)
    joined = by_key(ranged.differing)
    assert {k: full[k] for k in joined} == joined
    assert all(row["status"] == "match" for k, row in full.items() if k not in joined)
    assert ranged.status_counts() == status_counts(full_diff)
    assert ranged.matched_unjoined + len(joined) == len(full)
    every = ranged.rows()
    assert [(f.name, f.dataType) for f in every.schema] == [(f.name, f.dataType) for f in full_diff.schema]
    assert sorted(every.collect(), key=repr) == sorted(full_diff.collect(), key=repr)
    return ranged, joined


def test_equal_tables_join_nothing(spark):
    truth = spark.createDataFrame(TWELVE, SCHEMA)
    ranged, joined = same_as_full_join(truth, spark.createDataFrame(TWELVE, SCHEMA))
    assert ranged.keys_joined == 0 and joined == {}
    assert ranged.status_counts() == {"match": 12, "value_mismatch": 0, "missing_in_stream": 0, "extra_in_stream": 0}


def test_a_difference_among_many_equal_rows_joins_that_key_only(spark):
    truth = spark.createDataFrame(TWELVE, SCHEMA)
    changed = [*TWELVE[:5], ("eu", "m5", D("5.250001"), 5), *TWELVE[6:]]  # the last digit
    ranged, joined = same_as_full_join(truth, spark.createDataFrame(changed, SCHEMA))
    assert ranged.keys_joined == 1 and list(joined) == [("eu", "m5")] and ranged.matched_unjoined == 11
    assert joined[("eu", "m5")]["status"] == "value_mismatch"
    assert joined[("eu", "m5")]["delta_kwh"] == D("0.000001") and joined[("eu", "m5")]["delta_readings"] == 0
    assert ranged.status_counts() == {"match": 11, "value_mismatch": 1, "missing_in_stream": 0, "extra_in_stream": 0}


def test_a_difference_in_every_key_joins_every_key(spark):
    truth = spark.createDataFrame(TWELVE, SCHEMA)
    changed = [(r, m, kwh, n + 1) for r, m, kwh, n in TWELVE]
    ranged, joined = same_as_full_join(truth, spark.createDataFrame(changed, SCHEMA))
    assert ranged.keys_joined == 12 and ranged.matched_unjoined == 0
    assert {row["delta_readings"] for row in joined.values()} == {1}
    assert ranged.status_counts()["value_mismatch"] == 12


def test_keys_on_one_side_only_and_nulls(spark):
    truth = spark.createDataFrame(
        [
            ("eu", "m1", D("1.000000"), 1),
            ("eu", "m2", None, 2),  # null equals null
            ("us", "m9", D("4.000000"), 1),  # the stream never served it
            (None, "m7", D("7.000000"), 7),  # a null key matches nothing, not even itself
        ],
        SCHEMA,
    )
    stream = spark.createDataFrame(
        [
            ("eu", "m1", D("1.000000"), 1),
            ("eu", "m2", None, 2),
            ("us", "m3", D("1.000000"), 1),  # the truth has no such key
            (None, "m7", D("7.000000"), 7),
        ],
        SCHEMA,
    )
    ranged, joined = same_as_full_join(truth, stream)
    assert ranged.status_counts() == {"match": 2, "value_mismatch": 0, "missing_in_stream": 2, "extra_in_stream": 2}
    assert joined[("us", "m9")]["truth_kwh"] == D("4.000000") and joined[("us", "m9")]["stream_kwh"] is None


def test_a_null_measure_against_a_value_and_a_tolerance(spark):
    truth = spark.createDataFrame([("eu", "m1", None, 1), ("eu", "m2", D("100.000000"), 1)], SCHEMA)
    stream = spark.createDataFrame([("eu", "m1", D("0.000000"), 1), ("eu", "m2", D("100.010000"), 1)], SCHEMA)
    ranged, joined = same_as_full_join(truth, stream, tolerance=Tolerance(D("0.01")))
    assert joined[("eu", "m1")]["status"] == "value_mismatch"  # null is not zero
    assert joined[("eu", "m2")]["status"] == "match"  # within the tolerance, joined all the same
    assert joined[("eu", "m2")]["delta_kwh"] == D("0.010000")


def test_a_key_held_twice_is_refused_even_where_both_sides_hold_it_twice(spark):
    twice = [("eu", "m1", D("0.500000"), 1), ("eu", "m1", D("0.500000"), 1)]
    with pytest.raises(DuplicateKeys, match=r"the truth holds key \{'region': 'eu', 'meter': 'm1'\} 2 times"):
        range_diff(spark.createDataFrame(twice, SCHEMA), spark.createDataFrame(twice, SCHEMA), KEYS, MEASURES)


def test_a_key_held_twice_is_refused_where_the_other_side_holds_it_once_and_equal(spark):
    once = [("eu", "m1", D("0.500000"), 1)]
    # both of the truth's rows pair the stream's one and agree: refused all the same
    with pytest.raises(DuplicateKeys, match=r"the truth holds key \{'region': 'eu', 'meter': 'm1'\} 2 times"):
        range_diff(
            spark.createDataFrame(once * 2 + TWELVE[2:], SCHEMA),
            spark.createDataFrame(once + TWELVE[2:], SCHEMA),
            KEYS,
            MEASURES,
        )


def test_a_key_held_twice_by_the_stream_alone_is_refused(spark):
    twice = [("us", "m1", D("0.500000"), 1)] * 2  # the truth has no such key
    with pytest.raises(DuplicateKeys, match=r"the stream holds key \{'region': 'us', 'meter': 'm1'\} 2 times"):
        range_diff(spark.createDataFrame(TWELVE, SCHEMA), spark.createDataFrame(TWELVE + twice, SCHEMA), KEYS, MEASURES)


def test_keys_sharing_a_hash_across_the_sides_are_all_joined(spark):
    # every key one hash: the truth's rows pair the stream's many times over, with no key repeated
    one_hash = lambda keys: F.lit(7).cast("long")  # noqa: E731
    truth = spark.createDataFrame(TWELVE, SCHEMA)
    changed = [*TWELVE[:5], ("eu", "m5", D("5.250001"), 5), *TWELVE[6:]]
    ranged, joined = same_as_full_join(truth, spark.createDataFrame(changed, SCHEMA), hash_keys=one_hash)
    assert ranged.keys_joined == 1 and ranged.matched_unjoined == 0 and len(joined) == 12
    assert ranged.status_counts() == {"match": 11, "value_mismatch": 1, "missing_in_stream": 0, "extra_in_stream": 0}


def test_an_empty_side(spark):
    rows = spark.createDataFrame(TWELVE[:3], SCHEMA)
    empty = spark.createDataFrame([], SCHEMA)
    ranged, _ = same_as_full_join(empty, rows)
    assert ranged.status_counts() == {"match": 0, "value_mismatch": 0, "missing_in_stream": 0, "extra_in_stream": 3}
    ranged, _ = same_as_full_join(rows, rows.where("false"))
    assert ranged.status_counts()["missing_in_stream"] == 3
    ranged, _ = same_as_full_join(empty, empty)
    assert sum(ranged.status_counts().values()) == 0


def test_decimals_of_another_scale_are_joined_and_compared_exactly(spark):
    truth = spark.createDataFrame(TWELVE, SCHEMA)
    stream = spark.createDataFrame(TWELVE, "region string, meter string, kwh decimal(20,3), readings long")
    ranged, joined = same_as_full_join(truth, stream)  # the hashes differ, the values do not
    assert ranged.keys_joined == 12 and {row["status"] for row in joined.values()} == {"match"}


@pytest.mark.parametrize("seed", range(4))
def test_random_pairs_agree_with_the_full_join(spark, seed):
    rng = random.Random(seed)
    values = lambda: (rng.choice([None, D(rng.randint(0, 3)) / 1000]), rng.choice([None, rng.randint(0, 2)]))
    keys = [(rng.choice(["eu", "us", None]), f"m{i}") for i in range(40)]
    truth = [(*k, *values()) for k in keys if rng.random() < 0.9]
    stream = [(r, m, *(values() if rng.random() < 0.1 else (kwh, n))) for r, m, kwh, n in truth if rng.random() < 0.9]
    stream += [(*k, *values()) for k in keys if rng.random() < 0.05 and k not in {(r, m) for r, m, *_ in truth}]
    same_as_full_join(spark.createDataFrame(truth, SCHEMA), spark.createDataFrame(stream, SCHEMA))
