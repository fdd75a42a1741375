"""The SAC3 NQ-Open set (250 questions, one gpt-3.5 answer each, 10 self-sampled answers, correctness labels):
components, baselines and the cross-validated ensemble, beside the tunable-ensemble paper's Table 1 (NQ-Open).
:func:`analyze` (every component alone, BSDetector, semantic entropy and the cross-validated ensemble of any graded
answers) is also the analysis of the QA pipeline and of ``ensemble tune``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..engine.components import DEFAULT_COMPONENTS, ComponentScorer, ResponseItem
from ..io import sac3_fields
from .response_metrics import component_figures, cross_validate, fold_count

SAC3_FILE = "sac3_nq_open/nq_open_250_eval_labeled-SC.json"
# Table 1 of the tunable-ensemble paper, NQ-Open column (their answers from gpt-3.5-turbo, not this set's)
PAPER_NQ_OPEN_F1 = {"semantic_entropy": 0.624, "bsdetector": 0.629, "ensemble": 0.651}


def load_sac3(data_dir: str | Path | None = None, limit: int | None = None) -> list[ResponseItem]:
    from .wikibio import default_data_dir

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
        f = sac3_fields(r)
        items.append(ResponseItem(id=str(k), question=f["question"], response=f["response"],
                                  samples=list(f["samples"]), correct=f["correct"],
                                  meta={"right_answer": list(r.get("right_answer") or [])}))
    return items


def bsdetector(C: dict[str, float], alpha: float = 0.8, beta: float = 0.7, reflection: str | None = None) -> float:
    """BSDetector (Chen & Mueller 2023): observed consistency O = alpha * mean NLI non-contradiction + (1 - alpha) *
    exact-match rate; with a self-reflection certainty S (an LLM judge's verdict, ``reflection`` names the
    component), confidence = beta * O + (1 - beta) * S, else O alone (beta = 1). S missing -> O."""
    o = alpha * C["non_contradiction"] + (1 - alpha) * C["exact_match"]
    s = C.get(reflection) if reflection else None
    if s is None or not np.isfinite(s):
        return o
    return beta * o + (1 - beta) * s


def analyze(items: list[ResponseItem], rows: list[dict[str, float]], comps: list[str], folds: int = 5, seed: int = 0,
            reflection: str | None = None) -> dict:
    """Every component alone, BSDetector, semantic entropy and the cross-validated ensemble (agnostic: AUROC-tuned
    weights then an F1 threshold; joint: weights and threshold for F1), with out-of-fold confidences kept for plots."""
    C = np.array([[r.get(c, np.nan) for c in comps] for r in rows], float)
    halluc = np.array([0 if it.correct else 1 for it in items])
    folds = fold_count(halluc, folds)
    out = {"n": len(items), "hallucination_rate": float(halluc.mean()) if len(items) else float("nan"),
           "folds": folds, "components_used": comps}
    if len(items) < 4 or len(set(halluc.tolist())) < 2:
        out["skipped"] = "too few answers or only one class: AUROC/F1 undefined"
        out["scores"] = {"components": C.tolist(), "hallucination": halluc.tolist()}
        return out
    out["components"] = component_figures(C, halluc, comps, folds, seed)
    baselines, curves = {}, {}
    if {"non_contradiction", "exact_match"} <= set(comps):
        b = np.array([[bsdetector(r, reflection=reflection)] for r in rows])
        baselines["bsdetector"] = component_figures(b, halluc, ["bsdetector"], folds, seed)["bsdetector"]
        curves["bsdetector"] = b[:, 0].tolist()
    if "semantic_negentropy" in comps:
        baselines["semantic_entropy"] = out["components"]["semantic_negentropy"]
        curves["semantic_entropy"] = C[:, comps.index("semantic_negentropy")].tolist()
    out["baselines"] = baselines
    ens = {}
    for mode in ("agnostic", "joint"):
        fig, oof, taus = cross_validate(C, halluc, comps, folds, seed, mode=mode)
        ens[mode] = fig
        curves[f"ensemble ({mode})"] = oof.tolist()
    out["ensemble"] = ens
    out["scores"] = {"components": C.tolist(), "hallucination": halluc.tolist(), "curves": curves}
    return out


def run_sac3(data_dir=None, limit=None, folds: int = 5, seed: int = 0, encoder=None, nli=None,
             components=DEFAULT_COMPONENTS, judges: dict | None = None, progress=None,
             items: list[ResponseItem] | None = None, llm=None, method_options: dict | None = None) -> dict:
    """``items``: the answers already loaded by :func:`load_sac3` (else read from ``data_dir``); ``llm``: the
    sampler of the engine's LLM methods among the components (p_true, verbalized, the judges)."""
    items = items if items is not None else load_sac3(data_dir, limit)
    comps = list(components) + [j for j in (judges or {}) if j not in components]  # a judge given is a component
    scorer = ComponentScorer(encoder, nli, components=tuple(comps), judges=judges, llm=llm,
                             method_options=method_options)
    rows = scorer.score(items, progress)
    refl = next((c for c in comps if c in (judges or {})), None)
    out = analyze(items, rows, comps, folds, seed, reflection=refl)
    out["paper_f1"] = PAPER_NQ_OPEN_F1
    if refl:
        out["judge_replies"] = {it.id: it.meta.get("judges", {}) for it in items}
    return out
