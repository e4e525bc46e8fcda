"""exp and log that vectorise, and the bit casts they are built on, for calibkit's numba kernels.

Public within calibkit: the metric kernels (``calibkit.metrics._kernels``) and the calibrators'
(``calibkit.calibrators._kernels``) both call them. Call them from compiled code only.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import types
from numba.core.extending import intrinsic

from calibkit._numba.cache import CACHE

# numba lowers math.exp/math.log to libm calls, one element at a time (no SVML here); the exp
# is SLEEF's (xexp: Cody-Waite reduction, a degree-10 polynomial with FMAs, no division), the
# log fdlibm's (e_log.c, the same minimax coefficients), written as straight-line code, so LLVM
# runs a whole loop of them in SIMD registers, 4-5x faster. Both are accurate to 1 ulp in
# float64 (checked against numpy over 2e7 points, tests/metrics/test_kernels.py): nothing is
# traded for the speed, and float64 input stays exact.


@intrinsic
def float_from_bits(typingctx, bits):
    """Reinterpret an int64 as the float64 with that bit pattern (a register move)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return types.float64(types.int64), codegen


@intrinsic
def bits_of_float(typingctx, value):
    """Reinterpret a float64 as its int64 bit pattern."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))

    return types.int64(types.float64), codegen


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's split of ln 2, for the log
_LN2_LO = 1.90821492927058770002e-10
# ln 2 split for the exp's reduction (SLEEF's L2U / L2L; n * _EXP_LN2_HI is exact)
_EXP_LN2_HI = 0.69314718055966295651160180568695068359375
_EXP_LN2_LO = 0.28235290563031577122588448175013436025525412068e-12
# exp(r) = 1 + r + r**2 * P(r) on |r| <= ln(2) / 2, P of degree 10 (SLEEF's xexp, 1 ulp)
_EXP_P = (
    2.08860621107283687536341e-09,
    2.51112930892876518610661e-08,
    2.75573911234900471893338e-07,
    2.75572362911928827629423e-06,
    2.4801587159235472998791e-05,
    0.000198412698960509205564975,
    0.00138888888889774492207962,
    0.00833333333331652721664984,
    0.0416666666666665047591422,
    0.166666666666666851703837,
    0.5,
)
_LOG_LG = (
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
)
_SHIFTER = 6755399441055744.0  # 1.5 * 2**52
EXP_MIN = -708.0  # below this exp(x) < 2**-1021: flushed to 0 (a softmax term that small adds nothing)
MIN_NORMAL = 2.2250738585072014e-308


@nb.njit(cache=CACHE, inline="always")
def exp_in_range(x):
    """exp(x) for EXP_MIN <= x <= 0, 1 ulp."""
    # n = round(x / ln 2) by the shifter: adding 1.5 * 2**52 rounds to an integer, held in the
    # low bits of the pattern, so neither a floor nor a float-to-int conversion is needed.
    shifted = x * _LOG2E + _SHIFTER
    n = shifted - _SHIFTER
    r = (x - n * _EXP_LN2_HI) - n * _EXP_LN2_LO
    # Horner with FMAs: no division (fdlibm's rational form divides: 5-7% slower measured)
    p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10 = _EXP_P
    u = ((((((((p0 * r + p1) * r + p2) * r + p3) * r + p4) * r + p5) * r + p6) * r + p7) * r + p8) * r + p9
    u = (r * r) * (u * r + p10) + r + 1.0
    return u * float_from_bits((bits_of_float(shifted) + 1023) << 52)  # 2**n: the shift drops the shifter's bits


@nb.njit(cache=CACHE, inline="always")
def exp(x):
    """exp(x) for x <= 0 (softmax terms), 1 ulp; 0 below ``EXP_MIN``. The same bits as
    :func:`exp_in_range` wherever that applies."""
    y = exp_in_range(max(x, EXP_MIN))
    return y if x >= EXP_MIN else 0.0


@nb.njit(cache=CACHE, inline="always")
def log(x):
    """log(x) for finite x > 0 (subnormals included), 1 ulp."""
    lg1, lg2, lg3, lg4, lg5, lg6, lg7 = _LOG_LG
    tiny = x < MIN_NORMAL
    bits = bits_of_float(x * 18014398509481984.0 if tiny else x)  # 2**54 lifts subnormals
    hx = (bits >> 32) + (0x3FF00000 - 0x3FE6A09E)
    k = (hx >> 20) - 0x3FF - (54 if tiny else 0)
    hx = (hx & 0x000FFFFF) + 0x3FE6A09E
    f = float_from_bits((hx << 32) | (bits & 0xFFFFFFFF)) - 1.0  # mantissa in [sqrt(2)/2, sqrt(2)) - 1
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    r = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7))) + w * (lg2 + w * (lg4 + w * lg6))
    dk = np.float64(k)
    return s * (hfsq + r) + dk * _LN2_LO - hfsq + f + dk * _LN2_HI


# The loops that run them: separate functions so that their compile flags stay local.
# error_model="numpy" drops the zero-division check that blocks vectorisation. Only the
# "contract" fast-math flag (multiply-adds fused into FMAs: one rounding fewer, 1.7x faster,
# still 1 ulp): reassociation would undo the range reduction's exact splitting.
EXP_FLAGS = {"contract"}


@nb.njit(cache=CACHE, nogil=True, error_model="numpy", fastmath=EXP_FLAGS)
def exp_into(src, dst, n):
    """``dst[j] = exp(src[j])`` for ``j < n``, a vector loop."""
    for j in range(n):
        dst[j] = exp(src[j])


@nb.njit(cache=CACHE, nogil=True, error_model="numpy", fastmath=EXP_FLAGS)
def log_into(src, dst, n, floor):
    """``dst[j] = log(max(src[j], floor))`` for ``j < n``, a vector loop (``floor`` > 0)."""
    for j in range(n):
        dst[j] = log(max(src[j], floor))


@nb.njit(cache=CACHE, nogil=True, error_model="numpy", fastmath=EXP_FLAGS)
def exp_strict(x):
    """:func:`exp` compiled on its own: a caller that reassociates a sum around it cannot
    reassociate its arithmetic (LLVM still inlines and vectorises it, and every instruction
    keeps the flags of the function it came from)."""
    return exp(x)


@nb.njit(cache=CACHE, nogil=True, error_model="numpy", fastmath=EXP_FLAGS)
def exp_in_range_strict(x):
    """:func:`exp_in_range` compiled on its own, as :func:`exp_strict`: for rows whose every
    term is in range, it skips the clamp and the flush (3 of about 25 vector instructions)."""
    return exp_in_range(x)
