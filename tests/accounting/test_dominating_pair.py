"""The dominating pair of an envelope of (epsilon, delta) guarantees, worked out by hand."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from privhist.accounting.pairs import dominating_pair
from privhist.core.errors import ValidationError

# p = 1/2 and the lines 1 - 3x (epsilon ln 3, delta 0) and 0.1 - x (epsilon 0, delta 0.9),
# with the pure removal line (1 - p)(1 - x) = 0.5 - 0.5x. The envelope
# g(x) = max(0, 1 - 3x, 0.1 - x, 0.5 - 0.5x) is 1 - 3x on [0, 0.2] and 0.5 - 0.5x on [0.2, 1]
# (0.1 - x lies below 0.5 - 0.5x everywhere on [0, 1]): two segments, so two atoms, P* the
# drops 0.6 and 0.4, Q* the widths 0.2 and 0.8. The candidate corners are where a line meets
# zero (0.1, 1/3) or another line (0.2, 0.45): 0.1 lies inside the first segment and 1/3 and
# 0.45 inside the second, so each segment is cut into collinear pieces that must merge.
HALF = Fraction(1, 2)
LINES = [(math.log(3.0), 0.0), (0.0, 0.9)]


def test_one_atom_per_segment_of_the_envelope() -> None:
    P, Q = dominating_pair(HALF, LINES, slack=0.0)
    # g(0) = 1: no mass of P* where Q* is 0 (no atom -1), and no atom with zero mass
    assert set(P) == set(Q) == {0, 1}
    assert P == pytest.approx({0: 0.6, 1: 0.4}, abs=1e-12)
    assert Q == pytest.approx({0: 0.2, 1: 0.8}, abs=1e-12)
    # the likelihood ratios are the slopes of the two segments, 3 and 1/2
    assert P[0] / Q[0] == pytest.approx(3.0) and P[1] / Q[1] == pytest.approx(0.5)


def test_the_slack_adds_the_two_end_atoms_and_no_empty_one() -> None:
    """Every line lowered by the slack s: g(0) = 1 - s puts mass s on atom -1 (where Q* = 0),
    and the pure line now meets zero at 1 - 2s, leaving the last width 2s to Q* alone, where
    P* has no mass and so no atom."""
    s = 1e-8
    P, Q = dominating_pair(HALF, LINES, slack=s)
    assert set(P) == {-1, 0, 1} and set(Q) == {0, 1, 2}
    assert all(v > 0 for v in P.values()) and all(v > 0 for v in Q.values())
    assert P[-1] == pytest.approx(s, rel=1e-6) and Q[2] == pytest.approx(2 * s, rel=1e-6)
    # the first segment keeps its drop and width; the second loses s of drop and 2s of width
    assert P == pytest.approx({-1: s, 0: 0.6, 1: 0.4 - s}, rel=1e-6, abs=1e-12)
    assert Q == pytest.approx({0: 0.2, 1: 0.8 - 2 * s, 2: 2 * s}, rel=1e-6, abs=1e-12)
    # the default slack (1e-14) gives the same shape
    P, Q = dominating_pair(HALF, LINES)
    assert set(P) == {-1, 0, 1} and set(Q) == {0, 1, 2}


@pytest.mark.parametrize("slack", [-1e-12, -0.5, 1e-6, 0.1, math.nan, math.inf])
def test_a_slack_that_would_lift_the_envelope_is_refused(slack: float) -> None:
    """A negative slack would raise every line above the guarantees it encodes (a pair less
    private than claimed); the slack must also stay a rounding margin, below 1e-6."""
    with pytest.raises(ValidationError, match="slack"):
        dominating_pair(HALF, LINES, slack=slack)
