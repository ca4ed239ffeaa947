"""The retrosynthesis bank's behaviour predicates: answer writes, parses and canonical forms, candidate
templates, forward checks, reactant comparisons, protecting groups and stereo, found in the student's
Python (RDKit calls) and shell steps.

A bank's detector names one by `predicate = "..."`; the suite registry (`unscaffold/suites.py`) finds this
module through the folder's suite.toml (`detectors`) and collects every suite's."""

from __future__ import annotations

import ast
import re
from typing import Any

from unscaffold.behaviors import evidence_view as ev
from unscaffold.behaviors.evidence_view import EPos
from unscaffold.behaviors.predicates import Pos, Predicate, View, by_name, calls_of, pos, tool_steps
from unscaffold.behaviors.pyflow import Flow

ANSWER = r"(?:^|/)answer\.txt$"
PARSE = {"MolFromSmiles", "CanonSmiles", "MolFromSmarts"}
CANONICAL = {"MolToSmiles", "CanonSmiles"}
TEMPLATES = {"RunReactants", "rdchiralRun", "RunReactant"}
ELEMENTS = {"GetSymbol", "GetAtomicNum", "CalcMolFormula", "GetNumAtoms", "GetNumHeavyAtoms"}
RINGS = {"GetRingInfo", "NumRings", "CalcNumRings", "AtomRings", "GetSSSR", "HasSubstructMatch",
         "GetSubstructMatch", "GetSubstructMatches", "MurckoScaffold", "GetScaffoldForMol"}
FRAGMENTS = {"GetMolFrags", "StripMol", "SaltRemover", "LargestFragmentChooser", "GetFormalCharge",
             "FragmentParent", "ChargeParent", "Uncharger", "ChooseLargestFragment"}
STEREO = {"FindMolChiralCenters", "AssignStereochemistry", "GetChiralTag", "FindPotentialStereo",
          "GetStereo", "AssignStereochemistryFrom3D", "EnumerateStereoisomers"}
PROTECTING = re.compile(r"C\(C\)\(C\)C|CC\(C\)\(C\)|\[Si\]|Si\(C\)|OCc1ccccc1|c1ccccc1CO|OCC1c2ccccc2|"
                        r"\[CH3\]C\(\[CH3\]\)\(\[CH3\]\)")
REJECTED = re.compile(r"SMILES Parse Error|Explicit valence|Can't kekulize|INVALID")


def answer_writes(view: View, file: str = ANSWER) -> list[tuple[Pos, bool]]:
    """(where, canonical?) for each write of the answer file, in order: a shell write is canonical only
    when the segment that writes is a program making canonical SMILES; the checking tool's write is."""
    out = []
    for step, flows in zip(view.steps, view.flows, strict=True):
        if step.tool == "check_reactants" and re.search(file, str(step.arguments.get("write_to", ""))):
            out.append((pos(step), True))
        for event in step.files:
            if event.kind == "write" and re.search(file, event.path):
                canonical = any(f.program.order == event.order and f.called(CANONICAL) for f in flows)
                out.append((pos(step, order=event.order), canonical))
        for flow in flows:
            canonical_source = flow.calls_source(CANONICAL)
            tainted = flow.tainted(canonical_source) if flow.tree is not None else set()
            for node, values in flow.writes(file):
                out.append((pos(step, flow, node), any(flow.reaches(v, canonical_source, tainted) for v in values)))
    return sorted(out)


def answer_parses(view: View, file: str = ANSWER) -> list[Pos]:
    """RDKit parsing what the answer file holds (read in the program, or its text copied into it)."""
    out = tool_steps(view, ["check_reactants"], r'"(?:from_file|write_to)": "[^"]*answer\.txt"')
    for step, flow in view.programs():
        out += [pos(step, flow, c) for c in flow.call_on(PARSE, flow.reads_file(file))]
    return sorted(out)


def molecules_compared(view: View, kinds: set[str]) -> list[Pos]:
    """A program that looks at what molecules are made of (elements, rings, fragments): a call, not an import."""
    return calls_of(view, kinds)


def forward_runs(view: View) -> list[Pos]:
    """A template run forwards: reactants (two or more, or a many-to-one SMARTS) in, the product out."""
    def forward(flow: Flow, call: ast.Call) -> bool:
        arg = call.args[0] if call.args else None
        if isinstance(arg, ast.Tuple | ast.List) and len(arg.elts) >= 2:
            return True
        smarts = [flow.value(c.args[0]) for c in flow.calls({"ReactionFromSmarts"}) if c.args]
        return any(s and ">>" in s and "." in s.split(">>")[0] for s in smarts)
    return calls_of(view, {"RunReactants"}, forward)


