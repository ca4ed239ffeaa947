"""The two model steps of a round: the analyst groups failures by root cause, the editor patches a bank.

The editor's submission is accepted only once it is well-formed, leaks nothing, and the bank it makes
is executable; until then each rejection goes back to it with the reason."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from unscaffold.evolve.config import EvolveConfig
from unscaffold.evolve.failures import Failure
from unscaffold.evolve.guards import Markers, check_leaks
from unscaffold.evolve.patch import apply_edit, bank_diff
from unscaffold.evolve.roles import Role, submit_tool
from unscaffold.evolve.submissions import Analysis, Cause, EditProposal, check_analysis, check_edit
from unscaffold.evolve.validate import validate_bank
from unscaffold.iojson import append_jsonl, write_text_atomic
from unscaffold.minimal_harness.trajectory import now_iso
from unscaffold.reviewer.submission import InvalidSubmission

BANK_TEXT_LIMIT = 40_000
FILE_TEXT_LIMIT = 6_000
ANALYSIS_TOOL = submit_tool("submit_analysis", "Submit the failures grouped by root cause.",
                            Analysis.model_json_schema())
EDIT_TOOL = submit_tool("submit_edit", "Submit the bank edit: whole files written or deleted.",
                        EditProposal.model_json_schema())
GROUPS_RULE = ("- Put related causes together in `groups`, 2-3 causes per group (one child harness is evolved "
               "per group); a cause sits in one group only.\n")


def prompt(name: str) -> str:
    return resources.files("unscaffold.evolve").joinpath(f"prompts/{name}.md").read_text("utf-8")


def bank_text(root: Path) -> tuple[str, set[str]]:
    """The bank's files as the editor reads them, and the ones shown clipped (which it may not rewrite):
    the manifest first and whole, every other file clipped, the whole bounded."""
    files = sorted((p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts),
                   key=lambda p: (p.name != "manifest.toml", p.relative_to(root).as_posix()))
    parts, clipped, total = [], set(), 0
    for path in files:
        rel = path.relative_to(root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            clipped.add(rel)
            continue
        if rel != "manifest.toml" and len(text) > FILE_TEXT_LIMIT:
            text = text[:FILE_TEXT_LIMIT] + f"\n[... {len(text) - FILE_TEXT_LIMIT} more characters: shown clipped]"
            clipped.add(rel)
        block = f"=== {rel} ===\n{text.rstrip()}\n"
        if rel != "manifest.toml" and total + len(block) > BANK_TEXT_LIMIT:
            clipped.add(rel)
            parts.append(f"=== {rel} === [not shown]")
            continue
        parts.append(block)
        total += len(block)
    return "\n".join(parts), clipped


def causes_text(causes: list[Cause]) -> str:
    """The causes as the editor reads them: descriptions and evidence, without task ids."""
    out = []
    for c in causes:
        quotes = "\n".join(f"  - \"{e.quote.strip()}\"" for e in c.evidence)
        out.append(f"### {c.name} ({len(c.tasks)} failing tasks)\n{c.description}\nEvidence:\n{quotes}")
    return "\n\n".join(out)


class Steps:
    def __init__(self, config: EvolveConfig, markers: Markers, progress: Callable[[str], None]) -> None:
        self.config, self.markers, self.out = config, markers, config.out
        self.analyst = Role("analyst", config.analyst_spec, ANALYSIS_TOOL, config.out, config.budget, progress)
        self.editor = Role("editor", config.editor, EDIT_TOOL, config.out, config.budget, progress)

    def analyse(self, key: str, failures: dict[str, Failure]) -> tuple[Analysis | None, list[str]]:
        need_groups = self.config.mode == "pool"
        system = prompt("analyst").replace("{groups_rule}", GROUPS_RULE if need_groups else "")
        user = "\n\n".join(f"## Failed task `{f.task_id}` (reward {f.reward:g})\n```\n{f.text}\n```"
                           for f in failures.values())
        texts = {t: f.text for t, f in failures.items()}
        return self.analyst.ask(key, system, user, lambda raw: check_analysis(raw, texts, need_groups=need_groups))

    def edit(self, key: str, parent: Path, causes: list[Cause], child: Path) -> tuple[EditProposal | None, list[str]]:
        """Ask for an edit of `parent` repairing `causes`; an accepted one leaves the child bank at `child`."""
        shown, clipped = bank_text(parent)
        user = f"## The causes to repair\n\n{causes_text(causes)}\n\n## The bank now\n\n{shown}"
        offered = [c.name for c in causes]

        def accept(raw: Any) -> EditProposal:
            edit = check_edit(raw, offered)
            unseen = next((c.path for c in edit.changes if not c.delete and c.path in clipped), None)
            if unseen:
                raise InvalidSubmission(f"`{unseen}` was shown clipped or not at all; add a new file instead of "
                                        "rewriting it")
            staging = child.with_name(f".{child.name}.staging")
            try:
                check_leaks(edit, self.markers)
                apply_edit(parent, edit, staging)
                validate_bank(staging, self.markers.task_ids + self.markers.gold, self.config.sandbox)
            except InvalidSubmission as e:
                shutil.rmtree(staging, ignore_errors=True)
                append_jsonl(self.out / "edits.jsonl", {"key": key, "accepted": False, "reason": str(e),
                                                        "at": now_iso()})
                raise
            if child.exists():
                shutil.rmtree(child)
            staging.rename(child)
            write_text_atomic(self.out / "edits" / f"{key}.diff", bank_diff(parent, child))
            append_jsonl(self.out / "edits.jsonl", {"key": key, "accepted": True, "bank": str(child),
                                                    "causes": edit.causes, "summary": edit.summary,
                                                    "at": now_iso()})
            return edit

        return self.editor.ask(key, prompt("editor"), user, accept)
