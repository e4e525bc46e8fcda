"""Compiled single-pass kernels that turn predictions into additive sufficient statistics.

Everything here works on one contiguous range of rows and only ever *adds* into arrays the
caller owns, so ranges can run on several threads (the kernels release the GIL) and the
results of batches, threads and processes are combined by plain addition. All sums are
float64 whatever the input dtype: float32 accumulators drift (torchmetrics is off by 6e-3
at 10M rows), float64 ones stay exact to ~1e-12.

No metric formula lives here: the kernels only bin and sum. ``calibkit.metrics.statistics``
turns the sums into metrics.

One module a job, lowest first:

- ``constants``: input modes, error codes, the columns of ``scalars``, histogram layout;
- ``bins``: the equal-width bin and the ACE bucket of a probability;
- ``rows``: rows of the input into probabilities (checks, softmax, top label);
- ``accumulate``: the full pass and the top-label pass of long rows, with their dispatch tables;
- ``top``: the top-label pass of short rows, vectorised across rows;
- ``short``: the full pass of short rows, vectorised across rows;
- ``ace``: the exact-ACE gather of the samples of cut buckets, and their resolution.

The exp and log they use are calibkit's own (``calibkit._numba.fastmath``). What the rest of
``calibkit.metrics`` calls is re-exported here.
"""

from calibkit.metrics._kernels.accumulate import (
    ACCUMULATE,
    ACCUMULATE_TOP,
    AccumulateArgs,
)
from calibkit.metrics._kernels.ace import (
    GATHER_ACE,
    RADIX_BITS,
    SHORT_GATHER_ACE,
    GatherArgs,
    _prefix_of_sorted,
    classwise_of_samples,
    resolve_points,
)
from calibkit.metrics._kernels.bins import _equal_width_bins
from calibkit.metrics._kernels.constants import (
    ACE_BUCKETS,
    ACE_MIN_EXPONENT,
    ACE_OFFSET,
    BLOCK_ENTRIES,
    COMPACT_CLASSES,
    EDGE_SHRINK,
    ERR_LABEL,
    ERR_NONFINITE,
    ERR_RANGE,
    ERR_ROW_SUM,
    LANES,
    LONG_ROW,
    MODE_BINARY_LOGITS,
    MODE_BINARY_PROBS,
    MODE_LOGITS,
    MODE_PROBS,
    N_ERRORS,
    N_SCALARS,
    ROW_SUM_TOLERANCE,
    S_BRIER,
    S_CORRECT,
    S_ECD,
    S_N,
    S_NLL,
    S_WRONG,
    S_WRONG_CONF,
    UNROLLED_ROW,
)
from calibkit.metrics._kernels.isotonic import near_tie_groups, pool_adjacent_violators
from calibkit.metrics._kernels.rows import FIXED_POINT_ONE_WORD
from calibkit.metrics._kernels.short import SHORT_KERNELS
from calibkit.metrics._kernels.top import SHORT_TOP_KERNELS, TOP_BLOCK

__all__ = [
    "ACCUMULATE",
    "ACCUMULATE_TOP",
    "ACE_BUCKETS",
    "ACE_MIN_EXPONENT",
    "ACE_OFFSET",
    "AccumulateArgs",
    "BLOCK_ENTRIES",
    "ERR_LABEL",
    "ERR_NONFINITE",
    "ERR_RANGE",
    "ERR_ROW_SUM",
    "FIXED_POINT_ONE_WORD",
    "GATHER_ACE",
    "GatherArgs",
    "COMPACT_CLASSES",
    "LANES",
    "LONG_ROW",
    "MODE_BINARY_LOGITS",
    "MODE_BINARY_PROBS",
    "MODE_LOGITS",
    "MODE_PROBS",
    "N_ERRORS",
    "N_SCALARS",
    "RADIX_BITS",
    "EDGE_SHRINK",
    "ROW_SUM_TOLERANCE",
    "SHORT_GATHER_ACE",
    "SHORT_KERNELS",
    "SHORT_TOP_KERNELS",
    "S_BRIER",
    "S_CORRECT",
    "S_ECD",
    "S_N",
    "S_NLL",
    "S_WRONG",
    "S_WRONG_CONF",
    "TOP_BLOCK",
    "UNROLLED_ROW",
    "_equal_width_bins",
    "_prefix_of_sorted",
    "classwise_of_samples",
    "resolve_points",
    "near_tie_groups",
    "pool_adjacent_violators",
]
