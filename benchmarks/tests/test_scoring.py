"""How the suites score: a model's answer against the expected one, the percentiles of the
figures, and the kinds of task the native-vs-code suite holds."""

from __future__ import annotations

import pytest

from benchmarks import _stats
from benchmarks._model import answer_mentions, is_right
from benchmarks._tasks import TASKS


@pytest.mark.parametrize(
    ("expected", "text", "right"),
    [
        ({"a": 1}, '{"a": 1}', True),
        ({"a": 1}, '```json\n{"a": 1}\n```', True),
        ([1.5, "x"], "The answer is 1.5 and x.", True),
        ({"a": 1}, '{"a": 2}', False),
    ],
)
def test_an_answer_is_right_as_json_or_when_it_mentions_every_value(
    expected: object, text: str, right: bool
) -> None:
    assert is_right(expected, text) is right
    assert answer_mentions({"k": [1, 2]}, "k: 1, 2") and not answer_mentions([3], "none")


def test_percentile_is_nearest_rank_and_summaries_hold_the_tail() -> None:
    samples = [float(i) for i in range(1, 201)]
    assert _stats.percentile(samples, 0.99) == 198.0
    assert _stats.percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    summary = _stats.summarize([5.0, 1.0, 9.0])
    assert (summary.median, summary.p99, summary.minimum, summary.maximum) == (5.0, 9.0, 1.0, 9.0)
    with pytest.raises(ValueError):
        _stats.percentile([], 0.5)


def test_the_suite_has_the_task_kinds_the_issue_asks_for() -> None:
    kinds = " ".join(t.kind for t in TASKS)
    assert len(TASKS) >= 8
    for needle in (
        "search",
        "paginated",
        "join",
        "fan out 20",
        "large listing",
        "retry",
        "code should lose",
        "large intermediate",
    ):
        assert needle in kinds, needle
