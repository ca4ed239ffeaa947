"""Check a proposed reactant set against the product, and (with `write_to`) write it canonically.

Arguments: `smiles` (dot-separated reactants) or `from_file` (its first non-empty line), optional `product`
(default: the first line of product.smi), optional `write_to` (written only when nothing blocks).
Blocking problems: a fragment that does not parse, the product itself among the reactants, an element of
the product that no reactant carries (a reactant is missing), a fragment that is a counter-ion or a pure
reagent. Warnings that do not block: a ring system of the product found in no reactant (lost scaffold,
unless the reaction forms that ring), fewer stereo marks than the product, atom maps (cleared).
Exit code 0 when valid, 1 when not, 2 on bad arguments.
"""

from __future__ import annotations

import os
import sys
from collections import Counter

from rdkit import Chem, rdBase

from unscaffold.benchmarks.retrosynthesis.bank_src.common import BAD_ARGUMENT, json_argument
from unscaffold.benchmarks.retrosynthesis.chem import canonical_mol

rdBase.DisableLog("rdApp.*")

# Species that never contribute atoms to a USPTO product: bases, coupling agents, hydride sources, water.
REAGENTS = {
    "CCN(CC)CC": "triethylamine", "CCN(C(C)C)C(C)C": "DIPEA", "CN(C)c1ccncc1": "DMAP",
    "C(=NC1CCCCC1)=NC1CCCCC1": "DCC", "CCN=C=NCCCN(C)C": "EDC", "On1nnc2ccccc21": "HOBt",
    "O": "water", "[H][H]": "hydrogen", "Cl": "hydrogen chloride", "O=C([O-])[O-]": "carbonate",
    "[BH4-]": "borohydride", "[AlH4-]": "aluminium hydride", "[H-]": "hydride",
}
STAMP = ".answer_checked"  # next to the written answer: what the check last wrote there


def parse(smiles: str) -> tuple[Chem.Mol | None, str | None]:
    """(molecule, None) or (None, the RDKit error)."""
    mol = Chem.MolFromSmiles(smiles, sanitize=False)
    if mol is None:
        return None, "SMILES Parse Error"
    try:
        Chem.SanitizeMol(mol)
    except Exception as e:
        return None, str(e).strip().splitlines()[0]
    return mol, None


def canonical(mol: Chem.Mol, stereo: bool = True) -> str:
    """The scorer's canonical form, taken from a copy (clearing atom maps would change the caller's molecule)."""
    text = canonical_mol(Chem.Mol(mol), stereo, mapped=True)
    if text is None:
        raise ValueError(f"RDKit cannot read back its own SMILES {Chem.MolToSmiles(mol)!r}")
    return text


def elements(mol: Chem.Mol) -> Counter:
    return Counter(atom.GetSymbol() for atom in mol.GetAtoms())


def stereo_marks(mol: Chem.Mol) -> int:
    centres = len(Chem.FindMolChiralCenters(mol, includeUnassigned=False, useLegacyImplementation=False))
    bonds = sum(1 for b in mol.GetBonds() if b.GetStereo() in (Chem.BondStereo.STEREOE, Chem.BondStereo.STEREOZ))
    return centres + bonds


def ring_systems(mol: Chem.Mol) -> list[tuple[str, Chem.Mol]]:
    """Fused ring systems as generic queries (any bond order, element only) with a readable SMILES."""
    rings = [set(r) for r in mol.GetRingInfo().AtomRings()]
    systems: list[set[int]] = []
    for ring in rings:
        merged = [s for s in systems if len(s & ring) >= 2]
        for s in merged:
            systems.remove(s)
            ring |= s
        systems.append(ring)
    params = Chem.AdjustQueryParameters.NoAdjustments()
    params.makeBondsGeneric = True  # type: ignore[assignment]  # the RDKit stub types this flag as its owner
    out = []
    for atoms in systems:
        text = Chem.MolFragmentToSmiles(mol, atomsToUse=sorted(atoms), canonical=True)
        query = Chem.MolFromSmiles(text, sanitize=False)
        if query is not None:
            for atom in query.GetAtoms():  # element only: charge and hydrogens may change in the reaction
                atom.SetFormalCharge(0)
                atom.SetNumExplicitHs(0)
            query.UpdatePropertyCache(False)
            out.append((text, Chem.AdjustQueryProperties(query, params)))
    return out


def reactant_line(args: dict) -> tuple[str | None, str | None]:
    if isinstance(args.get("smiles"), str):
        return args["smiles"].strip(), None
    path = args.get("from_file")
    if not isinstance(path, str):
        return None, "give `smiles` or `from_file`"
    if not os.path.isfile(path):
        return None, f"{path} not found"
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    if not lines:
        return None, f"{path} is empty"
    if len(lines) > 1:
        print(f"NOTE: {path} holds {len(lines)} lines; only the first counts as the answer")
    return lines[0], None


