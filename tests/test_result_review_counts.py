"""A trial's result.json keeps the reviewer's counts flat, under their historical keys, while the code holds
them as one `ReviewCounts`: reading, writing and bad values all speak the file's keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unscaffold.errors import InputError
from unscaffold.iojson import load_model
from unscaffold.reviewer.hook import ReviewStats
from unscaffold.run.models import TrialResult

BASE = {"trial_id": "t1", "task_id": "a", "reward": 1.0, "outcome": "passed", "reason": "", "exit_status": "submitted",
        "started_at": "s", "ended_at": "e"}
FLAT = {"reviewer_calls": 7, "reviewer_calls_saved": 2, "invalid_submissions": 1, "review_fallbacks": 3,
        "reviewer_usage": {"input_tokens": 11, "output_tokens": 5, "cost_usd": 0.25}}


def test_flat_keys_load_into_the_counts_and_write_back_flat() -> None:
    result = TrialResult.model_validate({**BASE, **FLAT})
    counts = result.review
    assert (counts.calls, counts.saved_calls, counts.invalid, counts.fallbacks) == (7, 2, 1, 3)
    assert (counts.usage.input_tokens, counts.usage.output_tokens, counts.usage.cost_usd) == (11, 5, 0.25)
    for dumped in (json.loads(result.model_dump_json()), result.model_dump(), result.model_dump(by_alias=True)):
        assert "review" not in dumped
        assert {k: dumped[k] for k in FLAT if k != "reviewer_usage"} == {k: v for k, v in FLAT.items()
                                                                         if k != "reviewer_usage"}
        assert dumped["reviewer_usage"]["input_tokens"] == 11
    assert TrialResult.model_validate(result.model_dump()) == result


def test_an_older_result_without_review_keys_reads_as_no_reviewing() -> None:
    result = TrialResult.model_validate(BASE)
    assert (result.review.calls, result.review.saved_calls, result.review.usage.input_tokens) == (0, 0, 0)


def test_the_hook_stats_give_exactly_the_recorded_counts() -> None:
    stats = ReviewStats(reviews=9, replacements=4, skipped_budget=1, calls=7, saved_calls=2, invalid=1, fallbacks=3)
    assert stats.counts().model_dump() == {"calls": 7, "saved_calls": 2, "invalid": 1, "fallbacks": 3,
                                           "usage": stats.usage.model_dump()}


@pytest.mark.parametrize(("patch", "message"), [
    ({"reviewer_calls": "many"},
     "reviewer_calls: Input should be a valid integer, unable to parse string as an integer"),
    ({"reviewer_usage": {"input_tokens": "x"}},
     "reviewer_usage.input_tokens: Input should be a valid integer, unable to parse string as an integer"),
    ({"reward": 7}, "reward: Input should be less than or equal to 1"),
])
def test_a_bad_value_is_named_by_its_key_in_the_file(tmp_path: Path, patch: dict, message: str) -> None:
    path = tmp_path / "result.json"
    path.write_text(json.dumps({**BASE, **FLAT, **patch}))
    with pytest.raises(InputError) as err:
        load_model(path, TrialResult)
    assert str(err.value) == f"{path}: {message}"
