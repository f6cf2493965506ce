#!/usr/bin/env python3
"""Regenerates cases.jsonl from TIAGE's raw files (raw/anno_*.json and raw/ts_*_annotations.xlsx).

Standard library only. Reproduces cases.jsonl byte for byte (checked: SHA-256
3b803222f40ff8cfb9860dba83e6b050b8d6e2a4e7d5d37cb5401d1366e08d7f). The algorithm is the one the
README describes: for each utterance i from 2 to n-2 of every dialogue, the latest turn is
(i, i+1) and the earlier discussion up to three pairs before it; a case is kept only when both
annotators (the xlsx's two columns) agree: `true` when both mark i as a shift and not both mark
i+1 as one, `false` when both mark i and i+1 as no shift. random.Random(13) samples 1,000 cases
of each class (true first) from the candidates in split order test, dev, train; the sample is
sorted by split, then id.

Usage: python3 derive_cases.py [RAW_DIR] > cases.jsonl   (RAW_DIR defaults to ./raw beside this file)
"""
import json
import random
import re
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
SPLITS = ("test", "dev", "train")
COMMIT = "08f98df"


def xlsx_rows(path):
    """Every sheet's rows, in workbook order, as {column letter: value} (shared strings resolved)."""
    z = zipfile.ZipFile(path)
    strings = [
        "".join(t.text or "" for t in si.iter(MAIN + "t"))
        for si in ET.fromstring(z.read("xl/sharedStrings.xml")).findall(MAIN + "si")
    ]
    rels = {r.get("Id"): r.get("Target") for r in ET.fromstring(z.read("xl/_rels/workbook.xml.rels"))}
    rows = []
    for sheet in ET.fromstring(z.read("xl/workbook.xml")).find(MAIN + "sheets"):
        target = rels[sheet.get(REL)].lstrip("/").replace("xl/", "")
        for i, row in enumerate(ET.fromstring(z.read("xl/" + target)).iter(MAIN + "row")):
            if i == 0:
                continue  # the header row of each sheet
            cells = {}
            for c in row.findall(MAIN + "c"):
                v = c.find(MAIN + "v")
                value = None if v is None else v.text
                if c.get("t") == "s" and value is not None:
                    value = strings[int(value)]
                cells[re.match(r"[A-Z]+", c.get("r")).group()] = value
            if cells.get("C") is not None:
                rows.append(cells)
    return rows


def dialogues(raw, split):
    """{dialogue number: [(utterance, annotator1, annotator2)]}: the JSON's text, the xlsx's labels."""
    text = json.loads((raw / f"anno_{split}.json").read_text(encoding="utf-8"))
    labelled = []
    for row in xlsx_rows(raw / f"ts_{split}_annotations.xlsx"):
        if row.get("B") is not None:  # a dialogue's first row carries its id
            labelled.append([])
        labelled[-1].append((int(float(row["D"])), int(float(row["E"]))))
    out = {}
    for key, utterances in text.items():
        labels = labelled[int(key) - 1]
        if len(labels) != len(utterances):
            sys.exit(f"{split} dialogue {key}: {len(utterances)} utterances in the JSON, {len(labels)} in the xlsx")
        out[int(key)] = [(u[0], a, b) for u, (a, b) in zip(utterances, labels)]
    return out


def clean(text):
    return re.sub(r"\s+([.,?!;])", r"\1", text).strip()


def pair(u, s, e):
    return f"**User**: {clean(u[s][0])}\n**Assistant**: {clean(u[e][0])}"


def candidates(split, dialogs):
    shifts, stays = [], []
    for d in sorted(dialogs):
        u = dialogs[d]
        for i in range(2, len(u) - 1):
            both = lambda j, v: u[j][1] == v and u[j][2] == v
            if both(i, 1) and not both(i + 1, 1):
                label = True
            elif both(i, 0) and both(i + 1, 0):
                label = False
            else:
                continue
            pairs = [(s, s + 1) for s in (i - 6, i - 4, i - 2) if s >= 0]
            case = {
                "id": f"tiage-{split}-{d:03d}-u{i:02d}",
                "earlier_discussion": "\n\n".join(pair(u, s, e) for s, e in pairs),
                "latest_turn": pair(u, i, i + 1),
                "label": label,
                "source": f"TIAGE {split} split, dialogue {d}, utterances {pairs[0][0]}-{i + 1} "
                f"(github.com/HuiyuanXie/tiage@{COMMIT})",
            }
            (shifts if label else stays).append(case)
    return shifts, stays


def main():
    raw = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "raw"
    shifts, stays = [], []
    for split in SPLITS:
        t, f = candidates(split, dialogues(raw, split))
        shifts += t
        stays += f
    rng = random.Random(13)
    sample = rng.sample(shifts, 1000) + rng.sample(stays, 1000)
    sample.sort(key=lambda c: (SPLITS.index(c["id"].split("-")[1]), c["id"]))
    sys.stdout.write("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in sample))


if __name__ == "__main__":
    main()
