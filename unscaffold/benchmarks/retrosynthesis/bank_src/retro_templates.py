"""Retro-template library for single-step retrosynthesis (RDKit reaction SMARTS over the ten USPTO-50k classes).

One library, two uses, chosen by the arguments:
- `{"product": P, "reaction_type"?: T, "max_candidates"?: N}` lists ranked precursor sets for P; each line
  starts with its reaction type, and templates of type T (a class number or name) come first.
- `{"product": P, "reactants": R}` checks the forward direction: does some template map R back to P?

The script is self-contained (it is also run as an inline recipe), so the library travels inside it: the
templates are a table, one general textbook transform a row (name, class, prior, retro SMARTS, co-reactants).
Co-reactants are the recorded reagents that contribute atoms (Boc2O, mCPBA, NBS, SOCl2, ...); they belong
in the answer. Priors order templates when no reaction type is given; they are rough frequencies, not
probabilities. Exit codes: 0 done (or confirmed), 1 nothing found (or not confirmed), 2 bad input.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable

from rdkit import Chem, rdBase
from rdkit.Chem import rdChemReactions

from unscaffold.benchmarks.bankgen import bundled
from unscaffold.benchmarks.retrosynthesis.bank_src.common import BAD_ARGUMENT, json_argument
from unscaffold.benchmarks.retrosynthesis.chem import CLASS_NAMES, canonical

rdBase.DisableLog("rdApp.*")

CLASSES = CLASS_NAMES  # class number -> name, as the scorer's reports spell them
MAX_CANDIDATES = 30

# Recorded co-reactants (they contribute atoms to the product, so they are part of the answer), by the name
# the table's co-reactant column uses.
CO_REACTANTS = {
    "BOC2O": "CC(C)(C)OC(=O)OC(=O)OC(C)(C)C",
    "CBZCL": "O=C(Cl)OCc1ccccc1",
    "FMOCCL": "O=C(Cl)OCC1c2ccccc2-c2ccccc21",
    "TBSCL": "CC(C)(C)[Si](C)(C)Cl",
    "DHP": "C1=COCCC1",
    "TRTCL": "ClC(c1ccccc1)(c1ccccc1)c1ccccc1",
    "GLYCOL": "OCCO",
    "BNBR": "BrCc1ccccc1",
    "TF2O": "O=S(=O)(OS(=O)(=O)C(F)(F)F)C(F)(F)F",
    "MCPBA": "O=C(OO)c1cccc(Cl)c1",
    "SOCL2": "O=S(Cl)Cl",
    "OXALYL": "O=C(Cl)C(=O)Cl",
    "PBR3": "BrP(Br)Br",
    "POCL3": "O=P(Cl)(Cl)Cl",
    "B2PIN2": "CC1(C)OB(B2OC(C)(C)C(C)(C)O2)OC1(C)C",
    "AZIDE": "[N-]=[N+]=[N-]",
    "CYANIDE": "[C-]#N",
    "NBS": "O=C1CCC(=O)N1Br",
    "NCS": "O=C1CCC(=O)N1Cl",
    "NIS": "O=C1CCC(=O)N1I",
    "BR2": "BrBr",
    "HNO3": "O=[N+]([O-])O",
    "DMF": "CN(C)C=O",
    "CLSO3H": "O=S(=O)(O)Cl",
}

# Recurring atom patterns, written `{NAME}` in the table's SMARTS. Bonds broken in the retro direction are
# `!@` (never inside a ring); E-alkene geometry written with / is ignored when matching a product and produced
# when a template runs forward. AMINE: a substituted basic amine N (no amide, hydrazine or ammonia);
# FREE_AMINE: a free one, for deprotections; AZOLE_N: a substituted pyrrole-type ring nitrogen; PH: an
# unsubstituted phenyl.
PATTERNS = {
    "AMINE": "N;+0;!D1;!$(N-[C,S,P]=[O,S,N]);!$(N-[N,O]);!$(N=*);!$(N#*)",
    "FREE_AMINE": "N;H1,H2;+0;!$(N-[C,S,P]=[O,S,N]);!$(N-[N,O]);!$(N=*);!$(N#*)",
    "AZOLE_N": "n;X3;r5;+0",
    "EWG_ARYL": "c;$(c1ccc([N+](=O)[O-])cc1),$(c1ccccc1[N+](=O)[O-]),$(c1ccc(C#N)cc1),$(c1ccccc1C#N)",
    "PH": "c1[cH][cH][cH][cH][cH]1",
    "BOC": "C(=O)OC([CH3])([CH3])[CH3]",
    "ACID_C": "[#6:1]-[C:2](=[O:3])-[OH:4]",
    "ALCOHOL_C": "[#6;!$(C=O):1]-[OH:2]",
    "BENZO": "[c:4]2:[c:5]:[c:6]:[c:7]:[c:8]:[c:9]:2",
    "BENZO_R": "[c:4]1[c:5][c:6][c:7][c:8][c:9]1",
}

# The library, one template a row in retro_templates.tsv (tab-separated, `#` lines are section titles):
# name, class, prior, retro SMARTS (product >> precursors), co-reactant names (space-separated), prefer
# (`big_first` or `small_first`: which precursor of a symmetric disconnection to list first).
TABLE = bundled(__file__, "retro_templates.tsv")


def load_templates(table: str) -> list[dict]:
    """The table's rows as templates: {name, class, prior, smarts, co, prefer}, in the table's order."""
    rows = [line.split("\t") for line in table.splitlines()[1:] if line.strip() and not line.startswith("#")]
    return [{"name": name, "class": int(cls), "prior": float(prior), "smarts": smarts.format_map(PATTERNS),
             "co": tuple(CO_REACTANTS[c] for c in co.split()), "prefer": prefer or None}
            for name, cls, prior, smarts, co, prefer in ((row + ["", ""])[:6] for row in rows)]


TEMPLATES = load_templates(TABLE)

ORGANIC = {5, 6, 7, 8, 9, 15, 16, 17, 35, 53}


def _sanitized(mol: Chem.Mol) -> Chem.Mol | None:
    """A template product made chemically sane: hydrogens recomputed, stray aromatic flags dropped, and an
    aromatic N hydrogen toggled if kekulisation needs it (templates cannot always say where the H goes)."""
    mol.UpdatePropertyCache(False)
    Chem.FastFindRings(mol)
    for atom in mol.GetAtoms():
        if atom.GetIsAromatic() and not atom.IsInRing():
            atom.SetIsAromatic(False)
        if atom.GetAtomicNum() in ORGANIC and not atom.GetIsAromatic():
            atom.SetNoImplicit(False)
            atom.SetNumExplicitHs(0)
    for bond in mol.GetBonds():
        if bond.GetIsAromatic() and not bond.IsInRing():
            bond.SetIsAromatic(False)
            bond.SetBondType(Chem.BondType.SINGLE)
    attempts = [None] + [
        (atom.GetIdx(), delta)
        for atom in mol.GetAtoms() if atom.GetIsAromatic() and atom.GetAtomicNum() == 7 for delta in (-1, 1)
    ]
    for attempt in attempts:
        trial = Chem.Mol(mol)
        if attempt is not None:
            atom = trial.GetAtomWithIdx(attempt[0])
            hydrogens = atom.GetNumExplicitHs() + attempt[1]
            if not 0 <= hydrogens <= 1:
                continue
            atom.SetNumExplicitHs(hydrogens)
            atom.SetNoImplicit(True)
        try:
            Chem.SanitizeMol(trial)
        except Exception:
            continue
        return trial
    return None


def _outcome_smiles(mols: tuple) -> list[str] | None:
    out = []
    for mol in mols:
        fixed = _sanitized(mol)
        smiles = canonical(Chem.MolToSmiles(fixed)) if fixed is not None else None
        if smiles is None:
            return None
        out.append(smiles)
    return out


_COMPILED: dict[str, tuple] = {}


def compiled(template: dict) -> tuple:
    """(retro reaction, forward reaction, product query), built once per template."""
    key = template["smarts"]
    if key not in _COMPILED:
        product_side, precursor_side = key.split(">>")
        retro = rdChemReactions.ReactionFromSmarts(key)
        forward = rdChemReactions.ReactionFromSmarts(f"{precursor_side}>>{product_side}")
        retro.Initialize()
        forward.Initialize()
        _COMPILED[key] = (retro, forward, Chem.MolFromSmarts(product_side))
    return _COMPILED[key]


def class_of(text: object) -> int | None:
    """A reaction type given as a class number or (part of) a class name; None if it names no class."""
    if text is None or str(text).strip() == "":
        return None
    text = str(text).strip().lower()
    if text.isdigit() and int(text) in CLASSES:
        return int(text)
    for number, name in CLASSES.items():
        if text == name.lower() or text in name.lower():
            return number
    return None


def enumerate_precursors(product: str, reaction_class: int | None = None, limit: int = 10) -> list[dict]:
    """Ranked, de-duplicated precursor sets: [{'reactants', 'template', 'class', 'co'}]."""
    mol = Chem.MolFromSmiles(product)
    product_key = canonical(product)
    ranked = sorted(
        enumerate(TEMPLATES),
        key=lambda it: (it[1]["class"] != reaction_class if reaction_class else False, -it[1]["prior"], it[0]),
    )
    seen, out = set(), []
    for _, template in ranked:
        retro, _, query = compiled(template)
        if not mol.HasSubstructMatch(query):
            continue
        outcomes = []
        for products in retro.RunReactants((mol,), 500):
            smiles = _outcome_smiles(products)
            if smiles is None or product_key in smiles:
                continue
            outcomes.append(smiles)
        if template["prefer"]:
            sign = -1 if template["prefer"] == "big_first" else 1
            outcomes.sort(key=lambda s: sign * Chem.MolFromSmiles(s[0]).GetNumHeavyAtoms())
        for smiles in outcomes:
            fragments = smiles + _canonical_parts(template["co"])
            key = ".".join(sorted(fragments))
            if key in seen:
                continue
            seen.add(key)
            out.append({"reactants": ".".join(fragments), "template": template["name"], "class": template["class"],
                        "co": list(template["co"])})
            if len(out) >= limit:
                return out
    return out


def _canonical_parts(smiles: Iterable[str]) -> list[str]:
    """Canonical forms of SMILES known to parse (the table's co-reactants, reactants checked already)."""
    out = []
    for text in smiles:
        form = canonical(text)
        if form is None:
            raise ValueError(f"RDKit cannot parse {text!r}")
        out.append(form)
    return out


def _without(fragments: list[str], co_reactants: list[str]) -> list[str] | None:
    """The fragments left once each recorded co-reactant is taken out; None if one is missing."""
    remaining = list(fragments)
    for co in co_reactants:
        if co not in remaining:
            return None
        remaining.remove(co)
    return remaining


def forward_matches(product: str, reactants: str) -> tuple[list[str], list[str]]:
    """Templates that map the reactants onto the product: (exact, ignoring stereo) lists of template names."""
    mol = Chem.MolFromSmiles(product)
    target, target_flat = canonical(product), canonical(product, stereo=False)
    fragments = _canonical_parts(reactants.split("."))
    exact, flat = [], []
    for template in TEMPLATES:
        _, forward, query = compiled(template)
        if not mol.HasSubstructMatch(query):
            continue
        remaining = _without(fragments, _canonical_parts(template["co"]))
        if remaining is None:
            continue
        count = forward.GetNumReactantTemplates()
        if len(remaining) != count:
            continue
        found = None
        for order in set(itertools.permutations(range(count))):
            mols = tuple(Chem.MolFromSmiles(remaining[i]) for i in order)
            for products in forward.RunReactants(mols, 500):
                smiles = _outcome_smiles(products)
                if smiles is None:
                    continue
                made = ".".join(smiles)
                if made == target:
                    found = "exact"
                    break
                if found is None and canonical(made, stereo=False) == target_flat:
                    found = "flat"
            if found == "exact":
                break
        label = f"[{template['class']} {CLASSES[template['class']]}] {template['name']}"
        if found == "exact":
            exact.append(label)
        elif found == "flat":
            flat.append(label)
    return exact, flat


def run_enumerate(args: dict) -> int:
    product = canonical(args["product"])
    if product is None:
        print(f"INVALID: the product {args['product']!r} does not parse")
        return 2
    limit = max(1, min(int(args.get("max_candidates") or 10), MAX_CANDIDATES))
    wanted = class_of(args.get("reaction_type"))
    print(f"product: {product}")
    if wanted:
        print(f"reaction type: {CLASSES[wanted]} (class {wanted}); its templates are listed first")
    elif args.get("reaction_type"):
        print(f"reaction type {args['reaction_type']!r} names no class; all templates are ranked by prior")
    candidates = enumerate_precursors(product, wanted, limit)
    if not candidates:
        print("no template matches this product: reason from the structure instead")
        return 1
    print(f"{len(candidates)} candidate precursor sets (at most {limit}), best first:")
    for i, c in enumerate(candidates, 1):
        co = f" (recorded co-reactant: {', '.join(c['co'])})" if c["co"] else ""
        print(f"{i:>2}. [{c['class']} {CLASSES[c['class']]}] {c['template']}{co}")
        print(f"    reactants: {c['reactants']}")
    return 0


def run_forward(args: dict) -> int:
    product = canonical(args["product"])
    reactants = args["reactants"]
    if product is None:
        print(f"INVALID: the product {args['product']!r} does not parse")
        return 2
    if any(canonical(f) is None for f in reactants.split(".")):
        print(f"INVALID: the reactants {reactants!r} do not parse")
        return 2
    exact, flat = forward_matches(product, reactants)
    print(f"product: {product}")
    print(f"reactants: {'.'.join(_canonical_parts(reactants.split('.')))}")
    for label in exact:
        print(f"  forward template gives the product: {label}")
    for label in flat:
        print(f"  forward template gives the product only without stereo: {label}")
    if exact:
        print("CONFIRMED: a forward template maps these reactants to the product.")
        return 0
    if flat:
        print("STEREO DIFFERS: a template gives the product only when stereo is ignored; check @/@@ and / \\ marks.")
        return 1
    print("NOT CONFIRMED: no template in the library maps these reactants to the product "
          "(the library is not complete, so this does not prove them wrong).")
    return 1


def main(argv: list[str]) -> int:
    args = json_argument(argv, 'usage: retro_templates \'{"product": "SMILES", ...}\'')
    if args is BAD_ARGUMENT:
        return 2
    if not isinstance(args, dict) or not isinstance(args.get("product"), str):
        print("INVALID: `product` (a SMILES string) is required")
        return 2
    return run_forward(args) if "reactants" in args else run_enumerate(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
