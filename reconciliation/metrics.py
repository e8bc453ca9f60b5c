"""Per-window explanation columns and per-currency figures, from the compared windows and the
explanations.

``join_explanations`` and ``explained_windows`` add to ``compare_windows``'s rows, for the stream
and for the corrected stream, the events and money each reason explains and the unexplained
rest; everything a run reports or writes is then read from that one frame: ``diff_rows`` (what ``recon_diffs``
holds), ``currency_figures`` (one aggregation by currency for both diffs) and ``largest_gaps``.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from reconciliation.agreeing import TruthTotals
from reconciliation.attribution import REASONS
from reconciliation.diff import DIFF_COLUMNS, DIFF_STATUSES
from reconciliation.result import CurrencyReconciliation, Explanation, Lateness, WindowGap, rank_sql
from shared.aggregation import AMOUNT_TOTAL_TYPE, WINDOW_KEY

__all__ = [
    "EXPLAINED_COLUMNS",
    "join_explanations",
    "explained_windows",
    "diff_rows",
    "currency_figures",
    "largest_gaps",
]

# What ``recon_diffs`` holds per window, after ``DIFF_COLUMNS``.
EXPLAINED_COLUMNS = (
    *[f"{r}_events" for r in REASONS],
    *[f"{r}_money" for r in REASONS],
    "unexplained_events",
    "unexplained_money",
)


def _pivot(explanations: DataFrame) -> DataFrame:
    """Per window, ``<reason>_events``/``<reason>_money`` of the stream's diff and the same
    prefixed ``corrected_`` of the corrected stream's (``explanations``: ``explain_both``'s rows):
    one aggregation of both (they are small: the disputed windows only)."""
    zero = F.lit(0).cast(AMOUNT_TOTAL_TYPE)
    mine = lambda of, r: (F.col("corrected") == F.lit(of == "corrected_")) & (F.col("reason") == r)
    return explanations.groupBy(*WINDOW_KEY).agg(
        *[
            F.sum(F.when(mine(of, r), F.col("events")).otherwise(0)).alias(f"{of}{r}_events")
            for of in ("", "corrected_")
            for r in REASONS
        ],
        *[
            F.sum(F.when(mine(of, r), F.col("money")).otherwise(zero)).cast(AMOUNT_TOTAL_TYPE).alias(f"{of}{r}_money")
            for of in ("", "corrected_")
            for r in REASONS
        ],
    )


def join_explanations(compared: DataFrame, explanations: DataFrame) -> DataFrame:
    """``compare_windows``'s rows with the reasons' events and money of ``explanations``
    (``explain_both``: both diffs), the corrected stream's prefixed ``corrected_``, as they are:
    null where no reason explains anything (most windows), and ``_explained`` true where one
    does, for either diff.

    This is the frame worth caching: a null costs a bit in a cached column, a zero decimal
    costs its bytes. ``explained_windows`` reads it.
    """
    # ``compared`` is already partitioned by window: hashing the small side avoids sorting it.
    pivot = _pivot(explanations).withColumn("_explained", F.lit(True))
    return compared.join(pivot.hint("shuffle_hash"), list(WINDOW_KEY), "left")


def explained_windows(joined: DataFrame) -> DataFrame:
    """``join_explanations``'s rows with ``EXPLAINED_COLUMNS`` for the stream and the same
    prefixed ``corrected_`` for the corrected stream: the reasons' columns filled in (zero where
    nothing explains the window), and ``unexplained_*``, the delta minus what the reasons explain
    (null where the delta is). ``_explained``: a reason explains something in the window, for
    either diff.

    Most windows have no explanation (their reason columns are zero and the unexplained rest is
    the delta itself): only the disputed ones pay for the decimal arithmetic.
    """
    zero = F.lit(0).cast(AMOUNT_TOTAL_TYPE)
    explained = F.col("_explained").isNotNull()
    filled = {"_explained": explained}
    for of in ("", "corrected_"):
        for r in REASONS:
            filled[f"{of}{r}_events"] = F.coalesce(F.col(f"{of}{r}_events"), F.lit(0).cast("long"))
            filled[f"{of}{r}_money"] = F.coalesce(F.col(f"{of}{r}_money"), zero)
    rest = {}
    for of in ("", "corrected_"):
        events = sum((F.col(f"{of}{r}_events") for r in REASONS), F.lit(0))
        money = sum((F.col(f"{of}{r}_money") for r in REASONS), zero)
        count_delta, amount_delta = F.col(f"{of}count_delta"), F.col(f"{of}amount_delta")
        rest[f"{of}unexplained_events"] = F.when(explained, count_delta - events).otherwise(count_delta)
        rest[f"{of}unexplained_money"] = F.when(explained, (amount_delta - money).cast(AMOUNT_TOTAL_TYPE)).otherwise(
            amount_delta
        )
    return joined.withColumns(filled).withColumns(rest)


def diff_rows(windows: DataFrame) -> DataFrame:
    """``DIFF_COLUMNS`` + ``EXPLAINED_COLUMNS`` of the windows on the truth or the stream side
    that differ in either diff (a status other than ``match``, or a delta: tolerance can call
    a window with one a match), or that a reason explains. A window whose two rows are equal,
    that nothing folds into and nothing explains is counted, not listed."""
    differs = (F.col("status") != "match") | F.col("_explained")
    for delta in ("count_delta", "amount_delta", "corrected_count_delta", "corrected_amount_delta"):
        differs = differs | F.coalesce(F.col(delta) != 0, F.lit(False))
    return windows.where((F.col("_in_truth") | F.col("_in_stream")) & differs).select(*DIFF_COLUMNS, *EXPLAINED_COLUMNS)


def _figures(of: str, compared: Column) -> list[Column]:
    """Per-currency aggregates of the diff against one side, over the windows it compares.

    Sums skip what is zero for the windows that match and that no reason explains (nulls are
    not added), so the decimal arithmetic grows with the disputed windows, not with all of them.
    """
    on = lambda column: F.when(compared, column)
    zero = F.lit(0).cast(AMOUNT_TOTAL_TYPE)
    col = lambda name: F.col(f"{of}{name}")
    nonzero = lambda column: F.when(column != 0, column)
    differs = col("amount_delta") != 0
    rel = F.abs(col("amount_delta")) / F.abs(F.col("truth_amount"))
    side = "stream" if not of else "corrected"
    explained = compared & F.col("_explained")
    return [
        F.count(on(F.lit(1))).alias(f"{of}compared"),
        *[F.sum((col("status") == s).cast("long")).alias(f"{of}{s}") for s in DIFF_STATUSES],
        F.sum(on(F.coalesce("truth_count", F.lit(0)))).alias(f"{of}truth_events"),
        F.sum(on(F.coalesce(f"{side}_count", F.lit(0)))).alias(f"{of}stream_events"),
        F.sum(on(F.coalesce("truth_amount", zero))).alias(f"{of}truth_amount"),
        F.sum(on(F.coalesce(f"{side}_amount", zero))).alias(f"{of}stream_amount"),
        F.sum(F.when(differs, F.abs(col("amount_delta")))).alias(f"{of}abs_error"),
        # the largest relative error: over the differing windows; 0 when only equal ones have money
        F.max(F.when((F.col("truth_amount") != 0) & differs, rel)).alias(f"{of}max_rel"),
        F.max((F.col("truth_amount") != 0) & ~differs).alias(f"{of}exact_with_money"),
        *[F.sum(F.when(explained, col(f"{r}_events"))).alias(f"{of}{r}_events") for r in REASONS],
        *[F.sum(F.when(explained, nonzero(col(f"{r}_money")))).alias(f"{of}{r}_money") for r in REASONS],
        F.sum(((col("unexplained_events") != 0) | (col("unexplained_money") != 0)).cast("long")).alias(
            f"{of}unexplained_windows"
        ),
        F.sum(F.abs(nonzero(col("unexplained_events")))).alias(f"{of}unexplained_events"),
        F.sum(F.abs(nonzero(col("unexplained_money")))).alias(f"{of}unexplained_money"),
    ]


def _by_currency(windows: DataFrame, changed: Column) -> dict[str, dict]:
    """Both diffs' aggregates and the number of ``changed`` windows, per currency: one job."""
    in_truth = F.col("_in_truth")
    rows = (
        windows.groupBy("currency")
        .agg(
            *_figures("", in_truth | F.col("_in_stream")),
            *_figures("corrected_", in_truth | F.col("_in_corrected")),
            F.sum(changed.cast("long")).alias("corrections"),
            F.sum(in_truth.cast("long")).alias("truth_windows"),
            F.sum((in_truth & (F.col("truth_amount") != 0)).cast("long")).alias("truth_windows_with_money"),
        )
        .collect()
    )
    return {r["currency"]: r.asDict() for r in rows}


