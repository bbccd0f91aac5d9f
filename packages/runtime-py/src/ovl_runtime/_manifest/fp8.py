"""fp8 e4m3 (OCP E4M3, torch's ``float8_e4m3fn``) in numpy: rounding float values to the ones it represents, for the
numpy engine, whose buffers are float32 whatever their type. E4M3: 3 mantissa bits, exponents -6..8, subnormals
down to 2^-9, largest finite 448, no infinities (the cast of a larger value saturates here, as torch's
``to(float8_e4m3fn)`` of a finite value out of range does not: fp8 inputs are expected in range)."""

from __future__ import annotations

import numpy as np

#: The largest finite e4m3 value.
E4M3_MAX = 448.0
#: The smallest normal exponent; below it values are subnormal, spaced 2^-9.
_MIN_EXP = -6
_MANTISSA_BITS = 3


def round_e4m3(x: np.ndarray) -> np.ndarray:
    """``x`` (float32) rounded to the nearest e4m3 value (ties to even), clipped to ±448."""
    x = np.clip(np.asarray(x, dtype=np.float32), -E4M3_MAX, E4M3_MAX)
    mag = np.abs(x)
    with np.errstate(divide="ignore"):
        exp = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    step = np.exp2(np.maximum(exp, _MIN_EXP) - _MANTISSA_BITS).astype(np.float32)
    return (np.round(x / step) * step).astype(np.float32)
