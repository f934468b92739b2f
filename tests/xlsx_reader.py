"""A small reader of .xlsx workbooks for the tests, written from the file format (ECMA-376:
a zip of XML parts), independent of the writer tbdtrace uses."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

NS = {
    "m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "rel": "http://schemas.openxmlformats.org/package/2006/relationships",
}


def _unescape(s: str) -> str:
    """OOXML's escapes of characters XML cannot hold: ``_xHHHH_``."""
    return re.sub(r"_x([0-9A-Fa-f]{4})_", lambda m: chr(int(m.group(1), 16)), s)


def _col(ref: str) -> int:
    n = 0
    for ch in re.match(r"[A-Z]+", ref).group(0):  # type: ignore[union-attr]
        n = n * 26 + ord(ch) - 64
    return n - 1


def read_workbook(path: Path) -> dict[str, list[list[Any]]]:
    """{sheet name: rows of cells} in workbook order; a cell is None (absent), a bool, a
    float, or text. A formula anywhere fails the read."""
    with zipfile.ZipFile(path) as z:
        shared: list[str] = []
        if "xl/sharedStrings.xml" in z.namelist():
            for si in ET.fromstring(z.read("xl/sharedStrings.xml")).findall("m:si", NS):
                shared.append(_unescape("".join(t.text or "" for t in si.iter(f"{{{NS['m']}}}t"))))
        rels = {
            r.get("Id"): r.get("Target")
            for r in ET.fromstring(z.read("xl/_rels/workbook.xml.rels")).findall(
                "rel:Relationship", NS
            )
        }
        out: dict[str, list[list[Any]]] = {}
        for sh in ET.fromstring(z.read("xl/workbook.xml")).find("m:sheets", NS):  # type: ignore[union-attr]
            target = str(rels[sh.get(f"{{{NS['r']}}}id")])
            xml = ET.fromstring(z.read("xl/" + target.removeprefix("/xl/")))
            rows: list[list[Any]] = []
            for row in xml.iter(f"{{{NS['m']}}}row"):
                r = int(row.get("r")) - 1  # type: ignore[arg-type]
                while len(rows) <= r:
                    rows.append([])
                cells = rows[r]
                for c in row.findall("m:c", NS):
                    assert c.find("m:f", NS) is None, f"a formula in {sh.get('name')}"
                    i = _col(c.get("r"))  # type: ignore[arg-type]
                    while len(cells) <= i:
                        cells.append(None)
                    t = c.get("t")
                    if t == "inlineStr":
                        v: Any = _unescape("".join(x.text or "" for x in c.iter(f"{{{NS['m']}}}t")))
                    elif t == "s":
                        v = shared[int(c.find("m:v", NS).text)]  # type: ignore[union-attr,arg-type]
                    elif t == "b":
                        v = c.find("m:v", NS).text == "1"  # type: ignore[union-attr]
                    else:
                        assert t in (None, "n"), t
                        v = float(c.find("m:v", NS).text)  # type: ignore[union-attr,arg-type]
                    cells[i] = v
            out[sh.get("name")] = rows  # type: ignore[index]
    return out
