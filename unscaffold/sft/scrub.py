"""What must never reach training data, and how to find it fast in a serialized row.

Markers come from the K a run used (its paths, component ids, tool and check names), the reviewer's
own tool names, and user canaries. Reviewer-perspective wording in a replaced turn's reasoning is not
a leak of K: that reasoning stays as context but is masked from the loss."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from unscaffold.knowledge.kfolder import K
from unscaffold.sft.drop_reasons import DropReason

REVIEWER_TOOL_NAMES = ("submit_review",)
# Reasoning that speaks as a reviewer about someone else's draft instead of as the student doing the
# task: the patterns name the reviewer, a student's draft or proposal, or a decision to pass or replace
# it. Plain words a task may use ("student grades", "review the totals", "rewrite the file") match none.
REVIEWER_VOICE_PATTERNS = (
    r"\breviewers?\b",
    r"\bstudent(?:'s|s')?\s+(?:own\s+)?(?:proposals?|proposed|drafts?|steps?|commands?|actions?|repl(?:y|ies)|"
    r"turns?|calls?)\b",
    r"\bthe\s+student\s+(?:proposes|proposed|suggests|suggested|should)\b",
    r"\b(?:the|this|that|its|their)\s+proposed\s+(?:step|response|command|action|call|answer)\b",
    r"\b(?:the|this|that)\s+draft\s+(?:response|step|command|action|call|answer|reply)\b",
    r"\b(?:pass|accept|replace|rewrite|reject)\s+(?:this|the|that|its|their)\s+(?:proposal|draft|proposed\s+\w+)\b",
    r"\b(?:replace|reject)\s+(?:this|that)\s+(?:response|step)\b",
    r"\b(?:my|this|the)\s+review\s+(?:decision|verdict)\b",
    # third person about the student doing the task (what it did, skipped or is about to do)
    r"\bthe\s+student\s+(?:forgot|skipped|ignored|overlooked|assumed|claims|claimed|jumped|attempted|must|"
    r"(?:is|was)\s+about\s+to|(?:wants|needs|tried|failed|intends)\s+to|(?:has|had)(?:\s+not|n't)(?:\s+yet)?|"
    r"(?:did|does)(?:\s+not|n't)|never)\b",
    r"\bstudent(?:'s|s')\s+(?:reasoning|plan|approach|attempt|finish|script|verification)\b",
    # the reviewer's own acts: "I replace the finish", "I'm rejecting this step"
    r"\bI(?:'ll|'m|\s+will|\s+am|\s+would)?\s+(?:replac|reject|overrid)\w*\s+(?:the|this|that|its|their)\s+"
    r"(?:finish|final\s+answer|step|proposal|response|reply|turn|action|attempt|premature)\b",
    # the proposal as the subject of a judgement, or what a replacement comes from
    r"\b(?:the|this|that)\s+proposal\s+(?:is|was|does|did|would|will|ends|finishes|skips|misses|ignores|claims|"
    r"lacks|fails|needs|should|must|only|already|jumps|tries|assumes|stops)\b",
    r"\b(?:in|from|of|than)\s+the\s+(?:student'?s\s+)?proposal\b",
)
REVIEWER_WORDING = re.compile("|".join(REVIEWER_VOICE_PATTERNS), re.IGNORECASE)
CONTEXT_CHARS = 60  # characters of the row shown around a marker that dropped it (half on each side)

# Whole-token matching, the rule `find_leaks` uses: no word character or hyphen may touch the marker.
# In a serialized row a JSON escape (`\n`, `\"`, `\u00e9`) before the marker is a boundary, and UTF-8
# bytes of non-ASCII letters count as word characters, as `\w` does on text.
_BEFORE = rb"(?:(?<![\w\x80-\xff-])|(?<=\\[nrtbf\"/\\])|(?<=\\u[0-9a-fA-F]{4}))"
_AFTER = rb"(?![\w\x80-\xff-])"


@dataclass(frozen=True)
class Hit:
    """A marker found in a row: its reason, the marker as written there, and the row around it."""

    reason: str
    marker: str
    context: str


def token_pattern(value: bytes) -> re.Pattern[bytes]:
    return re.compile(_BEFORE + re.escape(value) + _AFTER)


def context_around(data: bytes, start: int, end: int, chars: int = CONTEXT_CHARS,
                   redact: Callable[[str], str] = str) -> str:
    """The match with `chars` characters of the row around it (half before, half after); `redact` runs
    before the cut, so no secret is left half-shown at an edge."""
    before = redact(data[:start].decode(errors="replace"))[-(chars // 2):]
    after = redact(data[end:].decode(errors="replace"))[: chars - chars // 2]
    return before + redact(data[start:end].decode(errors="replace")) + after


# A serialized row cut into word runs: JSON escapes and every byte that is not a letter, digit, `_`, `-`
# or part of a non-ASCII character separate them. A marker occurring as a whole token has all of its own
# runs among the row's runs, so one pass over the row rules out almost every marker, however many.
_ESCAPE = re.compile(rb"\\(?:u[0-9a-fA-F]{4}|.)")
_SEPARATORS = bytes(c if c >= 0x80 or chr(c).isascii() and (chr(c).isalnum() or chr(c) in "_-") else 0x20
                    for c in range(256))


# The same boundaries for RE2 matching bytes (pyarrow matches binary data as Latin-1): a byte that is no
# letter, digit, `_`, `-` or part of a non-ASCII character; markers are written byte by byte.
_RE2_OTHER = "[^0-9A-Za-z_\\x80-\\xff-]"


def _re2_literal(value: bytes) -> str:
    return "".join(chr(c) if c < 0x80 and chr(c).isalnum() else f"\\x{c:02x}" for c in value)


SUBSTRING_UP_TO = 3  # marker forms up to which `prefilter` searches each as a substring (no automaton)
RUNS_FROM = 24  # marker forms from which collecting a row's runs once beats one substring search per form


def word_runs(data: bytes) -> list[bytes]:
    return _ESCAPE.sub(b" ", data).translate(_SEPARATORS).split()


@dataclass
class Markers:
    """Literal strings by reason; `find` returns the first reason whose marker occurs as a whole token in a
    serialized row, with the text around it.

    Rows are scanned as UTF-8 JSON, so each marker is also looked for in its JSON-escaped form (a path
    with a quote or a non-ASCII canary is written escaped inside a JSON string). With many markers (a K's
    paths, ids and names) the row's word runs are collected once and only a marker whose runs are all among
    them is searched for; with a few, each is searched for directly. Each occurrence is then checked
    against the boundary rule, so `install` costs one anchored match."""

    by_reason: dict[str, list[str]] = field(default_factory=dict)
    _encoded: dict[str, list[tuple[bytes, frozenset[bytes], re.Pattern[bytes]]]] = field(default_factory=dict)
    _automaton: str | None = None  # `prefilter`'s pattern, built when first needed
    _literals: list[bytes] | None = None  # every form of every marker, sorted, collected when first needed

    def add(self, reason: str, values: list[str]) -> None:
        bucket = self.by_reason.setdefault(reason, [])
        encoded = self._encoded.setdefault(reason, [])
        for v in values:
            if v and v not in bucket:
                bucket.append(v)
                forms = {v.encode(), json.dumps(v)[1:-1].encode(), json.dumps(v, ensure_ascii=False)[1:-1].encode()}
                encoded.extend((form, frozenset(word_runs(form)), token_pattern(form)) for form in sorted(forms))
        self._automaton = self._literals = None

    def prefilter(self, rows: list[bytes]) -> list[bool]:
        """Which serialized rows may hold a marker as a whole token. One pass of one automaton (RE2, the
        regular-expression engine pyarrow ships, which runs an alternation as a DFA) over the whole batch,
        its boundaries a superset of `find`'s: a row it clears cannot hold a hit, a row it flags gets the
        exact `find`. Where it cannot answer (no pyarrow, a pattern too large for RE2) every row is flagged. With
        a few forms (the reviewer's tool name and a canary) a plain substring search is the first pass."""
        if not rows:
            return []
        forms = self.literals()
        if not forms:
            return [False] * len(rows)
        if len(forms) <= SUBSTRING_UP_TO:  # a few literals: a substring search per form beats building an array
            return [any(form in row for form in forms) for row in rows]
        if self._automaton is None:
            self._automaton = (f"(?:^|{_RE2_OTHER}|\\\\[nrtbf\"/\\\\]|\\\\u[0-9a-fA-F]{{4}})"
                               f"(?:{'|'.join(map(_re2_literal, forms))})(?:$|{_RE2_OTHER})")
        try:
            import pyarrow as pa
            import pyarrow.compute as pc

            return pc.match_substring_regex(pa.array(rows, pa.binary()), self._automaton).to_pylist()
        except Exception:  # ImportError, or RE2 refusing the pattern (ArrowInvalid): scan every row exactly
            return [True] * len(rows)

    def literals(self) -> list[bytes]:
        """Every form of every marker, once, sorted."""
        if self._literals is None:
            self._literals = sorted({value for values in self._encoded.values() for value, _, _ in values})
        return self._literals

    def needs_automaton(self) -> bool:
        """Whether `prefilter` runs the RE2 automaton (pyarrow) rather than a substring search per form."""
        return len(self.literals()) > SUBSTRING_UP_TO

    def redact(self, text: str) -> str:
        """Canaries never leave `build-sft`, not even in its report: each is shown as `<canary>`."""
        for value, _, _ in self._encoded.get(DropReason.LEAK_CANARY, ()):
            text = text.replace(value.decode(errors="replace"), "<canary>")
        return text

    def find(self, data: bytes | str, skip: tuple[int, int] | None = None) -> Hit | None:
        """`skip`: a byte range of `data` whose occurrences do not count (a suite's own opening text)."""
        if isinstance(data, str):
            data = data.encode()
        runs = set(word_runs(data)) if sum(map(len, self._encoded.values())) >= RUNS_FROM else None
        for reason, values in self._encoded.items():
            for value, needed, pattern in values:
                if runs is not None and not needed <= runs:
                    continue
                at = data.find(value)
                while at >= 0:
                    match = pattern.match(data, at)
                    if match and not (skip and skip[0] <= at < skip[1]):
                        return Hit(reason, self.redact(value.decode(errors="replace")),
                                   context_around(data, match.start(), match.end(), redact=self.redact))
                    at = data.find(value, at + 1)
        return None


def k_markers(k: K) -> dict[str, list[str]]:
    """K's root path and relative paths, component ids, and the tool and check names (distinctive)."""
    ids = k.component_ids()
    names = [i.split(":", 1)[1] for i in ids if i.startswith(("tool:", "check:"))]
    paths = [str(k.root)] + sorted({c.path for c in k.index.components if "/" in c.path}
                                   | {c.data for c in k.index.components if c.data})
    return {DropReason.LEAK_K_PATH: paths, DropReason.LEAK_COMPONENT_ID: ids, DropReason.LEAK_COMPONENT_NAME: names}


def build_markers(ks: list[K], canaries: list[str]) -> Markers:
    markers = Markers()
    for k in ks:
        for reason, values in k_markers(k).items():
            markers.add(reason, values)
    markers.add(DropReason.LEAK_REVIEWER_TOOL, list(REVIEWER_TOOL_NAMES))
    markers.add(DropReason.LEAK_CANARY, canaries)
    return markers
