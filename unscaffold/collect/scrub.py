"""What must never reach training data, and how to find it fast in a serialized row.

Markers come from the K a run used (its paths, component ids, tool and check names), the reviewer's
own tool names, and user canaries. Reviewer-perspective wording in a replaced turn's reasoning is not
a leak of K: that reasoning stays as context but is masked from the loss."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from unscaffold.collect.drop_reasons import DropReason
from unscaffold.knowledge.kfolder import K

REVIEWER_TOOL_NAMES = ("submit_review",)
# Reasoning that speaks as a reviewer about a draft instead of as the student doing the task.
REVIEWER_WORDING = re.compile(
    r"\b(?:the\s+)?student(?:'s)?\b|\bproposals?\b|\bproposed\s+(?:step|response|command|action)\b"
    r"|\bthe\s+draft\b|\b(?:pass|replace)\s+(?:this|the)\s+(?:response|step|proposal|draft)\b"
    r"|\brewrit(?:e|ing|ten)\b|\breviewer\b|\breview(?:ed|ing)?\b",
    re.IGNORECASE,
)
MARKUP = re.compile(r"<\|im_(?:start|end)\|>|<\|endoftext\|>|</?tool_call>|</?tool_response>|<function=|</?think>")


@dataclass
class Markers:
    """Literal strings by reason; `find` returns the first reason whose marker occurs in a serialized row.

    Rows are scanned as UTF-8 JSON, so each marker is also looked for in its JSON-escaped form (a path
    with a quote or a non-ASCII canary is written escaped inside a JSON string)."""

    by_reason: dict[str, list[str]] = field(default_factory=dict)
    _encoded: dict[str, list[bytes]] = field(default_factory=dict)

    def add(self, reason: str, values: list[str]) -> None:
        bucket = self.by_reason.setdefault(reason, [])
        encoded = self._encoded.setdefault(reason, [])
        for v in values:
            if v and v not in bucket:
                bucket.append(v)
                forms = {v.encode(), json.dumps(v)[1:-1].encode(), json.dumps(v, ensure_ascii=False)[1:-1].encode()}
                encoded.extend(sorted(forms))

    def find(self, data: bytes | str) -> tuple[str, str] | None:
        if isinstance(data, str):
            data = data.encode()
        for reason, values in self._encoded.items():
            for value in values:
                if value in data:
                    return reason, value.decode(errors="replace")
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
