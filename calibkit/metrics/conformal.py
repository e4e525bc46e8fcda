"""How good prediction sets are: their coverage (of the true label) and their size.

Sets are boolean masks over the classes, ``(N, K)`` or ``(N, L, K)`` (as
:meth:`calibkit.calibrators.SplitConformal.predict_sets` returns them); rows whose label is
``ignore_index`` are skipped. Conventions: SPEC.md ("Conformal prediction sets").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibkit.metrics.settings import DEFAULTS
from calibkit.metrics.validation import check_bool, check_ignore_index, prepare_labels, to_numpy


def _sets(sets: Any) -> np.ndarray:
    """Return ``sets`` as a numpy array of shape (N, K) or (N, L, K), boolean or 0/1, checked."""
    s = to_numpy(sets, "sets")
    if s.dtype != np.bool_ and not (s.dtype.kind in "iuf" and np.isin(s, (0, 1)).all()):
        raise ValueError(f"`sets` must be a boolean mask over the classes (or 0/1), got dtype {s.dtype}")
    if s.ndim not in (2, 3):
        raise ValueError(f"`sets` must have shape (N, K) or (N, L, K), got {tuple(s.shape)}")
    return s


def _sets_and_labels(sets: Any, labels: Any, ignore_index: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the kept rows: sets ``(n, K)`` bool and labels ``(n,)``, checked."""
    ignore_index = check_ignore_index(ignore_index)
    s = _sets(sets)
    y_raw = to_numpy(labels, "labels")
    if tuple(y_raw.shape) != s.shape[:-1]:
        raise ValueError(
            f"`labels` has shape {tuple(y_raw.shape)} but `sets` of shape {tuple(s.shape)} needs {s.shape[:-1]}"
        )
    y = prepare_labels(y_raw)
    s = s.reshape(-1, s.shape[-1]).astype(bool)
    keep = y != ignore_index
    k = s.shape[1]
    bad = keep & ((y < 0) | (y >= k))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"`labels` must lie in [0, {k}) or equal ignore_index={ignore_index}; got {int(y[i])} at flat position {i}"
        )
    if not keep.any():
        raise ValueError("`labels` holds no sample (empty, or every label is ignore_index)")
    return s[keep], y[keep].astype(np.int64)


def coverage(
    sets: Any, labels: Any, *, per_class: bool = False, ignore_index: int = DEFAULTS.ignore_index
) -> float | np.ndarray:
    r"""Compute the empirical coverage of prediction sets: the share of rows whose set holds the label.

    .. math::

        \mathrm{coverage} = \frac{1}{n} \sum_{i=1}^{n} \mathbf{1}[y_i \in C(x_i)],
        \qquad
        \mathrm{coverage}_k = \frac{\sum_i \mathbf{1}[y_i = k,\ k \in C(x_i)]}{\sum_i \mathbf{1}[y_i = k]}

    A split-conformal predictor at confidence level ``1 - alpha`` guarantees
    ``E[coverage] >= 1 - alpha`` on exchangeable data (marginal), or each ``coverage_k`` in
    expectation (class-conditional).

    Parameters
    ----------
    sets : array-like or torch.Tensor of bool, shape (N, K) or (N, L, K)
        ``sets[..., j]`` is True when class ``j`` is in the row's set (0/1 integers are read as
        booleans).
    labels : array-like of int, shape (N,) or (N, L)
        The true labels; rows labelled ``ignore_index`` are skipped.
    per_class : bool, default False
        Return the coverage of each class (NaN for a class no kept row has) instead of one number.
    ignore_index : int, default -100
        Label of the rows to skip.

    Returns
    -------
    float or ndarray of shape (K,)

    Raises
    ------
    ValueError
        Naming the argument: shapes, labels outside ``[0, K)``, no row left.

    References
    ----------
    Sadinle, M., Lei, J. and Wasserman, L. (2019). Least Ambiguous Set-Valued Classifiers with
    Bounded Error Levels. Journal of the American Statistical Association 114(525) (LAC).

    Romano, Y., Sesia, M. and Candès, E. (2020). Classification with Valid and Adaptive Coverage.
    NeurIPS 2020 (APS).

    Angelopoulos, A. N., Bates, S., Malik, J. and Jordan, M. I. (2021). Uncertainty Sets for Image
    Classifiers using Conformal Prediction. ICLR 2021 (RAPS).

    Vovk, V., Gammerman, A. and Shafer, G. (2005). Algorithmic Learning in a Random World.
    Springer (class-conditional, "Mondrian", validity). Conventions: SPEC.md.

    Examples
    --------
    >>> import numpy as np
    >>> from calibkit.metrics import coverage
    >>> sets = np.array([[True, False, False], [True, True, False], [False, False, True]])
    >>> float(coverage(sets, np.array([0, 2, 2])))
    0.6666666666666666
    >>> coverage(sets, np.array([0, 2, 2]), per_class=True)
    array([1. , nan, 0.5])
    """
    per_class = check_bool(per_class, "per_class")
    s, y = _sets_and_labels(sets, labels, ignore_index)
    covered = s[np.arange(len(y)), y]
    if not per_class:
        return float(covered.mean())
    k = s.shape[1]
    counts = np.bincount(y, minlength=k)
    hits = np.bincount(y, weights=covered, minlength=k)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, hits / np.maximum(counts, 1), np.nan)


def set_size(sets: Any, labels: Any = None, *, ignore_index: int = DEFAULTS.ignore_index) -> float:
    r"""Compute the mean size of prediction sets: the average number of classes a set holds.

    .. math::

        \mathrm{size} = \frac{1}{n} \sum_{i=1}^{n} |C(x_i)|

    The smaller at the same coverage, the more informative the sets (Angelopoulos et al. 2021
    compare scores by it). LAC sets may be empty (size 0); APS and RAPS sets never are.

    Parameters
    ----------
    sets : array-like or torch.Tensor of bool, shape (N, K) or (N, L, K)
        ``sets[..., j]`` is True when class ``j`` is in the row's set.
    labels : array-like of int, shape (N,) or (N, L), optional
        When given, rows labelled ``ignore_index`` are skipped (padding of token input) and the
        labels are checked; without, every row counts.
    ignore_index : int, default -100
        Label of the rows to skip.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Naming the argument: shapes, labels outside ``[0, K)``, no row left.

    References
    ----------
    Sadinle, M., Lei, J. and Wasserman, L. (2019). Least Ambiguous Set-Valued Classifiers with
    Bounded Error Levels. Journal of the American Statistical Association 114(525).

    Angelopoulos, A. N., Bates, S., Malik, J. and Jordan, M. I. (2021). Uncertainty Sets for Image
    Classifiers using Conformal Prediction. ICLR 2021. Conventions: SPEC.md.

    Examples
    --------
    >>> import numpy as np
    >>> from calibkit.metrics import set_size
    >>> sets = np.array([[True, False, False], [True, True, False], [False, False, False]])
    >>> set_size(sets)
    1.0
    >>> set_size(sets, np.array([0, -100, 2]))
    0.5
    """
    if labels is None:
        check_ignore_index(ignore_index)
        s = _sets(sets).astype(bool)
        if s.size == 0:
            raise ValueError(f"`sets` holds no row, shape {tuple(s.shape)}")
    else:
        s, _ = _sets_and_labels(sets, labels, ignore_index)
    return float(s.sum(axis=-1).mean())
