"""Small workbooks for the spreadsheet tests, built with openpyxl, with cached formula values where a
real (Excel-saved) workbook would have them."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

import openpyxl


def book(path: Path, sheets: dict[str, dict[str, Any]], formats: dict[str, str] | None = None) -> Path:
    """A workbook from {sheet: {cell: value}}; `formats` sets number formats by cell (first sheet)."""
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, cells in sheets.items():
        ws = wb.create_sheet(name)
        for coord, value in cells.items():
            ws[coord] = value
    for coord, number_format in (formats or {}).items():
        wb.worksheets[0][coord].number_format = number_format
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(path)
    return path


def with_cached(path: Path, values: dict[str, Any], sheet_xml: str = "xl/worksheets/sheet1.xml") -> Path:
    """Give formula cells of the first sheet a cached value, as Excel saves them (openpyxl writes none)."""
    with zipfile.ZipFile(path) as archive:
        parts = {name: archive.read(name) for name in archive.namelist()}
    xml = parts[sheet_xml].decode()
    for coord, value in values.items():
        kind = ' t="str"' if isinstance(value, str) else ""
        xml, n = re.subn(rf'<c r="{coord}"([^>]*)>(<f[^<]*</f>)<v\s*/>',
                         rf'<c r="{coord}"\1{kind}>\2<v>{value}</v>', xml)
        assert n == 1, coord
    parts[sheet_xml] = xml.encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return path