def templates_applied(view: View) -> list[Pos]:
    """Templates run on the product to list precursors (a forward run of reactants is not a listing)."""
    return sorted(set(calls_of(view, TEMPLATES)) - set(forward_runs(view)))


def p_candidates_listed(view: View, p: dict[str, Any]) -> bool:
    return bool(tool_steps(view, ["retro_candidates"]) or templates_applied(view))


def p_forward_checked(view: View, p: dict[str, Any]) -> bool:
    return bool(tool_steps(view, ["forward_check"]) or forward_runs(view))


def p_reactants_checked(view: View, p: dict[str, Any]) -> bool:
    kinds = {"elements": ELEMENTS, "rings": RINGS, "fragments": FRAGMENTS}
    wanted = set().union(*(kinds[k] for k in p.get("compare", ["elements", "rings", "fragments"])))
    return bool(tool_steps(view, ["check_reactants"]) or molecules_compared(view, wanted))


def p_answer_written(view: View, p: dict[str, Any]) -> bool:
    return bool(answer_writes(view))


def p_answer_canonical_last(view: View, p: dict[str, Any]) -> bool:
    writes = answer_writes(view)
    return bool(writes) and writes[-1][1]


def p_answer_canonical_any(view: View, p: dict[str, Any]) -> bool:
    return any(canonical for _, canonical in answer_writes(view))


def p_answer_parsed_after_write(view: View, p: dict[str, Any]) -> bool:
    writes = answer_writes(view)
    if writes and writes[-1][1]:
        return True
    last = writes[-1][0] if writes else (-1, 0, 0, 0)
    return any(c >= last for c in answer_parses(view))


def p_write_justified(view: View, p: dict[str, Any]) -> bool:
    writes = answer_writes(view)
    if not writes:
        return False
    where = writes[-1][0]
    if any(s.tool == "check_reactants" and pos(s) == where for s in view.steps):
        return True
    before = (tool_steps(view, ["retro_candidates", "forward_check", "check_reactants"]) + calls_of(view, TEMPLATES)
              + molecules_compared(view, ELEMENTS | RINGS | FRAGMENTS))
    return any(b < where for b in before)


def p_bounded(view: View, p: dict[str, Any]) -> bool:
    if any(s.bounded for s in view.steps) or calls_of(view, {"alarm", "setitimer"}):
        return True
    return any(any(k.arg == "timeout" for k in c.keywords) for _, f in view.programs() for c in f.calls())


def p_recheck_after_rejection(view: View, p: dict[str, Any]) -> bool:
    rejected = next((s.index for s in view.steps if REJECTED.search(s.observation)), None)
    if rejected is None:
        return False
    later = tool_steps(view, ["check_reactants"]) + calls_of(view, PARSE)
    return any(where[0] > rejected for where in later)


def p_protection_queried(view: View, p: dict[str, Any]) -> bool:
    if tool_steps(view, ["retro_candidates"], r'"reaction_type": "(?:[56]|[^"]*[Pp]rotection[^"]*)"'):
        return True
    for _, flow in view.programs():
        if flow.called(TEMPLATES | {"ReactionFromSmarts"}):
            smarts = [flow.value(c.args[0]) or "" for c in flow.calls({"ReactionFromSmarts"}) if c.args]
            if any(PROTECTING.search(s) for s in smarts):
                return True
    return False


def p_stereo_kept(view: View, p: dict[str, Any]) -> bool:
    if tool_steps(view, ["check_reactants", "forward_check"], r'"(?:smiles|reactants)": "[^"]*@'):
        return True
    for step in view.steps:
        for event in step.files:
            if event.kind == "write" and re.search(ANSWER, event.path) and "@" in (event.content or ""):
                return True
    for _, flow in view.programs():
        if flow.called(STEREO):
            return True
        if any(any(k.arg == "isomericSmiles" for k in c.keywords) for c in flow.calls({"MolToSmiles"})):
            return True
        for _, values in flow.writes(ANSWER):
            if any("@" in (flow.value(v) or "") for v in values):
                return True
    return False


PREDICATES: dict[str, Predicate] = by_name(p_candidates_listed, p_forward_checked, p_reactants_checked,
                                           p_answer_written, p_answer_canonical_last, p_answer_canonical_any,
                                           p_answer_parsed_after_write, p_write_justified, p_bounded,
                                           p_recheck_after_rejection, p_protection_queried, p_stereo_kept)


