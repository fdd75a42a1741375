"""Accuracy of an NLI model on the standard NLI evaluation sets in ``data/nli`` (MNLI dev-matched, ANLI R1-R3 test,
XNLI-en test, SNLI test; none of them trained halluscope-nli): 3-way accuracy for a 3-way model, and for every model the binary contradiction-vs-not accuracy
(what non-contradiction and SelfCheck-NLI use), plus the macro-F1 of that binary decision."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SETS = {
    "mnli_dev_matched": "nli/mnli_dev_matched/mnli_dev_matched.jsonl",
    "anli_r1_test": "nli/anli_dev_test/anli_r1_test.jsonl",
    "anli_r2_test": "nli/anli_dev_test/anli_r2_test.jsonl",
    "anli_r3_test": "nli/anli_dev_test/anli_r3_test.jsonl",
    "xnli_en_test": "nli/xnli_en_dev_test/xnli_en_test.jsonl",
    "snli_test": "nli/snli_dev_test/snli_test.jsonl",
}
LABELS = ("entailment", "neutral", "contradiction")


def load_pairs(name: str, data_dir=None, limit: int | None = None) -> list[dict]:
    from .wikibio import default_data_dir

    path = Path(data_dir or default_data_dir()) / SETS[name]
    if not path.is_file():
        raise FileNotFoundError(f"{name}: not found at {path} (set --data or HALLUSCOPE_DATA)")
    rows = []
    for k, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        r = json.loads(line)
        for f in ("premise", "hypothesis", "label"):
            if f not in r:
                raise ValueError(f"{path}: record {k}: field '{f}' missing")
        if r["label"] in LABELS:
            rows.append(r)
    if limit and limit < len(rows):  # evenly spread, so a slice keeps the file's mix
        rows = [rows[int(i)] for i in np.linspace(0, len(rows) - 1, limit).round().astype(int)]
    return rows


def evaluate_nli(nli, sets=tuple(SETS), data_dir=None, limit: int | None = None) -> dict[str, dict]:
    from sklearn.metrics import accuracy_score, f1_score

    out = {}
    for name in sets:
        rows = load_pairs(name, data_dir, limit)
        p = nli.probs([(r["premise"], r["hypothesis"]) for r in rows])
        gold = np.array([LABELS.index(r["label"]) for r in rows])
        two_way = bool(np.all(p[:, 1] == 0))  # a 2-class model puts no mass on neutral
        res = {"n": len(rows)}
        if not two_way:
            res["accuracy_3way"] = float(accuracy_score(gold, p.argmax(1)))
        yc = gold == 2
        pc = (p[:, 2] >= 0.5) if two_way else (p.argmax(1) == 2)
        res["accuracy_contradiction_vs_not"] = float(accuracy_score(yc, pc))
        res["macro_f1_contradiction_vs_not"] = float(f1_score(yc, pc, average="macro"))
        res["majority_contradiction_vs_not"] = float(max(yc.mean(), 1 - yc.mean()))
        out[name] = res
    return out