def product_smiles(args: dict) -> str | None:
    if isinstance(args.get("product"), str) and args["product"].strip():
        return args["product"].strip()
    if os.path.isfile("product.smi"):
        with open("product.smi", encoding="utf-8") as f:
            return f.readline().strip() or None
    return None


def check(line: str, product_text: str | None) -> tuple[str | None, list[str], list[str], list[str]]:
    """(canonical answer line or None, blocking problems, warnings, info lines)."""
    problems, warnings, info = [], [], []
    if any(ch.isspace() for ch in line):
        return None, ["INVALID: the line holds whitespace; write one line of dot-separated SMILES"], [], []
    fragments = line.split(".")
    if any(not f for f in fragments):
        return None, ["INVALID: an empty fragment (two dots in a row, or a dot at an end)"], [], []
    whole, error = parse(line)
    if whole is None:
        bad = next((f for f in fragments if parse(f)[0] is None), line)
        return None, [f"INVALID: {bad!r} does not parse ({error})"], [], []
    if any(atom.GetAtomMapNum() for atom in whole.GetAtoms()):
        warnings.append("NOTE: atom maps found; the canonical form clears them")
    # One line per reactant set: canonical fragments in sorted order (the form the scorer compares).
    answer = ".".join(sorted(canonical(Chem.MolFromSmiles(part)) for part in canonical(whole).split(".")))
    mols = [Chem.MolFromSmiles(s) for s in answer.split(".")]
    product = parse(product_text)[0] if product_text else None
    if product_text and product is None:
        problems.append(f"INVALID: the product {product_text!r} does not parse")
    if product is None:
        info.append("no product given (pass `product` or keep product.smi): product checks skipped")
        return answer, problems, warnings, info
    target = canonical(product)
    if answer == target or target in answer.split("."):
        problems.append("INVALID: the answer contains the product itself")
    elif canonical(whole, stereo=False) == canonical(product, stereo=False):
        problems.append("INVALID: the answer is the product with other stereo marks")
    product_elements = elements(product)
    for smiles, mol in zip(answer.split("."), mols, strict=True):
        name = REAGENTS.get(smiles)
        if name is None and mol.GetNumAtoms() == 1 and mol.GetAtomWithIdx(0).GetFormalCharge() != 0:
            name = "counter-ion"
        if name is None and not set(elements(mol)) & set(product_elements):
            name = "species that shares no element with the product"
        if name:
            problems.append(f"REAGENT: {smiles} ({name}) contributes no atoms to the product; drop it")
    have = sum((elements(m) for m in mols), Counter())
    for symbol, count in sorted(product_elements.items()):
        if have[symbol] < count:
            problems.append(f"MISSING: the product has {count} {symbol} but the reactants only {have[symbol]}: "
                            "a reactant is missing")
    heavy = sum(m.GetNumAtoms() for m in mols)
    info.append(f"heavy atoms: reactants {heavy}, product {product.GetNumAtoms()} ({heavy - product.GetNumAtoms()} "
                "leave in the reaction)")
    for text, query in ring_systems(product):
        if not any(m.HasSubstructMatch(query) for m in mols):
            warnings.append(f"LOST ring system {text}: no reactant carries it (fine only if this reaction forms it)")
    marks = (stereo_marks(product), sum(stereo_marks(m) for m in mols))
    if marks[0] > marks[1]:
        warnings.append(f"STEREO: the product has {marks[0]} stereo marks, the reactants {marks[1]}: keep @/@@ and "
                        "/ \\ of centres the reaction leaves alone")
    return answer, problems, warnings, info


REAGENTS = {canonical(Chem.MolFromSmiles(k)): v for k, v in REAGENTS.items()}


def main(argv: list[str]) -> int:
    args = json_argument(argv, 'usage: one JSON argument \'{"smiles": SMILES, "product": SMILES, "write_to": PATH}\'')
    if args is BAD_ARGUMENT:
        return 2
    line, error = reactant_line(args if isinstance(args, dict) else {})
    if line is None:
        print(f"INVALID: {error}")
        return 1
    answer, problems, warnings, info = check(line, product_smiles(args))
    if answer:
        print(f"reactants (canonical): {answer}")
    for text in info + warnings + problems:
        print(text)
    if problems or answer is None:
        print("verdict: INVALID" + (" (nothing written)" if args.get("write_to") else ""))
        return 1
    print("verdict: VALID")
    target = args.get("write_to")
    if isinstance(target, str) and target:
        with open(target, "w", encoding="utf-8") as f:
            f.write(answer + "\n")
        with open(os.path.join(os.path.dirname(target) or ".", STAMP), "w", encoding="utf-8") as f:
            f.write(answer + "\n")
        print(f"wrote {target}: {answer}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
