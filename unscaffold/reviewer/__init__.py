"""Review before execution: the PASS/REPLACE protocol, its format check, the replace budget, and reviewers."""

from unscaffold.reviewer.base import RawSubmission, Reviewer, ReviewerFactory, ReviewRequest, ReviewSession
from unscaffold.reviewer.hook import ReviewHook, ReviewStats
from unscaffold.reviewer.registry import load_reviewer
from unscaffold.reviewer.submission import InvalidSubmission, Replacement, ReviewSubmission, check_submission

__all__ = [
    "InvalidSubmission",
    "RawSubmission",
    "Replacement",
    "ReviewHook",
    "ReviewRequest",
    "ReviewSession",
    "ReviewStats",
    "ReviewSubmission",
    "Reviewer",
    "ReviewerFactory",
    "check_submission",
    "load_reviewer",
]
