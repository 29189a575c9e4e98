"""``privhist.experiments.pws.data``: Zipf frequencies against exact floors, bad input."""

from __future__ import annotations

import math

import pytest

from privhist import ValidationError
from privhist.experiments import pws as ex

# -- data ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0])
def test_zipf_frequencies_are_the_exact_floors(alpha: float) -> None:
    n = 5000
    got = ex.zipf_frequencies(n, alpha).tolist()
    want = []
    for k in range(1, n + 1):
        if alpha == 0.5:
            want.append(math.isqrt(n // k))  # floor(sqrt(n/k)) = isqrt(floor(n/k))
        elif alpha == 1.0:
            want.append(n // k)
        else:
            want.append((n * n) // (k * k))
    assert got == want
    assert min(got) == 1


def test_zipf_and_histogram_reject_bad_input() -> None:
    with pytest.raises(ValidationError, match="parameter 'n' of zipf_frequencies"):
        ex.zipf_frequencies(0, 1.0)
    with pytest.raises(ValidationError, match="parameter 'alpha' of zipf_frequencies"):
        ex.zipf_frequencies(10, -1.0)
    with pytest.raises(ValidationError, match="positive integer frequencies"):
        ex.frequency_histogram([1, 0, 2])
