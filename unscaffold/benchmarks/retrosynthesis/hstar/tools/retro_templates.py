"""Retro-template library for single-step retrosynthesis (RDKit reaction SMARTS over the ten USPTO-50k classes).

One library, two uses, chosen by the arguments:
- `{"product": P, "reaction_type"?: T, "max_candidates"?: N}` lists ranked precursor sets for P; each line
  starts with its reaction type, and templates of type T (a class number or name) come first.
- `{"product": P, "reactants": R}` checks the forward direction: does some template map R back to P?

The file is self-contained (it is also run as an inline recipe), so the library lives here. Templates are
general textbook transforms: `name, class, prior, retro SMARTS (product >> precursors), co-reactants`.
Co-reactants are the recorded reagents that contribute atoms (Boc2O, mCPBA, NBS, SOCl2, ...); they belong
in the answer. Priors order templates when no reaction type is given; they are rough frequencies, not
probabilities. Exit codes: 0 done (or confirmed), 1 nothing found (or not confirmed), 2 bad input.
"""

import itertools
import json
import sys

from rdkit import Chem, RDLogger
from rdkit.Chem import AllChem

RDLogger.DisableLog("rdApp.*")

CLASSES = {
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
MAX_CANDIDATES = 30

# Recorded co-reactants (they contribute atoms to the product, so they are part of the answer).
BOC2O = "CC(C)(C)OC(=O)OC(=O)OC(C)(C)C"
CBZCL = "O=C(Cl)OCc1ccccc1"
FMOCCL = "O=C(Cl)OCC1c2ccccc2-c2ccccc21"
TBSCL = "CC(C)(C)[Si](C)(C)Cl"
DHP = "C1=COCCC1"
TRTCL = "ClC(c1ccccc1)(c1ccccc1)c1ccccc1"
GLYCOL = "OCCO"
BNBR = "BrCc1ccccc1"
TF2O = "O=S(=O)(OS(=O)(=O)C(F)(F)F)C(F)(F)F"
MCPBA = "O=C(OO)c1cccc(Cl)c1"
SOCL2 = "O=S(Cl)Cl"
OXALYL = "O=C(Cl)C(=O)Cl"
PBR3 = "BrP(Br)Br"
POCL3 = "O=P(Cl)(Cl)Cl"
B2PIN2 = "CC1(C)OB(B2OC(C)(C)C(C)(C)O2)OC1(C)C"
AZIDE = "[N-]=[N+]=[N-]"
CYANIDE = "[C-]#N"
NBS = "O=C1CCC(=O)N1Br"
NCS = "O=C1CCC(=O)N1Cl"
NIS = "O=C1CCC(=O)N1I"
BR2 = "BrBr"
HNO3 = "O=[N+]([O-])O"
DMF = "CN(C)C=O"
CLSO3H = "O=S(=O)(O)Cl"

# Recurring atom patterns. Bonds broken in the retro direction are `!@` (never inside a ring); E-alkene geometry
# written with / is ignored when matching a product and produced when a template runs forward.
# A substituted basic amine N (no amide, hydrazine or ammonia), and a free one for deprotections.
AMINE = "N;+0;!D1;!$(N-[C,S,P]=[O,S,N]);!$(N-[N,O]);!$(N=*);!$(N#*)"
FREE_AMINE = "N;H1,H2;+0;!$(N-[C,S,P]=[O,S,N]);!$(N-[N,O]);!$(N=*);!$(N#*)"
AZOLE_N = "n;X3;r5;+0"  # substituted pyrrole-type ring nitrogen
EWG_ARYL = "c;$(c1ccc([N+](=O)[O-])cc1),$(c1ccccc1[N+](=O)[O-]),$(c1ccc(C#N)cc1),$(c1ccccc1C#N)"
PH = "c1[cH][cH][cH][cH][cH]1"  # unsubstituted phenyl
BOC = "C(=O)OC([CH3])([CH3])[CH3]"
ACID_C = "[#6:1]-[C:2](=[O:3])-[OH:4]"
ALCOHOL_C = "[#6;!$(C=O):1]-[OH:2]"
BENZO = "[c:4]2:[c:5]:[c:6]:[c:7]:[c:8]:[c:9]:2"
BENZO_R = "[c:4]1[c:5][c:6][c:7][c:8][c:9]1"


def T(  # noqa: N802 - a compact table row
    name: str, cls: int, prior: float, smarts: str, co: tuple[str, ...] = (), prefer: str | None = None
) -> dict:
    return {"name": name, "class": cls, "prior": prior, "smarts": smarts, "co": tuple(co), "prefer": prefer}


TEMPLATES = [
    # 1 Heteroatom alkylation and arylation
    T("N-alkylation: amine + alkyl bromide", 1, 0.55, f"[{AMINE}:1]-!@[CH2:2]-[#6:3]>>[N:1].Br[CH2:2][#6:3]"),
    T("N-alkylation: amine + alkyl chloride", 1, 0.25, f"[{AMINE}:1]-!@[CH2:2]-[#6:3]>>[N:1].Cl[CH2:2][#6:3]"),
    T("N-methylation: amine + methyl iodide", 1, 0.35, f"[{AMINE}:1]-!@[CH3:2]>>[N:1].I[CH3:2]"),
    T("reductive amination: amine + aldehyde", 1, 0.60, f"[{AMINE}:1]-!@[CH2:2]-[#6:3]>>[N:1].O=[CH:2][#6:3]"),
    T("reductive amination: amine + ketone", 1, 0.50,
      f"[{AMINE}:1]-!@[CH;X4:2](-[#6:3])-[#6:4]>>[N:1].O=[C:2](-[#6:3])[#6:4]"),
    T("SNAr N-arylation: amine + heteroaryl chloride", 1, 0.65, f"[{AMINE}:1]-!@[c;$(c:n):2]>>[N:1].Cl[c:2]"),
    T("SNAr N-arylation: amine + activated aryl fluoride", 1, 0.45, f"[{AMINE}:1]-!@[{EWG_ARYL}:2]>>[N:1].F[c:2]"),
    T("Buchwald-Hartwig amination: amine + aryl bromide", 1, 0.40, f"[{AMINE}:1]-!@[c:2]>>[N:1].Br[c:2]"),
    T("N-alkylation of an azole NH + alkyl bromide", 1, 0.45,
      f"[{AZOLE_N}:1]-!@[CH2:2]-[#6:3]>>[nH:1].Br[CH2:2][#6:3]"),
    T("N-methylation of an azole NH + methyl iodide", 1, 0.45, f"[{AZOLE_N}:1]-!@[CH3:2]>>[nH:1].I[CH3:2]"),
    T("N-arylation of an azole NH + aryl bromide", 1, 0.20, f"[{AZOLE_N}:1]-!@[c:2]>>[nH:1].Br[c:2]"),
    T("O-alkylation: phenol + alkyl bromide", 1, 0.55, "[c:1]-[OX2:2]-!@[CH2:3]-[#6:4]>>[c:1][OH:2].Br[CH2:3][#6:4]"),
    T("O-methylation: phenol + methyl iodide", 1, 0.45, "[c:1]-[OX2:2]-!@[CH3:3]>>[c:1][OH:2].I[CH3:3]"),
    T("Mitsunobu etherification: phenol + secondary alcohol", 1, 0.40,
      "[c:1]-[OX2:2]-!@[CH;X4:3](-[#6:4])-[#6:5]>>[c:1][OH:2].O[CH:3](-[#6:4])[#6:5]"),
    T("Mitsunobu etherification: phenol + primary alcohol", 1, 0.25,
      "[c:1]-[OX2:2]-!@[CH2:3]-[#6:4]>>[c:1][OH:2].O[CH2:3][#6:4]"),
    T("SNAr O-arylation: alcohol or phenol + heteroaryl chloride", 1, 0.40,
      "[#6;!$(C=O):1]-[OX2:2]-!@[c;$(c:n):3]>>[#6:1][OH:2].Cl[c:3]"),
    T("SNAr O-arylation: phenol + activated aryl fluoride", 1, 0.40,
      f"[c:1]-[OX2:2]-!@[{EWG_ARYL}:3]>>[c:1][OH:2].F[c:3]"),
    T("S-alkylation: thiol + alkyl bromide", 1, 0.45, "[#6:1]-[SX2:2]-!@[CH2:3]-[#6:4]>>[#6:1][SH:2].Br[CH2:3][#6:4]"),
    T("epoxide opening by an amine", 1, 0.35,
      f"[{AMINE}:1]-!@[CH2:2]-[C;X4:3]-[OH:4]>>[N:1].[CH2:2]1[C:3][O:4]1"),
    # 2 Acylation and related processes
    T("amide coupling: carboxylic acid + amine", 2, 0.90,
      "[#6:4]-[C:1](=[O:2])-!@[N;+0:3]>>[#6:4][C:1](=[O:2])O.[N:3]"),
    T("amide formation: acyl chloride + amine", 2, 0.70,
      "[#6:4]-[C:1](=[O:2])-!@[N;+0:3]>>[#6:4][C:1](=[O:2])Cl.[N:3]"),
    T("aminolysis: methyl ester + amine", 2, 0.20, "[#6:4]-[C:1](=[O:2])-!@[N;+0:3]>>[#6:4][C:1](=[O:2])OC.[N:3]"),
    T("acetylation with acetic anhydride", 2, 0.35,
      "[N,O;+0:1]-!@[C:2](=[O:3])-[CH3:4]>>[*:1].CC(=O)O[C:2](=[O:3])[CH3:4]"),
    T("sulfonamide: sulfonyl chloride + amine", 2, 0.80,
      "[#6:4]-[S:1](=[O:2])(=[O:3])-!@[N;+0:5]>>[#6:4][S:1](=[O:2])(=[O:3])Cl.[N:5]"),
    T("urea: isocyanate + amine", 2, 0.60, "[N;+0:1]-!@[C:2](=[O:3])-!@[NH:4]-[#6:5]>>[N:1].[O:3]=[C:2]=[N:4][#6:5]"),
    T("carbamate: chloroformate + amine", 2, 0.50,
      "[N;+0:1]-!@[C:2](=[O:3])-[O:4]-[#6;!$(C([CH3])([CH3])[CH3]):5]>>[N:1].Cl[C:2](=[O:3])[O:4][#6:5]"),
    T("esterification: carboxylic acid + alcohol", 2, 0.45,
      "[#6:4]-[C:1](=[O:2])-!@[OX2:3]-[#6;!$(C=O):5]>>[#6:4][C:1](=[O:2])O.[OH:3][#6:5]"),
    T("esterification: acyl chloride + alcohol", 2, 0.45,
      "[#6:4]-[C:1](=[O:2])-!@[OX2:3]-[#6;!$(C=O):5]>>[#6:4][C:1](=[O:2])Cl.[OH:3][#6:5]"),
    T("O-sulfonylation: alcohol + sulfonyl chloride", 2, 0.55,
      "[#6;!$(C=O):1]-[OX2:2]-!@[S:3](=[O:4])(=[O:5])-[#6:6]>>[#6:1][OH:2].Cl[S:3](=[O:4])(=[O:5])[#6:6]"),
    T("triflation with triflic anhydride", 2, 0.50, "[#6;!$(C=O):1]-[OX2:2]-!@S(=O)(=O)C(F)(F)F>>[#6:1][OH:2]",
      (TF2O,)),
    # 3 C-C bond formation
    T("Suzuki coupling: 2-haloheteroarene + arylboronic acid", 3, 0.75,
      "[c;$(c:[n,o,s]):1]-!@[c:2]>>Br[c:1].OB(O)[c:2]"),
    T("Suzuki coupling: aryl bromide + arylboronic acid", 3, 0.70,
      "[c:1]-!@[c:2]>>Br[c:1].OB(O)[c:2]", prefer="big_first"),
    T("Suzuki coupling: aryl bromide + aryl pinacol boronate", 3, 0.45,
      "[c:1]-!@[c:2]>>Br[c:1].CC1(C)OB([c:2])OC1(C)C", prefer="big_first"),
    T("Suzuki coupling: aryl chloride + arylboronic acid", 3, 0.30, "[c:1]-!@[c:2]>>Cl[c:1].OB(O)[c:2]",
      prefer="big_first"),
    T("Suzuki coupling: aryl iodide + arylboronic acid", 3, 0.25,
      "[c:1]-!@[c:2]>>I[c:1].OB(O)[c:2]", prefer="big_first"),
    T("Sonogashira coupling: aryl iodide + terminal alkyne", 3, 0.55, "[c:1]-!@[C:2]#[C:3]>>[c:1]I.[CH:2]#[C:3]"),
    T("Sonogashira coupling: aryl bromide + terminal alkyne", 3, 0.45, "[c:1]-!@[C:2]#[C:3]>>[c:1]Br.[CH:2]#[C:3]"),
    T("Heck reaction: aryl bromide + acrylate", 3, 0.45,
      "[c:1]/[CH:2]=[CH:3]/[C:4]=[O:5]>>[c:1]Br.[CH2:2]=[CH:3][C:4]=[O:5]"),
    T("Grignard addition to an aldehyde", 3, 0.45,
      "[#6:1]-!@[CH;X4:2](-[OH:3])-[#6:4]>>[#6:1][Mg]Br.[O:3]=[CH:2][#6:4]", prefer="small_first"),
    T("Grignard addition to a ketone", 3, 0.40,
      "[#6:1]-!@[C;X4;H0:2](-[OH:3])(-[#6:5])-[#6:4]>>[#6:1][Mg]Br.[O:3]=[C:2](-[#6:5])[#6:4]", prefer="small_first"),
    T("Horner-Wadsworth-Emmons olefination: aldehyde + phosphonoacetate", 3, 0.50,
      "[#6:1]/[CH:2]=[CH:3]/[C:4](=[O:5])-[O:6]-[#6:7]>>[#6:1][CH:2]=O.CCOP(=O)(OCC)[CH2:3][C:4](=[O:5])[O:6][#6:7]"),
    T("alpha-methylation of a carbonyl compound with methyl iodide", 3, 0.30,
      "[O:1]=[C:2]-[C;X4;!H3:3]-!@[CH3:4]>>[O:1]=[C:2][C:3].I[CH3:4]"),
    T("alpha-alkylation of a carbonyl compound with a benzyl bromide", 3, 0.25,
      "[O:1]=[C:2]-[C;X4:3]-!@[CH2:4]-[c:5]>>[O:1]=[C:2][C:3].Br[CH2:4][c:5]"),
    T("Friedel-Crafts acylation: arene + acyl chloride", 3, 0.35,
      "[c:1]-!@[C:2](=[O:3])-[#6:4]>>[cH:1].Cl[C:2](=[O:3])[#6:4]"),
    T("cyanide displacement of an alkyl bromide", 3, 0.35, "[#6:1]-[CH2:2]-!@C#N>>[#6:1][CH2:2]Br", (CYANIDE,)),
    # 4 Heterocycle formation
    T("benzimidazole: o-phenylenediamine + carboxylic acid", 4, 0.55,
      f"[#6:1]-[c:2]1:[n:3]:{BENZO}:[n:10]:1>>[#6:1][C:2](=O)O.[N:3]{BENZO_R}[N:10]"),
    T("benzimidazole: o-phenylenediamine + aldehyde", 4, 0.45,
      f"[#6:1]-[c:2]1:[n:3]:{BENZO}:[n:10]:1>>[#6:1][CH:2]=O.[N:3]{BENZO_R}[N:10]"),
    T("benzoxazole: 2-aminophenol + carboxylic acid", 4, 0.45,
      f"[#6:1]-[c:2]1:[n:3]:{BENZO}:[o:10]:1>>[#6:1][C:2](=O)O.[N:3]{BENZO_R}[O:10]"),
    T("benzoxazole: 2-aminophenol + aldehyde", 4, 0.35,
      f"[#6:1]-[c:2]1:[n:3]:{BENZO}:[o:10]:1>>[#6:1][CH:2]=O.[N:3]{BENZO_R}[O:10]"),
    T("benzothiazole: 2-aminothiophenol + aldehyde", 4, 0.40,
      f"[#6:1]-[c:2]1:[n:3]:{BENZO}:[s:10]:1>>[#6:1][CH:2]=O.[N:3]{BENZO_R}[S:10]"),
    T("benzothiazole: 2-aminothiophenol + carboxylic acid", 4, 0.35,
      f"[#6:1]-[c:2]1:[n:3]:{BENZO}:[s:10]:1>>[#6:1][C:2](=O)O.[N:3]{BENZO_R}[S:10]"),
    T("1,2,4-oxadiazole: amidoxime + carboxylic acid", 4, 0.55,
      "[#6:1]-[c:2]1:[n:3]:[c:4](-[#6:5]):[n:6]:[o:7]:1>>[#6:1][C:2](=O)O.[#6:5][C:4](=[N:6][OH:7])[NH2:3]"),
    T("1,3,4-oxadiazole: cyclodehydration of a diacylhydrazine", 4, 0.45,
      "[#6:1]-[c:2]1:[n:3]:[n:4]:[c:5](-[#6:6]):[o:7]:1>>[#6:1][C:2](=O)[NH:3][NH:4][C:5](=[O:7])[#6:6]"),
    T("Hantzsch thiazole: thioamide or thiourea + alpha-bromoketone", 4, 0.55,
      "[#6,#7:1]-[c:2]1:[n:3]:[c:4](-[#6:5]):[cH:6]:[s:7]:1>>[#6,#7:1][C:2](=[S:7])[N:3].[#6:5][C:4](=O)[CH2:6]Br"),
    T("pyrazole: 1,3-diketone + hydrazine", 4, 0.45,
      "[#6:1]-[c:2]1:[cH:3]:[c:4](-[#6:5]):[n:6]:[n:7]:1>>[#6:1][C:2](=O)[CH2:3][C:4](=O)[#6:5].[N:6][N:7]"),
    T("tetrazole: nitrile + azide", 4, 0.55, "[#6:1]-[c:2]1:[n:3]:n:n:[nH]:1>>[#6:1][C:2]#[N:3]", (AZIDE,)),
    T("tetrazole (2H form): nitrile + azide", 4, 0.50, "[#6:1]-[c:2]1:[n:3]:n:[nH]:n:1>>[#6:1][C:2]#[N:3]", (AZIDE,)),
    T("1,2,3-triazole: azide + terminal alkyne (CuAAC)", 4, 0.50,
      "[#6:1]-[n:2]1:[cH:3]:[c:4](-[#6:5]):[n+0:6]:[n+0:7]:1>>[#6:1][N:2]=[N+:7]=[N-:6].[CH:3]#[C:4][#6:5]"),
    T("imidazo[1,2-a]pyridine: 2-aminopyridine + alpha-bromoketone", 4, 0.50,
      "[#6:1]-[c:2]1:[cH:3]:[n:4]2:[c:5]:[c:6]:[c:7]:[c:8]:[c:9]:2:[n:10]:1"
      ">>[#6:1][C:2](=O)[CH2:3]Br.[NH2:10][c:9]1:[n:4]:[c:5]:[c:6]:[c:7]:[c:8]:1"),
    # 5 Protections
    T("Boc protection of an amine", 5, 0.75, f"[N;+0:1]-!@{BOC}>>[N:1]", (BOC2O,)),
    T("Boc protection of an azole NH", 5, 0.30, f"[n;+0:1]-!@{BOC}>>[nH:1]", (BOC2O,)),
    T("Cbz protection of an amine", 5, 0.55, f"[N;+0:1]-!@C(=O)O[CH2]{PH}>>[N:1]", (CBZCL,)),
    T("Fmoc protection of an amine", 5, 0.40, "[N;+0:1]-!@C(=O)OCC1c2ccccc2-c2ccccc21>>[N:1]", (FMOCCL,)),
    T("TBS protection of an alcohol", 5, 0.55,
      "[#6:2]-[OX2:1]-!@[Si]([CH3])([CH3])C([CH3])([CH3])[CH3]>>[#6:2][OH:1]", (TBSCL,)),
    T("THP protection of an alcohol", 5, 0.40, "[#6:2]-[OX2:1]-!@[CH]1[CH2][CH2][CH2][CH2]O1>>[#6:2][OH:1]", (DHP,)),
    T("trityl protection of an alcohol or amine", 5, 0.35, f"[N,O;+0:1]-!@C({PH})({PH}){PH}>>[*:1]", (TRTCL,)),
    T("dioxolane protection of a ketone", 5, 0.40,
      "[#6:2]-[C:1]1(-[#6:3])O[CH2][CH2]O1>>[#6:2][C:1](=O)[#6:3]", (GLYCOL,)),
    T("benzyl protection of an alcohol or phenol", 5, 0.30,
      f"[#6;!$(C=O):2]-[OX2:1]-!@[CH2]{PH}>>[#6:2][OH:1]", (BNBR,)),
    # 6 Deprotections
    T("Boc removal from an amine", 6, 0.90, f"[{FREE_AMINE}:1]>>CC(C)(C)OC(=O)[N:1]"),
    T("Cbz removal by hydrogenolysis", 6, 0.60, f"[{FREE_AMINE}:1]>>O=C(OCc1ccccc1)[N:1]"),
    T("N-debenzylation by hydrogenolysis", 6, 0.35, f"[{FREE_AMINE};!$(N-a):1]>>[N:1]Cc1ccccc1"),
    T("Boc removal from an azole NH", 6, 0.30, "[nH;+0:1]>>CC(C)(C)OC(=O)[n:1]"),
    T("phthalimide removal (Gabriel)", 6, 0.35, "[CH2:1]-[NH2:2]>>[CH2:1][N:2]1C(=O)c2ccccc2C1=O"),
    T("methyl ester hydrolysis", 6, 0.75, f"{ACID_C}>>[#6:1][C:2](=[O:3])[O:4]C"),
    T("ethyl ester hydrolysis", 6, 0.65, f"{ACID_C}>>[#6:1][C:2](=[O:3])[O:4]CC"),
    T("tert-butyl ester cleavage", 6, 0.55, f"{ACID_C}>>[#6:1][C:2](=[O:3])[O:4]C(C)(C)C"),
    T("benzyl ester hydrogenolysis", 6, 0.35, f"{ACID_C}>>[#6:1][C:2](=[O:3])[O:4]Cc1ccccc1"),
    T("O-debenzylation by hydrogenolysis", 6, 0.55, f"{ALCOHOL_C}>>[#6:1][O:2]Cc1ccccc1"),
    T("methyl ether cleavage (BBr3)", 6, 0.45, "[c:1]-[OH:2]>>[c:1][O:2]C"),
    T("TBS removal", 6, 0.55, f"{ALCOHOL_C}>>[#6:1][O:2][Si](C)(C)C(C)(C)C"),
    T("THP removal", 6, 0.35, f"{ALCOHOL_C}>>[#6:1][O:2]C1CCCCO1"),
    T("dioxolane removal (ketone)", 6, 0.35, "[#6:2]-[C;X3:1](=O)-[#6:3]>>[#6:2][C:1]1([#6:3])OCCO1"),
    # 7 Reductions
    T("nitro reduction to an aniline", 7, 0.85, "[c:1]-[NH2+0:2]>>[c:1][N+:2](=O)[O-]"),
    T("ketone reduction to a secondary alcohol", 7, 0.55,
      "[#6:2]-[CH;X4:1](-[#6:3])-[OH:4]>>[#6:2][C:1](=[O:4])[#6:3]"),
    T("ester reduction to a primary alcohol (methyl ester)", 7, 0.50, "[#6:2]-[CH2:1]-[OH:4]>>[#6:2][C:1](=[O:4])OC"),
    T("ester reduction to a primary alcohol (ethyl ester)", 7, 0.45, "[#6:2]-[CH2:1]-[OH:4]>>[#6:2][C:1](=[O:4])OCC"),
    T("aldehyde reduction to a primary alcohol", 7, 0.40, "[#6:2]-[CH2:1]-[OH:4]>>[#6:2][CH:1]=[O:4]"),
    T("amide reduction to an amine", 7, 0.35,
      "[#6:2]-[CH2:1]-!@[N;+0;!$(N-[C,S]=[O,S]):3]>>[#6:2][C:1](=O)[N:3]"),
    T("nitrile reduction to a primary amine", 7, 0.50, "[#6:1]-[CH2:2]-[NH2:3]>>[#6:1][C:2]#[N:3]"),
    T("azide reduction to an amine", 7, 0.40, "[C:1]-[NH2+0:2]>>[C:1][N:2]=[N+]=[N-]"),
    T("hydrogenation of an aryl-substituted ring alkene", 7, 0.35,
      "[c:5]-[CH;R:1](-[#6;R:3])-[CH2;R:2]-[#6;R:4]>>[c:5][C:1](-[#6:3])=[CH:2][#6:4]"),
    T("hydrogenation of a cinnamate-type alkene", 7, 0.35,
      "[c:3]-[CH2:1]-[CH2:2]-[C:4]=[O:5]>>[c:3][CH:1]=[CH:2][C:4]=[O:5]"),
    T("alkene hydrogenation", 7, 0.10, "[#6:3]-[CH2:1]-[CH2:2]-[#6:4]>>[#6:3][CH:1]=[CH:2][#6:4]"),
    # 8 Oxidations
    T("oxidation of a primary alcohol to an aldehyde", 8, 0.60, "[#6:1]-[CH1;X3:2]=[O:3]>>[#6:1][CH2:2][OH:3]"),
    T("oxidation of a secondary alcohol to a ketone", 8, 0.55,
      "[#6:1]-[C;X3:2](=[O:3])-[#6:4]>>[#6:1][CH:2]([OH:3])[#6:4]"),
    T("sulfide oxidation to a sulfone", 8, 0.55, "[#6:1]-[S;X4:2](=O)(=O)-[#6:3]>>[#6:1][S:2][#6:3]", (MCPBA,)),
    T("sulfide oxidation to a sulfoxide", 8, 0.45, "[#6:1]-[S;X3:2](=O)-[#6:3]>>[#6:1][S:2][#6:3]", (MCPBA,)),
    T("N-oxidation of a pyridine", 8, 0.45, "[n+:1]-[O-]>>[n+0:1]", (MCPBA,)),
    T("epoxidation of an alkene", 8, 0.45, "[C:1]1-O-[C:2]1>>[C:1]=[C:2]", (MCPBA,)),
    # 9 Functional group interconversion
    T("alcohol to alkyl chloride (thionyl chloride)", 9, 0.55, "[CX4:1]-Cl>>[C:1]O", (SOCL2,)),
    T("alcohol to alkyl bromide (phosphorus tribromide)", 9, 0.45, "[CX4:1]-Br>>[C:1]O", (PBR3,)),
    T("carboxylic acid to acyl chloride (thionyl chloride)", 9, 0.55, "[#6:1]-[C:2](=[O:3])Cl>>[#6:1][C:2](=[O:3])O",
      (SOCL2,)),
    T("carboxylic acid to acyl chloride (oxalyl chloride)", 9, 0.50, "[#6:1]-[C:2](=[O:3])Cl>>[#6:1][C:2](=[O:3])O",
      (OXALYL,)),
    T("primary amide dehydration to a nitrile", 9, 0.45, "[#6:1]-[C:2]#[N:3]>>[#6:1][C:2](=O)[N:3]"),
    T("Miyaura borylation of an aryl bromide", 9, 0.50,
      "[c:1]-B1OC([CH3])([CH3])C([CH3])([CH3])O1>>[c:1]Br", (B2PIN2,)),
    T("azide displacement of an alkyl bromide", 9, 0.45, "[CX4:1]-N=[N+]=[N-]>>[C:1]Br", (AZIDE,)),
    T("azide displacement of an alkyl mesylate", 9, 0.40, "[CX4:1]-N=[N+]=[N-]>>[C:1]OS(C)(=O)=O", (AZIDE,)),
    T("chlorination of a heteroaryl lactam (POCl3)", 9, 0.50, "Cl-[c:1]:[n:2]>>O=[c:1]:[nH:2]", (POCL3,)),
    # 10 Functional group addition
    T("aromatic bromination (NBS)", 10, 0.55, "[c:1]-Br>>[cH:1]", (NBS,)),
    T("aromatic bromination (bromine)", 10, 0.35, "[c:1]-Br>>[cH:1]", (BR2,)),
    T("aromatic chlorination (NCS)", 10, 0.45, "[c:1]-Cl>>[cH:1]", (NCS,)),
    T("aromatic iodination (NIS)", 10, 0.45, "[c:1]-I>>[cH:1]", (NIS,)),
    T("aromatic nitration", 10, 0.50, "[c:1]-[N+](=O)[O-]>>[cH:1]", (HNO3,)),
    T("benzylic bromination (NBS)", 10, 0.45, "[c:1]-[CH2:2]-Br>>[c:1][CH3:2]", (NBS,)),
    T("alpha-bromination of a ketone (bromine)", 10, 0.40,
      "[#6:1]-[C:2](=[O:3])-[CH2:4]-Br>>[#6:1][C:2](=[O:3])[CH3:4]", (BR2,)),
    T("Vilsmeier-Haack formylation", 10, 0.40, "[c:1]-[CH1]=O>>[cH:1]", (DMF,)),
    T("chlorosulfonylation", 10, 0.40, "[c:1]-S(=O)(=O)Cl>>[cH:1]", (CLSO3H,)),
]

ORGANIC = {5, 6, 7, 8, 9, 15, 16, 17, 35, 53}


def canonical(smiles: str, stereo: bool = True) -> str | None:
    """RDKit canonical SMILES with atom maps cleared (parsed twice, so the form is stable); None if invalid."""
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return None
    for atom in mol.GetAtoms():
        atom.SetAtomMapNum(0)
    if not stereo:
        Chem.RemoveStereochemistry(mol)
    again = Chem.MolFromSmiles(Chem.MolToSmiles(mol))
    return Chem.MolToSmiles(again) if again is not None else None


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


_COMPILED = {}


def compiled(template: dict) -> tuple:
    """(retro reaction, forward reaction, product query), built once per template."""
    key = template["smarts"]
    if key not in _COMPILED:
        product_side, precursor_side = key.split(">>")
        retro = AllChem.ReactionFromSmarts(key)
        forward = AllChem.ReactionFromSmarts(f"{precursor_side}>>{product_side}")
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
            fragments = smiles + [canonical(c) for c in template["co"]]
            key = ".".join(sorted(fragments))
            if key in seen:
                continue
            seen.add(key)
            out.append({"reactants": ".".join(fragments), "template": template["name"], "class": template["class"],
                        "co": list(template["co"])})
            if len(out) >= limit:
                return out
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
    fragments = [canonical(f) for f in reactants.split(".")]
    exact, flat = [], []
    for template in TEMPLATES:
        _, forward, query = compiled(template)
        if not mol.HasSubstructMatch(query):
            continue
        remaining = _without(fragments, [canonical(c) for c in template["co"]])
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
    print(f"reactants: {'.'.join(canonical(f) for f in reactants.split('.'))}")
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
    try:
        args = json.loads(argv[1])
    except (IndexError, json.JSONDecodeError):
        print('usage: retro_templates \'{"product": "SMILES", ...}\'')
        return 2
    if not isinstance(args, dict) or not isinstance(args.get("product"), str):
        print("INVALID: `product` (a SMILES string) is required")
        return 2
    return run_forward(args) if "reactants" in args else run_enumerate(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
