"""The layout the kernels and their callers share: input modes, error codes, the columns of
``scalars``, the shapes of the histograms."""

# How a row of the input becomes a probability vector.
MODE_PROBS = 0  # (N, K) probabilities
MODE_LOGITS = 1  # (N, K) logits -> softmax
MODE_BINARY_PROBS = 2  # (N, 1) probability of class 1 -> [1 - p, p]
MODE_BINARY_LOGITS = 3  # (N, 1) logit of class 1 -> sigmoid

# Error codes, in the order of the ``errors`` array (first offending row of each kind).
ERR_NONFINITE = 0
ERR_RANGE = 1
ERR_ROW_SUM = 2
ERR_LABEL = 3
N_ERRORS = 4

# Columns of the ``scalars`` array.
S_N, S_CORRECT, S_BRIER, S_NLL, S_ECD, S_WRONG_CONF, S_WRONG = range(7)
N_SCALARS = 7

ROW_SUM_TOLERANCE = 1e-3

EDGE_SHRINK = 1.0 - 2.0**-40
"""Bins are decided on ``(p * M) * EDGE_SHRINK``: a value at most about 2**-40 (relative) above an
edge m/M counts as on it, in the bin below (SPEC.md). Two engines' softmax of the same logits
differ by an ulp or two, and a value that is m/M in exact arithmetic (logits log(counts)) would
otherwise land on either side of the edge depending on which engine ran; both compute this
product with the same two roundings, so they assign every value to the same bin."""

LONG_ROW = 16
"""Rows of at least this many classes go through per-row vector loops (maximum and top label,
softmax, class-wise first bin); shorter ones a block at a time or in scalar code, where a
vector loop over 4 entries only adds its setup (measured 20% slower at K = 4)."""

# ACE histogram: a probability's bucket is the top 16 bits of its float64 pattern (11 exponent
# bits and 4 mantissa bits: 16 buckets an octave, relative width <= 1/16), so the buckets follow
# the data down to tiny probabilities, where equal-mass ranges of a class column mostly fall.
# Everything below 2**-64 shares bucket 0; 1.0 is the last bucket.
ACE_MIN_EXPONENT = 1023 - 64
ACE_OFFSET = (ACE_MIN_EXPONENT << 4) - 1
ACE_BUCKETS = (1023 << 4) - ACE_OFFSET + 1


UNROLLED_ROW = 8
"""Rows of at most this many classes get the top-label pass of short rows compiled for their
class count: the loop over a row unrolls and the loop runs across rows in SIMD lanes (3x
faster at K = 4). Rows of 9 to 15 classes share one compilation that reads the count at run
time. A compilation costs about 3 s, once per count and input types (the full pass and the
ACE gather, 8 s a count, are compiled once for every count: ``short.SHORT_KERNELS``)."""


BLOCK_ENTRIES = 2048
"""Rows are turned into probabilities a block of about this many entries at a time (three
float64 buffers of 16 kB, cache resident), so that exp and log run as flat SIMD loops even
when rows are short (K = 4)."""


LANES = 4
"""Copies of every histogram, row ``i`` adding into copy ``i % LANES``: consecutive rows that
hit the same bin would otherwise wait on each other's store (a 2-3x slowdown measured here)."""


COMPACT_CLASSES = 2048
"""From this many classes on (a vocabulary), the top-label table split by true label holds a row
per label that occurs, not per class (``CalibrationStatistics.top_classes``): at 128,000 classes
the dense table is 3 x 128,000 x 20 x 4 float64 (246 MB) a pass, whatever the rows, and the
label-split table then costs more than reading the logits of a few hundred tokens."""
