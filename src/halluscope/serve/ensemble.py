"""The tuned response ensemble in the service: refitted from reviews, served beside the calibrated probability.

The ensemble (Bouchard & Chauhan, :mod:`halluscope.combine.tuned`) is a confidence s = sum_k w_k c_k over
response-level components c_k in [0, 1] (higher = more likely correct); an answer is flagged when s < tau. It lives
in the calibration file under the key ``ensemble`` (an :class:`~halluscope.combine.tuned.EnsembleConfig`), so the
one file the server watches carries both fits and one reload switches both, between two batches.

- Serving: every component is computed by the server's detector as a method of the engine (``bertscore`` is the
  engine's ``bertscore_response``; ``exact_match``, ``non_contradiction``, ... and any bounded method such as
  ``nli_support`` keep their names), so it is stored with the result's method scores (hallucination score = 1 -
  confidence) and the ensemble reads them from there: ``result["ensemble"] = {confidence, score = 1 - confidence,
  flagged, threshold, components, trained_on}``; None while no tuned ensemble is loaded. The answer's ``flagged``
  stays the calibrated probability's flag.
- Refitting (``halluscope calibrate --from-db``): with at least :data:`MIN_ANSWERS` answers reviewed as a whole and at
  least 2 of each class, the weights and threshold are tuned on the reviews (``combine.tuned.tune``); AUROC, F1 and
  ECE after are out-of-fold figures of a k-fold cross-validation (``evaluation.response_metrics.cross_validate``),
  before are those of the answer probability the server gave and of the ensemble of the base file if it has one.
  Components come from the stored results where the server already computed them, else from
  :class:`~halluscope.engine.components.ComponentScorer` over the stored response and samples (the same functions, so
  the same values).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..types import ItemResult

ENTRY = "ensemble"  # the key of the tuned ensemble in the calibration file
MIN_ANSWERS = 20  # answers reviewed as a whole before the weights are refitted (and at least 2 of each class)


def engine_name(component: str) -> str:
    """The engine method that computes an ensemble component (its passage score is 1 - the confidence)."""
    from ..engine.components import ENGINE_NAMES

    return {v: k for k, v in ENGINE_NAMES.items()}.get(component, component)


def check_components(components) -> None:
    """ValueError unless the server's detector can compute every component: a method of the engine, bounded, that
    needs no LLM (judges and ``selfcheck_nli`` are not served)."""
    from ..engine.registry import specs
    from ..engine.components import uncomputable

    problems = uncomputable(components)
    for c in components:
        if c not in problems and engine_name(c) not in specs():
            problems[c] = "not a method of the engine, so the server cannot compute it"
    if problems:
        raise ValueError("the service cannot use the ensemble components " +
                         "; ".join(f"{c}: {why}" for c, why in problems.items()))


def load(calibration: str | Path | None):
    """The tuned ensemble of a calibration file (None when it has none, as the packaged file)."""
    from .. import calibration as cal
    from ..combine.tuned import EnsembleConfig

    d = cal._read(str(calibration or cal.packaged_path())).get(ENTRY)
    if not d:
        return None
    cfg = EnsembleConfig(**d)
    check_components(cfg.components)
    return cfg


def confidences(passage_scores: dict, components) -> list[float]:
    """Component confidences from a result's method scores (NaN where the method was not computed)."""
    out = []
    for c in components:
        v = passage_scores.get(engine_name(c))
        out.append(float("nan") if v is None or not math.isfinite(v) else 1.0 - float(v))
    return out


def output(it: ItemResult, cfg) -> dict | None:
    """The ensemble's answer-level output for one scored answer (None when no component has a value)."""
    comps = confidences(it.passage_scores, cfg.components)
    conf = float(cfg.confidence(np.array([comps], float))[0])
    if not math.isfinite(conf):
        return None
    return {"confidence": conf, "score": 1.0 - conf, "flagged": bool(conf < cfg.threshold),
            "threshold": float(cfg.threshold), "trained_on": cfg.trained_on,
            "components": {c: (v if math.isfinite(v) else None) for c, v in zip(cfg.components, comps)}}


def _component_matrix(answers: list[tuple[str, dict, bool]], comps: list[str]) -> np.ndarray:
    """Confidences per reviewed answer: stored where the server computed them, else computed now (one batch)."""
    from ..engine.components import ComponentScorer, ResponseItem

    C = np.array([confidences(d.get("passage_scores", {}), comps) for _, d, _ in answers], float)
    todo = [k for k, (_, d, _) in enumerate(answers) if any(engine_name(c) not in d.get("passage_scores", {})
                                                             for c in comps)]
    if todo:
        items = [ResponseItem(answers[k][0], answers[k][1].get("prompt") or "", answers[k][1]["response"],
                              list(answers[k][1].get("samples", []))) for k in todo]
        for k, row in zip(todo, ComponentScorer(components=comps).score(items)):
            C[k] = [row.get(c, np.nan) for c in comps]
    return C


def _figures(fig: dict) -> dict:
    keep = ("n", "auroc", "ece", "brier", "prr", "f1", "precision", "recall", "threshold")
    return {k: fig[k] for k in keep if k in fig}


def refit(engine, base=None, components=None, folds: int = 5, min_answers: int = MIN_ANSWERS):
    """Tune the ensemble on the answers reviewed as a whole (positive: reviewed inaccurate). Returns (the new
    :class:`~halluscope.combine.tuned.EnsembleConfig` or None when there are too few reviews, a report)."""
    from ..engine.components import DEFAULT_COMPONENTS
    from ..combine.tuned import tune
    from ..evaluation.response_metrics import cross_validate, evaluate
    from .store import reviewed_answers

    answers = reviewed_answers(engine)
    h = np.array([int(w) for _, _, w in answers])
    wrong = int(h.sum())
    rep: dict = {"answers_reviewed": len(h), "inaccurate": wrong}
    if len(h) < min_answers or min(wrong, len(h) - wrong) < 2:
        rep["skipped"] = (f"{len(h)} answers reviewed as a whole ({wrong} inaccurate): the weights are refitted from "
                          f"{min_answers}, with at least 2 of each label")
        return None, rep
    comps = list(components or (base.components if base else DEFAULT_COMPONENTS))
    check_components(comps)
    C = _component_matrix(answers, comps)
    k = max(2, min(folds, wrong, len(h) - wrong))
    prob = np.array([d.get("passage_scores", {}).get("probability", np.nan) for _, d, _ in answers], float)
    before = {"probability": _figures(evaluate(1 - prob, h, 0.5))}
    if base is not None:
        Cb = C if list(base.components) == comps else _component_matrix(answers, list(base.components))
        before["ensemble"] = _figures(evaluate(base.confidence(Cb), h, base.threshold))
    after, _, _ = cross_validate(C, h, comps, folds=k)
    cfg = tune(C, h, comps)
    cfg.trained_on = f"{len(h)} answers reviewed as a whole ({wrong} inaccurate; halluscope serve)"
    cfg.settings = {"folds": k, "source": "halluscope calibrate --from-db"}
    rep.update(components=comps, folds=k, before=before, after_cv=_figures(after),
               weights=dict(zip(comps, cfg.weights)), threshold=cfg.threshold)
    return cfg, rep
