"""Means and 95 % confidence intervals over repetitions (seeds, and traces in a matrix).

The interval is Student's t: ``mean +- t(0.975, n - 1) * sd / sqrt(n)`` with the sample
standard deviation; one value has no interval. Two schemes' means are *inside each other's
interval* when the difference of their means is within the larger of the two half-widths:
tables mark such a value as not distinguishable from the best.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

#: t(0.975, df) for df = 1..30; above 30 the normal quantile is within 4 %.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def t975(df: int) -> float:
    if df < 1:
        return math.nan
    return _T975[df - 1] if df <= len(_T975) else 1.960 + 2.4 / df


@dataclass(frozen=True)
class Spread:
    """The mean of ``n`` finite values and the half-width of its 95 % interval (NaN for one
    value; 0 when all values are equal)."""

    mean: float
    half: float
    n: int

    @property
    def low(self) -> float:
        return self.mean - self.half

    @property
    def high(self) -> float:
        return self.mean + self.half

    def overlaps(self, other: Spread) -> bool:
        """Whether the two means are within the larger of the two half-widths of each other
        (not distinguishable at this sample size)."""
        h = max(self.half if math.isfinite(self.half) else 0.0,
                other.half if math.isfinite(other.half) else 0.0)  # fmt: skip
        return abs(self.mean - other.mean) <= h

    def format(self, fmt: str = ".1f") -> str:
        if not math.isfinite(self.mean):
            return "-"
        if self.n < 2 or not math.isfinite(self.half):
            return format(self.mean, fmt)
        return f"{format(self.mean, fmt)} ± {format(self.half, fmt)}"


def spread(values: Iterable[object]) -> Spread:
    xs = []
    for v in values:
        try:
            x = float(v)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if math.isfinite(x):
            xs.append(x)
    n = len(xs)
    if n == 0:
        return Spread(math.nan, math.nan, 0)
    mean = sum(xs) / n
    if n == 1:
        return Spread(mean, math.nan, 1)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return Spread(mean, t975(n - 1) * sd / math.sqrt(n), n)


def parse_seeds(text: str) -> list[int]:
    """``1,2,3``, ``1-5`` or a mix (``1-3,7``): distinct seeds (each given once) in order,
    at most 1000, each from 0 to 2^64 - 1 (as ``--seed``)."""
    from .errors import SluiceError

    out: list[int] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            raise SluiceError(f"seeds: an empty entry in {text!r}")
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise SluiceError(f"seeds: {part!r} is not a seed or a range like 1-5") from None
        if a < 0 or b < a or b >= 2**64:
            raise SluiceError(f"seeds: {part!r} is not an increasing range of seeds from 0 "
                              "to 2^64 - 1")  # fmt: skip
        if b - a >= 1000 or len(out) + b - a + 1 > 1000:
            raise SluiceError("seeds: at most 1000")
        twice = sorted(set(out) & set(range(a, b + 1)))
        if twice:
            raise SluiceError(f"seeds: {twice[0]} given twice in {text!r}")
        out += range(a, b + 1)
    if not out:
        raise SluiceError("seeds: none given")
    return out
