"""Per-window explanation columns and per-currency figures, from the diff and the explanations."""

from __future__ import annotations

from decimal import Decimal

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from reconciliation.attribution import REASONS
from reconciliation.diff import DIFF_STATUSES
from reconciliation.result import CurrencyReconciliation, Explanation, Lateness, WindowGap
from shared.aggregation import AMOUNT_TOTAL_TYPE, WINDOW_KEY

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


def _by_currency(windows: DataFrame) -> dict[str, dict]:
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
    return {r["currency"]: r.asDict() for r in rows}


class _Figures:
    """Typed access to one currency's aggregated row (absent row or null: zero)."""

    def __init__(self, row: dict | None) -> None:
        self.row = row or {}

    def count(self, name: str) -> int:
        value = self.row.get(name)
        return 0 if value is None else int(value)

    def money(self, name: str) -> Decimal:
        value = self.row.get(name)
        return Decimal(0) if value is None else Decimal(value)

    def explained(self) -> tuple[Explanation, ...]:
        return tuple(
            Explanation(reason, self.count(f"{reason}_events"), self.money(f"{reason}_money"))
            for reason in REASONS
            if self.count(f"{reason}_events") or self.money(f"{reason}_money")
        )


def currency_figures(windows: DataFrame, corrected_windows: DataFrame, late: DataFrame) -> list[CurrencyReconciliation]:
    """One ``CurrencyReconciliation`` per currency seen on either side or in the side output.

    ``windows``: ``explained_diff`` of the stream; ``corrected_windows``: the same for
    ``corrected_aggregates``; ``late``: the distinct late events in scope (``currency, amount,
    lateness_seconds``).
    """
    streamed, corrected = _by_currency(windows), _by_currency(corrected_windows)
    late_by_currency = _late_by_currency(late)
    out = []
    for currency in sorted(set(streamed) | set(corrected) | set(late_by_currency)):
        f, c = _Figures(streamed.get(currency)), _Figures(corrected.get(currency))
        late_amount, lateness = late_by_currency.get(currency, (Decimal(0), Lateness(0)))
        out.append(
            CurrencyReconciliation(
                currency=currency,
                windows_compared=f.count("compared"),
                status_counts={s: f.count(s) for s in DIFF_STATUSES},
                truth_events=f.count("truth_events"),
                stream_events=f.count("stream_events"),
                truth_amount=f.money("truth_amount"),
                stream_amount=f.money("stream_amount"),
                total_abs_error=f.money("abs_error"),
                max_rel_error=None if f.row.get("max_rel") is None else Decimal(f.row["max_rel"]),
                late_events=lateness.events,
                late_amount=late_amount,
                lateness=lateness,
                explained=f.explained(),
                unexplained_windows=f.count("unexplained_windows"),
                unexplained_events=f.count("unexplained_events"),
                unexplained_money=f.money("unexplained_money"),
                corrected_windows_compared=c.count("compared"),
                corrected_windows_matched=c.count("match"),
                corrected_explained=c.explained(),
                corrected_unexplained_events=c.count("unexplained_events"),
                corrected_unexplained_money=c.money("unexplained_money"),
            )
        )
    return out


_QUANTILES = {"p50": 0.5, "p99": 0.99, "p99_9": 0.999}


def _late_by_currency(late: DataFrame) -> dict[str, tuple[Decimal, Lateness]]:
    """Per currency: the late money and ``Lateness`` (nearest-rank quantiles, as ``Lateness.of``),
    computed by Spark: only the ranked values reach the driver, never the late events."""
    by_currency = Window.partitionBy("currency")
    ranked = late.select(
        "currency",
        "amount",
        "lateness_seconds",
        F.row_number().over(by_currency.orderBy("lateness_seconds")).alias("_rank"),
        F.count(F.lit(1)).over(by_currency).alias("_n"),
        F.sum("amount").over(by_currency).alias("_money"),
    )
    # nearest_rank: max(1, ceil(round(fraction * 10000) * n / 10000)), at most n
    rank = lambda fraction: F.expr(f"least(_n, greatest(1, ({int(round(fraction * 10_000))} * _n + 9999) div 10000))")
    wanted = F.col("_rank") == F.col("_n")
    for fraction in _QUANTILES.values():
        wanted = wanted | (F.col("_rank") == rank(fraction))
    rows = ranked.where(wanted).select(
        "currency", "lateness_seconds", "_rank", "_n", "_money", *[rank(f).alias(name) for name, f in _QUANTILES.items()]
    ).collect()
    out: dict[str, tuple[Decimal, Lateness]] = {}
    for currency in {r["currency"] for r in rows}:
        mine = [r for r in rows if r["currency"] == currency]
        at = {r["_rank"]: Decimal(r["lateness_seconds"]) for r in mine}
        first = mine[0]
        lateness = Lateness(
            events=first["_n"], **{name: at[first[name]] for name in _QUANTILES}, max=at[first["_n"]]
        )
        out[currency] = (Decimal(first["_money"]), lateness)
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
