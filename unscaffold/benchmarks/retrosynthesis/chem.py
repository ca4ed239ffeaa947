"""RDKit canonical forms and the USPTO exact-match scorer.

Scoring runs in-process (no sandbox, no subprocess) because it is called once per trial and in bulk by
the baselines; a score is a handful of parses. The comparison follows the USPTO-50k evaluators: canonical
SMILES with atom maps cleared, reactants compared as a multiset (order-free). The details add the figures
the literature also reports: MaxFrag (largest reactant only), a stereo-free match and the Jaccard overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

from rdkit import Chem, rdBase

from unscaffold.benchmarks.base import Score

rdBase.DisableLog("rdApp.*")
RDKIT_VERSION: str = rdBase.rdkitVersion
MAX_ANSWER_CHARS = 100_000  # more than any reactant set; a runaway file is cut, not read whole

CLASS_NAMES: dict[int, str] = {
    1: "Heteroatom alkylation and arylation",
    2: "Acylation and related processes",
    3: "C-C bond formation",
    4: "Heterocycle formation",
    5: "Protections",
    6: "Deprotections",
    7: "Reductions",
    8: "Oxidations",
    9: "Functional group interconversion (FGI)",
    10: "Functional group addition (FGA)",
}


def canonical_mol(mol: Chem.Mol, stereo: bool, mapped: bool) -> str | None:
    """Canonical SMILES of a parsed molecule, atom maps cleared where `mapped`; changes `mol` in place."""
    if mapped:
        for atom in mol.GetAtoms():
            atom.SetAtomMapNum(0)
    if not stereo:
        Chem.RemoveStereochemistry(mol)
    # Parsing the first canonical string again makes the form stable (maps and stereo flags can shift ranks).
    again = Chem.MolFromSmiles(Chem.MolToSmiles(mol))
    return Chem.MolToSmiles(again) if again is not None else None


def canonical(smiles: str, *, stereo: bool = True) -> str | None:
    """Canonical SMILES with atom maps cleared; None when RDKit cannot parse it."""
    mol = Chem.MolFromSmiles(smiles)
    return None if mol is None else canonical_mol(mol, stereo, mapped=":" in smiles)


def fragments(smiles: str, *, stereo: bool = True) -> list[str] | None:
    """The sorted canonical fragments of a dot-separated SMILES (ring bonds may span dots, so the whole
    line is parsed first); None when it does not parse."""
    whole = canonical(smiles, stereo=stereo)
    if whole is None:
        return None
    parts = [canonical(part) for part in whole.split(".")]
    return None if any(p is None for p in parts) else sorted(p for p in parts if p)


def heavy_atoms(smiles: str) -> int:
    mol = Chem.MolFromSmiles(smiles)
    return mol.GetNumHeavyAtoms() if mol is not None else 0


def largest(parts: list[str]) -> str:
    """The largest fragment by heavy atoms (ties: the longer, then the smaller string), as MaxFrag uses."""
    return max(parts, key=lambda s: (heavy_atoms(s), len(s), [-ord(c) for c in s]))


@dataclass(frozen=True)
class Gold:
    """A task's reference, canonicalised once so that scoring an answer costs only the answer's parses."""

    product: str
    reactants: tuple[str, ...]
    flat: tuple[str, ...]
    maxfrag: str

    @classmethod
    def of(cls, reactants: str, product: str) -> Gold:
        exact, target = fragments(reactants), canonical(product)
        if exact is None or target is None:
            raise ValueError(f"reference does not parse: {reactants}>>{product}")
        flat = sorted(canonical(part, stereo=False) or part for part in exact)
        return cls(product=target, reactants=tuple(exact), flat=tuple(flat), maxfrag=largest(exact))


def score_answer(text: str | None, gold: Gold) -> Score:
    """Reward 1 for the exact reactant multiset, else 0 with the reason; never raises on a bad answer."""
    details: dict[str, object] = {"rdkit_version": RDKIT_VERSION, "gold": ".".join(gold.reactants)}
    if text is None:
        return Score(reward=0.0, reason="answer.txt not found", details=details)
    lines = [line.strip() for line in text[:MAX_ANSWER_CHARS].splitlines() if line.strip()]
    if not lines:
        return Score(reward=0.0, reason="answer.txt is empty", details=details)
    line = lines[0]
    details.update({"answer": line[:500], "lines": len(lines)})
    if any(ch.isspace() for ch in line):
        return Score(reward=0.0, reason="the answer line holds whitespace (one line of dot-separated SMILES "
                     "expected)", details=details)
    if any(not part for part in line.split(".")):
        return Score(reward=0.0, reason="the answer has an empty fragment (stray dot)", details=details)
    predicted = fragments(line)
    if predicted is None:
        return Score(reward=0.0, reason="the answer is not valid SMILES", details=details)
    flat = sorted(canonical(part, stereo=False) or part for part in predicted)
    exact = tuple(predicted) == gold.reactants
    shared, union = set(predicted) & set(gold.reactants), set(predicted) | set(gold.reactants)
    details.update({
        "predicted": ".".join(predicted),
        "exact": exact,
        "maxfrag": largest(predicted) == gold.maxfrag,
        "stereo_free": tuple(flat) == gold.flat,
        "jaccard": round(len(shared) / len(union), 4) if union else 0.0,
    })
    if gold.product in predicted:
        return Score(reward=0.0, reason="the answer contains the product itself", details=details)
    if not exact:
        return Score(reward=0.0, reason=f"the reactants differ from the recorded ones: answered "
                     f"{'.'.join(predicted)}, expected {'.'.join(gold.reactants)}", details=details)
    return Score(reward=1.0, details=details)
