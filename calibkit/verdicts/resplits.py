"""How much of a calibration table is more than noise: re-splits, paired comparisons, verdicts.

One validation/test split of a few hundred examples gives one number per cell, and nobody can
tell whether WTS's CECE below TS's is a finding or luck. The calibrators are cheap to refit, so
:func:`resplit_comparison` pools the validation and test predictions, draws ``R`` random
re-splits of the pooled examples into a calibration part and an evaluation part of the original
sizes, fits every calibrator on the first and evaluates every metric on the second (no
retraining), and keeps each metric's ``R`` values. The papers report means over several runs;
so does the table: mean ± standard deviation over the re-splits, and the 2.5 and 97.5
percentiles as the cell's 95% interval.

A comparison of two methods is paired: both are evaluated on the same re-split, and
:meth:`Resplits.paired` counts the share of re-splits in which one is better. A difference
*holds at 95%* when one side is better in at least 95% of the re-splits (19 of 20). Re-splits
overlap, so this is a statement about the stability of the conclusion under the choice of the
split, not a test on independent samples; it is the check the papers' "mean over runs" leaves
out. :func:`verdicts` applies it to the seed papers' claims.

Token classification: the examples re-split are sequences (all tokens of a tweet stay
together), since tokens of one sentence are not independent.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calibkit.metrics.sampling import SAMPLING_UNSET, SamplingSettings, resolve_sampling
from calibkit.metrics.settings import DEFAULTS
from calibkit.plots import tables
from calibkit.verdicts.claims import HOLD_SHARE, what_this_means
from calibkit.verdicts.comparison import (
    HIGHER_IS_BETTER,
    METHOD_LABELS,
    METHODS,
    SIGNED,
    TABLE_METRICS,
    compare_calibrators,
)
from calibkit.verdicts.sequences import labelled_rows

__all__ = ["HOLD_SHARE", "Resplits", "claim_measurements", "resplit_comparison", "summary_text", "verdicts"]


@dataclass
class Resplits:
    """Every metric of every method on ``R`` re-splits of the pooled validation and test data.

    Parameters
    ----------
    methods : list of str
        The methods compared (``"uncalibrated"`` and calibrator names).
    metrics : list of str
        The metrics, the columns of ``values``.
    values : dict of str to ndarray (R, len(metrics))
        Per method, the metric values of each re-split (NaN where the method could not be fitted).
    per_class : dict of str to ndarray (R, K)
        Per method, each class's ECE on each re-split's evaluation part.
    support : ndarray (K,)
        Labelled predictions of each class in the pooled data.
    class_names : list of str
        One name per class.
    resplits : int
        ``R``.
    n_calibration, n_evaluation : int
        Examples in the calibration and evaluation parts of each re-split.
    seed : int
        The seed of the re-splits.
    unit : {"rows", "sequences"}, default "rows"
        What was re-split (the tokens of a sequence stay together).
    errors : dict of str to int, optional
        Method -> re-splits in which it could not be fitted.
    error_messages : dict of str to str, optional
        Method -> the first such error.
    measurements : dict of str to ndarray (R,), optional
        Per re-split, what the claims of :mod:`calibkit.verdicts.claims` read besides the table (see
        :func:`claim_measurements`).
    """

    methods: list[str]
    metrics: list[str]
    values: dict[str, np.ndarray]
    per_class: dict[str, np.ndarray]
    support: np.ndarray
    class_names: list[str]
    resplits: int
    n_calibration: int
    n_evaluation: int
    seed: int
    unit: str = "rows"
    errors: dict[str, int] = field(default_factory=dict)
    error_messages: dict[str, str] = field(default_factory=dict)
    measurements: dict[str, np.ndarray] = field(default_factory=dict)

    def column(self, method: str, metric: str) -> np.ndarray:
        """Return one metric's values of one method over the re-splits.

        Parameters
        ----------
        method : str
            One of ``methods``.
        metric : str
            One of ``metrics``.

        Returns
        -------
        ndarray of shape (R,)
            NaN where the method could not be fitted.
        """
        return self.values[method][:, self.metrics.index(metric)]

    def summary(self, method: str, metric: str) -> dict[str, float]:
        """Summarise one cell: mean, standard deviation (ddof 1) and 2.5/97.5 percentiles over the re-splits.

        Parameters
        ----------
        method : str
            One of ``methods``.
        metric : str
            One of ``metrics``.

        Returns
        -------
        dict of str to float
            ``mean``, ``std``, ``low``, ``high`` and ``n`` (re-splits with a value).
        """
        v = self.column(method, metric)
        v = v[~np.isnan(v)]
        if v.size == 0:
            return {"mean": math.nan, "std": math.nan, "low": math.nan, "high": math.nan, "n": 0}
        low, high = np.percentile(v, [2.5, 97.5])
        std = float(v.std(ddof=1)) if v.size > 1 else math.nan
        return {"mean": float(v.mean()), "std": std, "low": float(low), "high": float(high), "n": int(v.size)}

    def paired(self, method: str, reference: str, metric: str) -> dict[str, float]:
        """Compare ``method`` against ``reference`` on the same re-splits.

        Parameters
        ----------
        method, reference : str
            Two of ``methods``.
        metric : str
            One of ``metrics``.

        Returns
        -------
        dict of str to float
            ``better``/``worse``: the share of re-splits in which ``method`` is better/worse (lower;
            higher for accuracy and macro-F1; closer to 0 for the signed ECD and ESCE); ties count as
            neither. ``difference``: mean of ``method - reference``, with its 2.5/97.5 percentiles
            ``low`` and ``high``. ``n``: the re-splits where both have a value.
        """
        a, b = self.column(method, metric), self.column(reference, metric)
        both = ~(np.isnan(a) | np.isnan(b))
        a, b = a[both], b[both]
        if a.size == 0:
            nan = math.nan
            return {"better": nan, "worse": nan, "difference": nan, "low": nan, "high": nan, "n": 0}
        score_a, score_b = (np.abs(a), np.abs(b)) if metric in SIGNED else (a, b)
        if metric in HIGHER_IS_BETTER:
            score_a, score_b = -score_a, -score_b
        low, high = np.percentile(a - b, [2.5, 97.5])
        return {
            "better": float(np.mean(score_a < score_b)),
            "worse": float(np.mean(score_a > score_b)),
            "difference": float(np.mean(a - b)),
            "low": float(low),
            "high": float(high),
            "n": int(a.size),
        }


def resplit_comparison(
    val_logits: Any,
    val_labels: Any,
    test_logits: Any,
    test_labels: Any,
    *,
    resplits: int = SAMPLING_UNSET.resplits,
    methods: tuple[str, ...] = METHODS,
    class_names: list[str] | None = None,
    ignore_index: int = DEFAULTS.ignore_index,
    n_bins: int = DEFAULTS.n_bins,
    rbece_bins: int = DEFAULTS.rbece_bins,
    theta: float = DEFAULTS.theta,
    fce_variant: str = DEFAULTS.fce_variant,
    seed: int = SAMPLING_UNSET.seed,
    sampling: SamplingSettings | None = None,
) -> Resplits:
    """Fit on one part, evaluate on the other, over ``resplits`` random re-splits of the pooled data.

    Parameters
    ----------
    val_logits, val_labels, test_logits, test_labels : array-like
        ``(N, K)`` logits with ``(N,)`` labels, or ``(N, L, K)`` with ``(N, L)`` (tokens;
        ``ignore_index`` marks padding). Validation and test may differ in ``L``.
    resplits : int, default 20
        Number of re-splits ``R``. Each keeps the original sizes: as many examples calibrate
        as the validation set had, the rest evaluate.
    methods, class_names, ignore_index, n_bins, rbece_bins, theta, fce_variant
        As in :func:`calibkit.verdicts.comparison.compare_calibrators`.
    seed : int, default 0
    sampling : SamplingSettings, optional
        ``resplits`` and ``seed`` as one object (:class:`calibkit.metrics.sampling.SamplingSettings`),
        instead of the keywords.

    Returns
    -------
    Resplits
    """
    sampling = resolve_sampling(sampling, resplits=resplits, seed=seed)
    resplits, seed = sampling.require("resplits"), sampling.seed
    z_val, y_val, g_val, n_val = labelled_rows(val_logits, val_labels, ignore_index)
    z_test, y_test, g_test, n_test = labelled_rows(test_logits, test_labels, ignore_index)
    if z_val.shape[1] != z_test.shape[1]:
        raise ValueError(f"validation logits have {z_val.shape[1]} classes, test logits {z_test.shape[1]}")
    z = np.concatenate([z_val, z_test])
    y = np.concatenate([y_val, y_test])
    example = np.concatenate([g_val, g_test + n_val])
    examples = n_val + n_test
    if n_val < 1 or n_test < 1:
        raise ValueError("need at least one validation and one test example to re-split")
    k = z.shape[1]
    names = list(class_names) if class_names else [str(i) for i in range(k)]
    metrics = list(TABLE_METRICS)
    values = {m: np.full((resplits, len(metrics)), np.nan) for m in methods}
    per_class = {m: np.full((resplits, k), np.nan) for m in methods}
    errors: dict[str, int] = {}
    messages: dict[str, str] = {}
    measurements: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(seed)
    settings = {"n_bins": n_bins, "rbece_bins": rbece_bins, "theta": theta, "fce_variant": fce_variant}
    for r in range(resplits):  # a loop over re-splits; each fit and metric inside is vectorised
        calibrate = np.zeros(examples, dtype=bool)
        calibrate[rng.permutation(examples)[:n_val]] = True
        part = calibrate[example]
        if part.all() or not part.any():
            continue  # every labelled row fell on one side (tiny data): nothing to evaluate
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            comparison = compare_calibrators(
                z[part], y[part], z[~part], y[~part], methods=methods, class_names=names, ignore_index=ignore_index,
                sets=False, smooth=False, **settings,
            )  # fmt: skip
        for method in methods:
            if method in comparison.errors:
                errors[method] = errors.get(method, 0) + 1
                messages.setdefault(method, comparison.errors[method])
                continue
            row = comparison.rows[method]
            values[method][r] = [row.get(m, math.nan) for m in metrics]
            per_class[method][r] = comparison.per_class[method]
        for key, value in claim_measurements(comparison, z[part], y[part], z[~part], y[~part]).items():
            measurements.setdefault(key, np.full(resplits, np.nan))[r] = value
    return Resplits(
        methods=list(methods),
        metrics=metrics,
        values=values,
        per_class=per_class,
        support=np.bincount(y, minlength=k),
        class_names=names,
        resplits=resplits,
        n_calibration=n_val,
        n_evaluation=n_test,
        seed=seed,
        unit="sequences" if np.ndim(val_logits) == 3 else "rows",
        errors=errors,
        error_messages=messages,
        measurements=measurements,
    )


# ----------------------------------------------------------------------------------------------
# The papers' claims


def claim_measurements(
    comparison: Any, z_fit: np.ndarray, y_fit: np.ndarray, z_eval: np.ndarray, y_eval: np.ndarray
) -> dict[str, float]:
    """Measure on one re-split what the claims of :mod:`calibkit.verdicts.claims` need beyond the table.

    - ``rbece_counted_bins:<method>``: RBECE's bins holding more than ``theta`` samples;
    - ``rbece_minus_ece``: the uncalibrated model's RBECE minus its ECE;
    - ``ece_minus_fce_bin_sensitivity``: ``|Δ ECE| - |Δ FCE|``, each Δ the mean over 2..7 bins minus
      the mean over 8..15 bins (the fuzzy-binning paper's Table 4.2), on the uncalibrated model;
    - ``ecd_sign``: +1 when ECD is positive at ``T*/2`` (sharpened: over-confident) and negative at
      ``2 T*`` (flattened), -1 otherwise (``T*``: TS fitted on the calibration part);
    - ``ecd_over_minus_under``: ``|ECD(T*/2)| - |ECD(2 T*)|``;
    - ``useless_but_calibrated``: +1 when a predictor of the class frequencies (the same for every
      input) has an ECE no larger than the model's but a larger Brier score, -1 otherwise.

    Parameters
    ----------
    comparison : Comparison
        This re-split's comparison (its reliability statistics and fitted calibrators).
    z_fit, y_fit, z_eval, y_eval : ndarray
        The calibration and evaluation parts (labelled rows).

    Returns
    -------
    dict of str to float
    """
    from calibkit.calibrators import TemperatureScaling
    from calibkit.metrics import calibration_report

    out: dict[str, float] = {}
    # A predictor of the calibration part's class frequencies, the same for every input: calibrated
    # and useless (the tutorial's point: ECE cannot see that; Brier, a proper scoring rule, does).
    prior = np.bincount(y_fit, minlength=z_eval.shape[1]) / len(y_fit)
    bins = {"n_bins": comparison.n_bins}  # the table's bins, and its row where the comparison has one
    model = comparison.rows.get("uncalibrated") or calibration_report(
        z_eval, y_eval, from_logits=True, metrics=["ece", "brier"], **bins
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        useless = calibration_report(np.tile(prior, (len(y_eval), 1)), y_eval, metrics=["ece", "brier"], **bins)
    blind = useless["ece"] <= model["ece"] and useless["brier"] > model["brier"]
    out["useless_but_calibrated"] = 1.0 if blind else -1.0
    for method, stats in comparison.statistics.items():
        counts = stats.top_table(comparison.rbece_bins)[:, :, 0].sum(axis=0)
        out[f"rbece_counted_bins:{method}"] = float(np.sum(counts > comparison.theta))
    row = comparison.rows.get("uncalibrated", {})
    out["rbece_minus_ece"] = row.get("rbece", math.nan) - row.get("ece", math.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sweep = {
            m: calibration_report(z_eval, y_eval, from_logits=True, metrics=["ece", "fce"], n_bins=m, fce_bins=m)
            for m in range(2, 16)
        }
        delta = {
            k: np.mean([sweep[m][k] for m in range(2, 8)]) - np.mean([sweep[m][k] for m in range(8, 16)])
            for k in ("ece", "fce")
        }
        out["ece_minus_fce_bin_sensitivity"] = float(abs(delta["ece"]) - abs(delta["fce"]))
        try:
            ts = comparison.calibrators.get("ts") or TemperatureScaling().fit(z_fit, y_fit)
        except ValueError:  # logits that do not favour the labels: no calibrated reference, no ECD claim
            return out
        t = float(ts.temperature_)
        over = calibration_report(z_eval / (t / 2), y_eval, from_logits=True, metrics=["ecd"])["ecd"]
        under = calibration_report(z_eval / (2 * t), y_eval, from_logits=True, metrics=["ecd"])["ecd"]
    out["ecd_sign"] = 1.0 if (over > 0 and under < 0) else -1.0
    out["ecd_over_minus_under"] = float(abs(over) - abs(under))
    return out


def verdicts(resplits: Resplits) -> list[dict[str, Any]]:
    """Give every claim of the seed papers a verdict on these re-splits (:data:`calibkit.verdicts.claims.CATALOGUE`).

    Parameters
    ----------
    resplits : Resplits
        From :func:`resplit_comparison`.

    Returns
    -------
    list of dict
        As :func:`calibkit.verdicts.claims.verdicts`.
    """
    from calibkit.verdicts.claims import verdicts as claim_verdicts

    return claim_verdicts(resplits)


# ----------------------------------------------------------------------------------------------
# Rendering


def markdown_table(resplits: Resplits) -> str:
    """Render metrics (rows) x methods (columns): ``mean ± std [2.5%, 97.5%]`` over the re-splits.

    Marks: ``▲`` better than the uncalibrated model and ``▼`` worse, in at least 95% of the
    re-splits (paired); ``†`` better than TS in at least 95%.

    Parameters
    ----------
    resplits : Resplits
        From :func:`resplit_comparison`.

    Returns
    -------
    str
        A Markdown table.
    """
    methods = resplits.methods
    rows = []
    for metric in resplits.metrics:
        cells = [metric]
        for method in methods:
            s = resplits.summary(method, metric)
            marks = _marks(resplits, method, metric) if s["n"] else ""
            cells.append(tables.summary_cell(s, std=True) + marks)
        rows.append(cells)
    return tables.markdown_table(["metric", *(METHOD_LABELS[m] for m in methods)], rows)


def _marks(resplits: Resplits, method: str, metric: str) -> str:
    marks = ""
    if method != "uncalibrated" and "uncalibrated" in resplits.methods:
        p = resplits.paired(method, "uncalibrated", metric)
        marks += " ▲" if p["better"] >= HOLD_SHARE else " ▼" if p["worse"] >= HOLD_SHARE else ""
    if method not in ("uncalibrated", "ts") and "ts" in resplits.methods:
        p = resplits.paired(method, "ts", metric)
        marks += " †" if p["better"] >= HOLD_SHARE else ""
    return marks


def verdict_text(claims: list[dict[str, Any]]) -> str:
    """Render the claims as a Markdown list: verdict, claim, paper, numbers.

    Parameters
    ----------
    claims : list of dict
        From :func:`verdicts`.

    Returns
    -------
    str
    """
    return "\n".join(f"- **{c['verdict']}**: {c['claim']} ({c['paper']}). {c['numbers']}." for c in claims)


def to_json(resplits: Resplits, claims: list[dict[str, Any]]) -> dict[str, Any]:
    """Collect everything the table and the verdicts show, for scripts (NaN as null).

    Parameters
    ----------
    resplits : Resplits
        From :func:`resplit_comparison`.
    claims : list of dict
        From :func:`verdicts`.

    Returns
    -------
    dict
        ``resplits``, ``seed``, ``unit``, the part sizes, ``hold_share``, ``table`` (per method
        and metric: the summary and the paired comparisons), ``per_class_ece``, ``not_fitted``,
        ``verdicts`` and ``what_this_means``.
    """

    def clean(value: float) -> float | None:
        return None if isinstance(value, float) and math.isnan(value) else value

    def cell(method: str, metric: str) -> dict[str, Any]:
        out: dict[str, Any] = {k: clean(v) for k, v in resplits.summary(method, metric).items()}
        for reference, key in (("uncalibrated", "vs_uncalibrated"), ("ts", "vs_ts")):
            if reference in resplits.methods and method not in ("uncalibrated", reference):
                out[key] = {k: clean(v) for k, v in resplits.paired(method, reference, metric).items()}
        return out

    table = {method: {metric: cell(method, metric) for metric in resplits.metrics} for method in resplits.methods}
    per_class = {
        method: {
            name: {"mean": clean(float(np.nanmean(col))) if np.isfinite(col).any() else None, "support": int(n)}
            for name, col, n in zip(resplits.class_names, resplits.per_class[method].T, resplits.support)
        }
        for method in resplits.methods
    }
    return {
        "resplits": resplits.resplits,
        "seed": resplits.seed,
        "unit": resplits.unit,
        "n_calibration_examples": resplits.n_calibration,
        "n_evaluation_examples": resplits.n_evaluation,
        "hold_share": HOLD_SHARE,
        "table": table,
        "per_class_ece": per_class,
        "not_fitted": {
            m: {"resplits": n, "first_error": resplits.error_messages.get(m)} for m, n in resplits.errors.items()
        },
        "verdicts": [{k: clean(v) if isinstance(v, float) else v for k, v in c.items()} for c in claims],
        "what_this_means": what_this_means(resplits, claims),
    }


def summary_text(resplits: Resplits) -> str:
    """Render the re-splits for a terminal: what they are, the table, what this means, the verdicts.

    Parameters
    ----------
    resplits : Resplits
        From :func:`resplit_comparison`.

    Returns
    -------
    str
    """
    claims = verdicts(resplits)
    return (
        f"{resplit_note(resplits)}\n\n{markdown_table(resplits)}\n\nwhat this means: "
        f"{what_this_means(resplits, claims)}\n\nverdicts on the papers' claims:\n{verdict_text(claims)}"
    )


def resplit_note(resplits: Any) -> str:
    """Describe the re-splits in one paragraph: what each fits and evaluates, and what the marks mean.

    Parameters
    ----------
    resplits : Resplits
        From :func:`calibkit.verdicts.resplits.resplit_comparison`.

    Returns
    -------
    str
    """
    return (
        f"Each of {resplits.resplits} re-splits pools the validation and test {resplits.unit}, fits every "
        f"calibrator on {resplits.n_calibration} of them and evaluates on the other {resplits.n_evaluation}"
        + (" (all tokens of a sequence on one side)" if resplits.unit == "sequences" else "")
        + ". Cells: mean ± standard deviation [2.5%, 97.5%] over the re-splits. Paired marks: ▲ better / ▼ worse "
        "than the uncalibrated model, † better than TS, in at least 95% of the re-splits. A verdict holds when the "
        "claimed direction is found in at least 95% of the re-splits, does not hold when the opposite is, and is "
        "inconclusive otherwise."
    )
