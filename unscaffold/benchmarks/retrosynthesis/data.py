"""USPTO-50k CSVs: both common layouts, atom-mapped or not, and the built-in set in the same format.

Layouts: `id,class,reactants>reagents>production` (the raw_{train,val,test}.csv files) and
`class,id,rxn_smiles`; columns are found by their header, so a leading index column does no harm. The
split comes from the file name (train, val/valid/dev, test). Rows that are not `reactants>reagents>product`
are skipped with one warning per file naming their lines and ids. Loading reads text only; RDKit parses
and canonicalises a reaction when its task is made (cached), so a run pays only for the tasks it uses, and
a reaction RDKit cannot parse is named by file, line and id then.
"""

from __future__ import annotations

import csv
import re
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from unscaffold.errors import InputError

from .chem import CLASS_NAMES, Gold

BUILTIN = Path(__file__).resolve().parent / "data"
RXN_HEADERS = {"rxn_smiles", "reaction_smiles", "rxn", "reaction", "mapped_rxn", "reactants>reagents>production"}
CLASS_HEADERS = {"class", "reaction_class", "rxn_class", "reaction_type", "label"}
ID_HEADERS = {"id", "_id", "rxn_id", "reaction_id", "patent_id", "document_id"}
SPLIT_WORDS = (("train", "train"), ("valid", "val"), ("val", "val"), ("dev", "val"), ("test", "test"))


@dataclass
class Reaction:
    """One recorded reaction. `reactants` and `product` are as written (maybe atom-mapped)."""

    id: str
    source_id: str
    rclass: int | None
    reactants: str
    product: str
    split: str | None
    path: str = ""
    line: int = 0

    @cached_property
    def gold(self) -> Gold:
        """The canonical reference, computed on first use (raises ValueError when it does not parse)."""
        return Gold.of(self.reactants, self.product)

    def checked_gold(self) -> Gold:
        """`gold`, or an InputError naming the file, line and id of a reaction RDKit cannot parse."""
        try:
            return self.gold
        except ValueError:
            raise InputError(self.path or "reactions", f"line {self.line}", f"reaction {self.source_id!r}: "
                             "SMILES that RDKit cannot parse") from None

    @property
    def class_name(self) -> str | None:
        return CLASS_NAMES.get(self.rclass) if self.rclass else None

    def recorded_answer(self) -> str:
        """The recorded reactants with atom maps cleared (what the oracle writes)."""
        return ".".join(self.gold.reactants)


def split_of(path: Path) -> str | None:
    """The split a file name says (raw_train.csv: train); None when it says none."""
    name = path.stem.lower()
    for word, split in SPLIT_WORDS:
        if re.search(rf"(?:^|[^a-z]){word}(?:[^a-z]|$)", name):
            return split
    return None


def parse_class(value: str) -> int | None:
    """`5`, `5.0` or `<RX_5>`; anything else is unknown (None)."""
    m = re.fullmatch(r"\s*(?:<RX_)?(\d+)(?:\.0+)?>?\s*", value or "")
    return int(m.group(1)) if m and int(m.group(1)) in CLASS_NAMES else None


def _column(header: list[str], names: set[str], contains: str | None = None) -> int | None:
    for i, name in enumerate(header):
        key = name.strip().lower()
        if key in names or (contains and contains in key):
            return i
    return None


def _cell(row: list[str], index: int | None) -> str:
    return row[index].strip() if index is not None and index < len(row) else ""


def read_csv(path: Path) -> list[Reaction]:
    """The reactions of one CSV file; raises InputError (naming the file) when the layout is unknown."""
    split = split_of(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except FileNotFoundError:
        raise InputError(str(path), None, "file not found") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise InputError(str(path), None, f"not a readable CSV file: {e}") from None
    if not rows:
        raise InputError(str(path), None, "the file is empty")
    header = rows[0]
    rxn_col = _column(header, RXN_HEADERS, contains=">")
    if rxn_col is None:
        raise InputError(str(path), "header", "no reaction column: expected `reactants>reagents>production` or "
                         "`rxn_smiles` (USPTO-50k layouts `id,class,reactants>reagents>production` or "
                         "`class,id,rxn_smiles`)")
    class_col, id_col = _column(header, CLASS_HEADERS), _column(header, ID_HEADERS)
    out: list[Reaction] = []
    skipped: list[str] = []
    for number, row in enumerate(rows[1:], start=2):
        if not row or not any(cell.strip() for cell in row):
            continue
        rxn = _cell(row, rxn_col).split()[0] if _cell(row, rxn_col) else ""
        parts = rxn.split(">")
        source = _cell(row, id_col) or f"{path.stem}-{number}"
        if len(parts) != 3 or not parts[0] or not parts[2]:
            skipped.append(f"line {number} (id {source})")
            continue
        out.append(Reaction(id=source, source_id=source, rclass=parse_class(_cell(row, class_col)), reactants=parts[0],
                            product=parts[2], split=split, path=str(path), line=number))
    if skipped:
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        warnings.warn(f"{path}: skipped {len(skipped)} row(s) that are not `reactants>reagents>product`: "
                      f"{', '.join(skipped[:3])}{more}", stacklevel=2)
    return out


def load_reactions(data: Path) -> list[Reaction]:
    """A CSV file, or a folder of them (e.g. raw_train.csv, raw_val.csv, raw_test.csv). Task ids are the
    recorded ids when they are unique, else `<split or file>-<line>` (USPTO ids name patents, which repeat)."""
    data = Path(data)
    if data.is_dir():
        files = sorted(data.glob("*.csv"))
        if not files:
            raise InputError(str(data), None, "no .csv files in this folder")
    elif data.is_file():
        files = [data]
    else:
        raise InputError(str(data), None, "not found (give a USPTO-50k CSV file or a folder of them)")
    reactions = [r for path in files for r in read_csv(path)]
    if not reactions:
        raise InputError(str(data), None, "no reaction could be read")
    if len({r.source_id for r in reactions}) != len(reactions):
        for r in reactions:
            r.id = f"{r.split or Path(r.path).stem}-{r.line}"
    return reactions