class _Figures:
    """Typed access to one currency's aggregated row, for the diff against one side (``of``:
    ``""`` the stream, ``"corrected_"`` the corrected stream; absent row or null: zero)."""

    def __init__(self, row: dict | None, of: str = "") -> None:
        self.row, self.of = row or {}, of

    def count(self, name: str) -> int:
        value = self.row.get(self.of + name)
        return 0 if value is None else int(value)

    def money(self, name: str) -> Decimal:
        value = self.row.get(self.of + name)
        return Decimal(0) if value is None else Decimal(value)

    def max_rel(self) -> Decimal | None:
        """The largest relative error; 0 when every window with money matches; None without any."""
        value = self.row.get(self.of + "max_rel")
        if value is not None:
            return Decimal(value)
        return Decimal(0) if self.row.get(self.of + "exact_with_money") else None

    def explained(self) -> tuple[Explanation, ...]:
        return tuple(
            Explanation(reason, self.count(f"{reason}_events"), self.money(f"{reason}_money"))
            for reason in REASONS
            if self.count(f"{reason}_events") or self.money(f"{reason}_money")
        )


def _add_agreeing(by_currency: dict[str, dict], truth: Mapping[str, TruthTotals]) -> None:
    """Count into ``by_currency`` the windows known to match in both diffs: per currency, every
    truth row (``truth``) less the disputed ones ``_by_currency`` counted; each equals the
    stream's row and the corrected one."""
    for currency, total in truth.items():
        row = by_currency.setdefault(currency, {})
        windows = total.windows - (row.get("truth_windows") or 0)
        events = total.events - (row.get("truth_events") or 0)
        amount = total.amount - (row.get("truth_amount") or 0)
        with_money = total.with_money - (row.get("truth_windows_with_money") or 0) > 0
        for of in ("", "corrected_"):
            added = {"compared": windows, "match": windows, "truth_events": events, "stream_events": events}
            added.update({"truth_amount": amount, "stream_amount": amount})
            for name, value in added.items():
                row[of + name] = (row.get(of + name) or 0) + value
            row[f"{of}exact_with_money"] = bool(row.get(f"{of}exact_with_money")) or with_money


