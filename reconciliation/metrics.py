"""Per-window explanation columns and per-currency figures, from the diff and the explanations."""

from __future__ import annotations

from decimal import Decimal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reconciliation.attribution import REASONS
from reconciliation.diff import DIFF_STATUSES
from reconciliation.result import CurrencyReconciliation, Explanation, Lateness, WindowGap
from shared.aggregation import AMOUNT_TOTAL_TYPE
from shared.speed import WINDOW_KEY

__all__ = ["explained_diff", "currency_figures", "largest_gaps"]


def explained_diff(diff: DataFrame, explanations: DataFrame) -> DataFrame:
    """The diff with ``<reason>_events``/``<reason>_money`` per reason and the unexplained rest."""
    zero = F.lit(0).cast(AMOUNT_TOTAL_TYPE)
    pivot = explanations.groupBy(*WINDOW_KEY).agg(
        *[F.sum(F.when(F.col("reason") == r, F.col("events")).otherwise(0)).alias(f"{r}_events") for r in REASONS],
        *[F.sum(F.when(F.col("reason") == r, F.col("money")).otherwise(zero)).cast(AMOUNT_TOTAL_TYPE).alias(f"{r}_money") for r in REASONS],
    )
    joined = diff.join(pivot, list(WINDOW_KEY), "left")
    joined = joined.fillna(0, [f"{r}_events" for r in REASONS])
    for r in REASONS:
        joined = joined.withColumn(f"{r}_money", F.coalesce(F.col(f"{r}_money"), zero))
    explained_events = sum((F.col(f"{r}_events") for r in REASONS), F.lit(0))
    explained_money = sum((F.col(f"{r}_money") for r in REASONS), zero)
    return joined.withColumn("unexplained_events", F.col("count_delta") - explained_events).withColumn(
        "unexplained_money", (F.col("amount_delta") - explained_money).cast(AMOUNT_TOTAL_TYPE)
    )


def currency_figures(windows: DataFrame, corrected_diff: DataFrame, late: DataFrame) -> list[CurrencyReconciliation]:
    """One ``CurrencyReconciliation`` per currency seen on either side or in the side output.

    ``windows``: ``explained_diff`` rows; ``corrected_diff``: ``diff_windows(truth, corrected)``;
    ``late``: the distinct late events in scope (``currency, amount, lateness_seconds``).
    """
    zero = F.lit(0).cast(AMOUNT_TOTAL_TYPE)
    rel = F.abs(F.col("amount_delta")) / F.abs(F.col("truth_amount"))
    rows = windows.groupBy("currency").agg(
        F.count(F.lit(1)).alias("compared"),
        *[F.sum((F.col("status") == s).cast("long")).alias(s) for s in DIFF_STATUSES],
        F.sum(F.coalesce("truth_count", F.lit(0))).alias("truth_events"),
        F.sum(F.coalesce("stream_count", F.lit(0))).alias("stream_events"),
        F.sum(F.coalesce("truth_amount", zero)).alias("truth_amount"),
        F.sum(F.coalesce("stream_amount", zero)).alias("stream_amount"),
        F.sum(F.abs("amount_delta")).alias("abs_error"),
        F.max(F.when(F.col("truth_amount") != 0, rel)).alias("max_rel"),
        *[F.sum(f"{r}_events").alias(f"{r}_events") for r in REASONS],
        *[F.sum(f"{r}_money").alias(f"{r}_money") for r in REASONS],
        F.sum(((F.col("unexplained_events") != 0) | (F.col("unexplained_money") != 0)).cast("long")).alias("unexplained_windows"),
        F.sum(F.abs("unexplained_events")).alias("unexplained_events"),
        F.sum(F.abs("unexplained_money")).alias("unexplained_money"),
    ).collect()
    corrected = {
        r["currency"]: (r["compared"], r["matched"])
        for r in corrected_diff.groupBy("currency").agg(
            F.count(F.lit(1)).alias("compared"), F.sum((F.col("status") == "match").cast("long")).alias("matched")
        ).collect()
    }
    late_by_currency: dict[str, list] = {}
    for row in late.select("currency", "amount", "lateness_seconds").collect():
        late_by_currency.setdefault(row["currency"], []).append(row)
    by_currency = {r["currency"]: r for r in rows}
    out = []
    for currency in sorted(set(by_currency) | set(late_by_currency) | set(corrected)):
        r = by_currency.get(currency)
        lates = late_by_currency.get(currency, [])
        compared, matched = corrected.get(currency, (0, 0))
        money = lambda name: Decimal(0) if r is None or r[name] is None else Decimal(r[name])
        count = lambda name: 0 if r is None or r[name] is None else int(r[name])
        out.append(
            CurrencyReconciliation(
                currency=currency,
                windows_compared=count("compared"),
                status_counts={s: count(s) for s in DIFF_STATUSES},
                truth_events=count("truth_events"),
                stream_events=count("stream_events"),
                truth_amount=money("truth_amount"),
                stream_amount=money("stream_amount"),
                total_abs_error=money("abs_error"),
                max_rel_error=None if r is None or r["max_rel"] is None else Decimal(r["max_rel"]),
                late_events=len(lates),
                late_amount=sum((Decimal(x["amount"]) for x in lates), Decimal(0)),
                lateness=Lateness.of([Decimal(x["lateness_seconds"]) for x in lates]),
                explained=tuple(
                    Explanation(reason, count(f"{reason}_events"), money(f"{reason}_money"))
                    for reason in REASONS
                    if count(f"{reason}_events") or money(f"{reason}_money")
                ),
                unexplained_windows=count("unexplained_windows"),
                unexplained_events=count("unexplained_events"),
                unexplained_money=money("unexplained_money"),
                corrected_windows_compared=compared,
                corrected_windows_matched=matched,
            )
        )
    return out


def largest_gaps(windows: DataFrame, limit: int = 10) -> list[WindowGap]:
    """The ``limit`` differing windows with the largest absolute money delta (then count delta)."""
    rows = (
        windows.where(F.col("status") != "match")
        .orderBy(F.abs("amount_delta").desc(), F.abs("count_delta").desc(), *WINDOW_KEY)
        .limit(limit)
        .collect()
    )
    return [
        WindowGap(
            window_start=r["window_start"].isoformat(),
            window_end=r["window_end"].isoformat(),
            account_id=r["account_id"],
            currency=r["currency"],
            status=r["status"],
            truth_events=r["truth_count"],
            stream_events=r["stream_count"],
            truth_amount=r["truth_amount"],
            stream_amount=r["stream_amount"],
            events_delta=r["count_delta"],
            amount_delta=r["amount_delta"],
            explained=tuple(
                Explanation(reason, r[f"{reason}_events"], r[f"{reason}_money"])
                for reason in REASONS
                if r[f"{reason}_events"] or r[f"{reason}_money"]
            ),
            unexplained_events=r["unexplained_events"],
            unexplained_money=r["unexplained_money"],
        )
        for r in rows
    ]
