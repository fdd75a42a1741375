"""The SAC3 NQ-Open set (250 questions, one gpt-3.5 answer each, 10 self-sampled answers, correctness labels):
components, baselines and the cross-validated ensemble, beside the tunable-ensemble paper's Table 1 (NQ-Open)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .components import COMPONENTS, ComponentScorer, ResponseItem
from .tuning import component_figures, cross_validate

SAC3_FILE = "sac3_nq_open/nq_open_250_eval_labeled-SC.json"
# Table 1 of the tunable-ensemble paper, NQ-Open column (their answers from gpt-3.5-turbo, not this set's)
PAPER_NQ_OPEN_F1 = {"semantic_entropy": 0.624, "bsdetector": 0.629, "ensemble": 0.651}


def load_sac3(data_dir: str | Path | None = None, limit: int | None = None) -> list[ResponseItem]:
    from ..evaluation.wikibio import default_data_dir

    path = Path(data_dir or default_data_dir()) / SAC3_FILE
    if not path.is_file():
        raise FileNotFoundError(f"SAC3 NQ-Open data not found at {path} (set --data or HALLUSCOPE_DATA)")
    rows = json.loads(path.read_text())
    keep = range(len(rows))
    if limit and limit < len(rows):  # evenly spread over the file (it is ordered by label)
        keep = sorted({int(round(x)) for x in np.linspace(0, len(rows) - 1, limit)})
    items = []
    for k in keep:
        r = rows[k]
        for f in ("question", "generated_answer", "self_evaluations", "label"):
            if f not in r:
                raise ValueError(f"{path}: record {k}: field '{f}' missing")
        if r["label"] not in ("True", "False", True, False):
            raise ValueError(f"{path}: record {k}: field 'label': expected True/False, got {r['label']!r}")
        ans = r["generated_answer"][0] if isinstance(r["generated_answer"], list) else r["generated_answer"]
        items.append(ResponseItem(id=str(k), question=r["question"], response=ans,
                                  samples=list(r["self_evaluations"]), correct=r["label"] in ("True", True)))
    return items


def bsdetector(C: dict[str, float], alpha: float = 0.8) -> float:
    """BSDetector's observed consistency (Chen & Mueller 2023): alpha * mean NLI non-contradiction + (1 - alpha) *
    exact-match rate. Its self-reflection certainty needs an LLM judge and is left out here (beta = 1)."""
    return alpha * C["non_contradiction"] + (1 - alpha) * C["exact_match"]


def run_sac3(data_dir=None, limit=None, folds: int = 5, seed: int = 0, encoder=None, nli=None,
             components=COMPONENTS) -> dict:
    items = load_sac3(data_dir, limit)
    scorer = ComponentScorer(encoder, nli, components=tuple(components))
    rows = scorer.score(items)
    comps = list(components)
    C = np.array([[r.get(c, np.nan) for c in comps] for r in rows], float)
    halluc = np.array([0 if it.correct else 1 for it in items])
    out = {"n": len(items), "hallucination_rate": float(halluc.mean()), "components": component_figures(C, halluc, comps, folds, seed)}
    baselines = {}
    if {"non_contradiction", "exact_match"} <= set(comps):
        b = np.array([[bsdetector(r)] for r in rows])
        baselines["bsdetector"] = component_figures(b, halluc, ["bsdetector"], folds, seed)["bsdetector"]
    if "semantic_negentropy" in comps:
        baselines["semantic_entropy"] = out["components"]["semantic_negentropy"]
    out["baselines"] = baselines
    ens = {}
    for mode in ("agnostic", "joint"):
        fig, oof, taus = cross_validate(C, halluc, comps, folds, seed, mode=mode)
        ens[mode] = fig
    out["ensemble"] = ens
    out["paper_f1"] = PAPER_NQ_OPEN_F1
    out["scores"] = {"components": C.tolist(), "hallucination": halluc.tolist()}
    return out