def currency_figures(
    windows: DataFrame,
    late: DataFrame,
    changed: Column | None = None,
    agreeing: Mapping[str, TruthTotals] | None = None,
) -> tuple[list[CurrencyReconciliation], int]:
    """One ``CurrencyReconciliation`` per currency seen on any side or in the side output, and
    the number of windows ``changed`` is true of (counted in the same pass; none without it).

    ``windows``: ``explained_windows``; ``late``: the distinct late events in scope
    (``currency, amount, lateness_seconds``); ``agreeing``: with windows left out of ``windows``
    because they match in both diffs and no reason explains them (``reconciliation.agreeing``),
    every truth row's totals per currency (``Agreeing.truth_totals``): the windows left out are
    counted in as those less the truth rows ``windows`` holds.
    """
    by_currency = _by_currency(windows, F.lit(False) if changed is None else changed)
    if agreeing is not None:
        _add_agreeing(by_currency, agreeing)
    late_by_currency = _late_by_currency(late)
    out = []
    for currency in sorted(set(by_currency) | set(late_by_currency)):
        row = by_currency.get(currency)
        f, c = _Figures(row), _Figures(row, "corrected_")
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
                max_rel_error=f.max_rel(),
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
    return out, sum(_Figures(row).count("corrections") for row in by_currency.values())


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
    rank = lambda fraction: F.expr(rank_sql("_n", fraction))  # nearest_rank's rank
    wanted = F.col("_rank") == F.col("_n")
    for fraction in _QUANTILES.values():
        wanted = wanted | (F.col("_rank") == rank(fraction))
    rows = (
        ranked.where(wanted)
        .select(
            "currency",
            "lateness_seconds",
            "_rank",
            "_n",
            "_money",
            *[rank(f).alias(name) for name, f in _QUANTILES.items()],
        )
        .collect()
    )
    out: dict[str, tuple[Decimal, Lateness]] = {}
    for currency in {r["currency"] for r in rows}:
        mine = [r for r in rows if r["currency"] == currency]
        at = {r["_rank"]: Decimal(r["lateness_seconds"]) for r in mine}
        first = mine[0]
        lateness = Lateness(events=first["_n"], **{name: at[first[name]] for name in _QUANTILES}, max=at[first["_n"]])
        out[currency] = (Decimal(first["_money"]), lateness)
    return out


def largest_gaps(windows: DataFrame, limit: int = 10) -> list[WindowGap]:
    """The ``limit`` differing windows with the largest absolute money delta (then count delta)."""
    rows = (
        windows.where(F.col("status") != "match")  # null (a window only the corrected stream has): not shown
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
