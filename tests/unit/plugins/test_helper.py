"""default_normalize_score: kube-scheduler's DefaultNormalizeScore table."""

from __future__ import annotations

import numpy as np
import pytest

from kubesched.api import Pod
from kubesched.plugins.helper import as_objects, default_normalize_score


@pytest.mark.parametrize(
    ("reverse", "scores", "want"),
    [
        (False, [1, 2, 3, 4], [25, 50, 75, 100]),
        (True, [1, 2, 3, 4], [75, 50, 25, 0]),
        (False, [1000, 10, 20, 30], [100, 1, 2, 3]),
        (True, [1000, 10, 20, 30], [0, 99, 98, 97]),
        (False, [1, 1, 1, 1], [100, 100, 100, 100]),
        (False, [1000, 1, 1, 1], [100, 0, 0, 0]),
        (True, [0, 1, 1, 1], [100, 0, 0, 0]),
        (False, [0, 0, 0, 0], [0, 0, 0, 0]),
        (True, [0, 0, 0, 0], [100, 100, 100, 100]),
        (False, [3, 7, 9], [33, 77, 100]),
        (True, [], []),
        # Negative input is outside the contract; integer division still truncates toward zero.
        (False, [-3, 7], [-42, 100]),
    ],
)
def test_default_normalize_score(reverse: bool, scores: list[int], want: list[int]) -> None:
    a = np.array(scores, dtype=np.int64)
    default_normalize_score(100, reverse, a)
    assert a.tolist() == want


def test_as_objects() -> None:
    p = Pod()
    assert as_objects(None, p, Pod) == (None, p)
    with pytest.raises(TypeError):
        as_objects("x", p, Pod)
    with pytest.raises(TypeError):
        as_objects(p, 3, Pod)