# ---- evidence forms: what the recorded commands did (behaviors/evidence_view.py) --------------------------

PARSE_CALLS = r"^rdkit\.Chem\.(?:MolFromSmiles|CanonSmiles)$"
CANONICAL_CALLS = r"^rdkit\.Chem\.(?:MolToSmiles|CanonSmiles)$"
WORKSPACE_ANSWER = r"^answer\.txt$"  # the recorded path is relative to the workspace: /tmp/answer.txt is not it


def answer_writes_recorded(view: View) -> list[tuple[EPos, str | None, bool]]:
    """(where, content afterwards, written by the checking tool) for each write of the workspace's answer.txt."""
    out = [(at, content, False) for at, content in ev.writes(view, WORKSPACE_ANSWER)]
    by_tool = ev.tool_calls(view, {"check_reactants"}, r'"write_to": "(?:\./)?answer\.txt"')
    out += [(at, None, True) for at, _ in by_tool]
    return sorted(out, key=lambda w: w[0])


def _parts(content: str) -> list[str]:
    return [p for p in content.strip().split(".") if p]


def e_answer_written(view: View, p: dict[str, Any]) -> bool:
    return bool(answer_writes_recorded(view))


def _last_answer(view: View) -> tuple[Any, str | None, bool] | None:
    """The last recorded write of answer.txt: where, its content (the command's last known content of the
    file), and whether the checking tool wrote it; None when nothing wrote it."""
    writes = answer_writes_recorded(view)
    if not writes:
        return None
    where, content, by_tool = writes[-1]
    content = next((c for at, c, _ in reversed(writes) if at[0] == where[0] and c is not None), content)
    return where, content, by_tool


def e_answer_parsed_after_write(view: View, p: dict[str, Any]) -> bool:
    """After the last write of answer.txt, its content (as a whole, or every dot-separated part) went through an
    RDKit parse that returned a molecule, in a command that had not failed by then; or the content was made of
    canonical SMILES RDKit had just produced (parsed to be written); or the checking tool wrote it."""
    last = _last_answer(view)
    if last is None or last[2]:
        return last is not None  # the checking tool wrote it
    where, content, _ = last
    if not content or not content.strip():
        return False
    parsed = {str(ev.value_of(c, 0, "SMILES", "smi")).strip() for at, c in ev.calls(view, PARSE_CALLS)
              if at > where and c.result is not None}
    made = {str(c.result).strip() for at, c in ev.calls(view, CANONICAL_CALLS) if at < where and at[0] == where[0]}
    whole, parts = content.strip(), _parts(content)
    return whole in parsed or all(part in parsed for part in parts) or whole in made or all(
        part in made for part in parts)


def e_answer_canonical_last(view: View, p: dict[str, Any]) -> bool:
    """The last answer written is what RDKit's canonical writer produced (every part), in that command."""
    last = _last_answer(view)
    if last is None or last[2]:
        return last is not None  # the checking tool wrote it
    where, content, _ = last
    made = {str(c.result).strip() for at, c in ev.calls(view, CANONICAL_CALLS) if at < where and at[0] == where[0]}
    if not content or not content.strip():
        return False
    return content.strip() in made or all(p in made for p in _parts(content))


RUN_REACTANTS = r"\.ChemicalReaction\.RunReactants$"


def _template_runs(view: View) -> list[tuple[EPos, int]]:
    """(where, how many reactants) of each template run that returned, in commands that had not failed."""
    return [(at, len(c.args[0])) for at, c in ev.calls(view, RUN_REACTANTS) if c.args and isinstance(c.args[0], list)]


def e_forward_checked(view: View, p: dict[str, Any]) -> bool:
    """A template ran forwards: two or more reactants in (or the forward-checking tool)."""
    return bool(ev.tool_calls(view, {"forward_check"})) or any(n >= 2 for _, n in _template_runs(view))


def e_candidates_listed(view: View, p: dict[str, Any]) -> bool:
    """Templates ran on one molecule, the product, to list precursors (or the listing tool). rdchiral is not
    recorded, so its calls are still read from the programs' text."""
    return bool(ev.tool_calls(view, {"retro_candidates"})) or any(n == 1 for _, n in _template_runs(view)) or bool(
        calls_of(view, {"rdchiralRun"}))


EVIDENCE: dict[str, Predicate] = {"forward_checked": e_forward_checked, "candidates_listed": e_candidates_listed,
                                  "answer_written": e_answer_written,
                                  "answer_parsed_after_write": e_answer_parsed_after_write,
                                  "answer_canonical_last": e_answer_canonical_last}
