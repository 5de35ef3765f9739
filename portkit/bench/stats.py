"""A sample of timings as a median and a spread: what every figure of a benchmark is."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of already sorted values."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


@dataclass(frozen=True)
class Summary:
    """Times in microseconds: median, quartiles (the spread a comparison trusts), extremes."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Summary:
        values = sorted(float(v) for v in samples)
        if not values:
            raise ValueError("a summary needs at least one sample")
        return cls(
            median=quantile(values, 0.5),
            q1=quantile(values, 0.25),
            q3=quantile(values, 0.75),
            min=values[0],
            max=values[-1],
            n=len(values),
        )

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def relative_spread(self) -> float:
        """The interquartile range over the median: 0.02 is a quiet measurement."""
        return self.iqr / self.median if self.median else 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Summary:
        return cls(**{k: data[k] for k in ("median", "q1", "q3", "min", "max", "n")})
