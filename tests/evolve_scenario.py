"""A fixed replay scenario for harness evolution on the built-in retrosynthesis suite.

The replay student's command reads the bank mounted at /hstar: a task passes or fails depending on the
phrases the evolved bank contains, so edits repair and regress tasks exactly as designed."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from unscaffold.benchmarks import load_suite

X, Y, Z = "map the leaving group", "keep the protecting group", "check the scaffold twice"
SINGLE = {"rxn-001": ("pass_if", X), "rxn-002": ("pass_if", X), "rxn-004": ("fail_if", X),
          "rxn-005": ("always", ""), "rxn-007": ("never", "")}
POOL = {"rxn-001": ("pass_if", X), "rxn-002": ("pass_if", f"{X}|{Y}"), "rxn-004": ("pass_if", Y),
        "rxn-005": ("pass_if", Z), "rxn-007": ("pass_if", Z), "rxn-008": ("fail_if", X)}
QUOTE = "[score] reward 0"

BASE_MANIFEST = """name = "tiny"
description = "A small retrosynthesis bank."

[[tools]]
name = "show_product"
description = "Print the product SMILES of the task."
script = "tools/show_product.sh"
parameters = { type = "object", properties = {} }

[[tools.examples]]
setup = "echo CCO > product.smi"
arguments = {}

[[skills]]
name = "inspect"
path = "skills/inspect.md"
summary = "Read the product before proposing reactants."
"""


def write_base_bank(root: Path) -> Path:
    (root / "tools").mkdir(parents=True)
    (root / "skills").mkdir()
    (root / "manifest.toml").write_text(BASE_MANIFEST)
    (root / "tools" / "show_product.sh").write_text("cat product.smi\n")
    (root / "skills" / "inspect.md").write_text("Read product.smi before proposing reactants.\n")
    return root


def gold(task_id: str) -> str:
    suite = load_suite("retrosynthesis")
    return suite.reaction(next(t for t in suite.tasks("train") if t.id == task_id)).recorded_answer()


def command(task_id: str, rule: tuple[str, str]) -> str:
    right, wrong = f"printf '%s\\n' {shlex.quote(gold(task_id))} > answer.txt", "echo C > answer.txt"
    kind, phrase = rule
    if kind == "always":
        return right
    if kind == "never":
        return wrong
    test = f"grep -rqsE {shlex.quote(phrase)} /hstar"
    yes, no = (right, wrong) if kind == "pass_if" else (wrong, right)
    return f"if {test}; then {yes}; else {no}; fi"


def student(rules: dict[str, tuple[str, str]]) -> dict[str, list[dict[str, Any]]]:
    return {t: [{"tool_call": {"name": "execute", "arguments": {"command": command(t, rule)}}},
                {"content": "I wrote answer.txt."}] for t, rule in rules.items()}


def cause(name: str, tasks: list[str]) -> dict[str, Any]:
    return {"name": name, "description": f"The student repeats the {name} mistake.", "tasks": tasks,
            "evidence": [{"task": t, "quote": QUOTE} for t in tasks]}


def skill_entry(name: str) -> str:
    return f'\n[[skills]]\nname = "{name}"\npath = "skills/{name}.md"\nsummary = "Lessons from repeated failures."\n'


def skill_edit(name: str, phrases: list[str], causes: list[str], extra: str = "",
               keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """An edit adding one skill whose text holds the phrases (and `extra`, e.g. a leak); the manifest keeps
    the skills `keep` that an earlier edit added."""
    manifest = BASE_MANIFEST + "".join(skill_entry(k) for k in keep) + skill_entry(name)
    body = "".join(f"- Always {p}.\n" for p in phrases) + extra
    return {"summary": f"add the {name} skill", "causes": causes,
            "changes": [{"path": "manifest.toml", "content": manifest},
                        {"path": f"skills/{name}.md", "content": body}]}


def single_scenario(root: Path, editor_entries: list[Any] | None = None) -> dict[str, str]:
    """Round 1: causes over rxn-001/rxn-002 (rxn-007 a single-task failure); the edit adds X."""
    analyst = {"r1.analyst": [{"causes": [cause("unmapped-leaving-group", ["rxn-001", "rxn-002"])],
                               "single_task_failures": [{"task": "rxn-007", "note": "wrong reactant"}]}],
               **{f"r{r}.analyst": [{"single_task_failures": [{"task": t, "note": "seen once"}
                                                              for t in ("rxn-004", "rxn-007")]}] for r in (2, 3)}}
    editor = {"r1.editor": editor_entries or [skill_edit("leaving-group", [X], ["unmapped-leaving-group"])]}
    return write_specs(root, student(SINGLE), analyst, editor)


def pool_scenario(root: Path) -> dict[str, str]:
    """Base solves rxn-008 only; sib-01 adds X and Y, sib-02 adds Y and Z."""
    failing = {"rxn-001", "rxn-002", "rxn-004", "rxn-005", "rxn-007"}
    assert failing | {"rxn-008"} == set(POOL)
    analyst = {"r1.base.analyst": [{
        "causes": [cause("leaving", ["rxn-001", "rxn-002"]), cause("protect", ["rxn-002", "rxn-004"]),
                   cause("deprotect", ["rxn-005", "rxn-007"]), cause("scaffold", ["rxn-005", "rxn-007"])],
        "groups": [["leaving", "protect"], ["deprotect", "scaffold"]]}]}
    editor = {"r1.base.editor.1": [skill_edit("groups", [X, Y], ["leaving", "protect"])],
              "r1.base.editor.2": [skill_edit("scaffold", [Y, Z], ["deprotect", "scaffold"])]}
    # round 2 (parents by joint coverage: sib-02, then sib-01): sib-02 fails rxn-001 alone, a single-task
    # failure; sib-01's causes make sib-03, its own child, which adds Z on top of X and Y
    analyst["r2.sib-02.analyst"] = [{"single_task_failures": [{"task": "rxn-001", "note": "seen once"}]}]
    analyst["r2.sib-01.analyst"] = [{"causes": [cause("deprotect", ["rxn-005", "rxn-007"]),
                                                cause("scaffold", ["rxn-005", "rxn-007", "rxn-008"])],
                                     "groups": [["deprotect", "scaffold"]]}]
    editor["r2.sib-01.editor.1"] = [skill_edit("scaffold", [Z], ["deprotect", "scaffold"], keep=("groups",))]
    return write_specs(root, student(POOL), analyst, editor)


def write_specs(root: Path, student_entries: dict, analyst: dict, editor: dict) -> dict[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    specs = {}
    for name, data in (("student", student_entries), ("analyst", analyst), ("editor", editor)):
        (root / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
        specs[name] = f"replay:{root / f'{name}.json'}"
    specs["base"] = str(write_base_bank(root / "base_bank")) if not (root / "base_bank").exists() \
        else str(root / "base_bank")
    return specs


if __name__ == "__main__":  # writes the replay example of docs/evolve.md
    import sys

    target = Path(sys.argv[1] if len(sys.argv) > 1 else "examples/evolve")
    single_scenario(target / "single")
    pool_scenario(target / "pool")
