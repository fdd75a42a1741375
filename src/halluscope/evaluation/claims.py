"""Claims and response-level methods against WikiBio GPT-3's human labels (issue 17; ``halluscope reproduce claims``).

The labels are per sentence, so claims are evaluated through the sentences they come from:

- sentence level: a sentence's score is the **max** (or the **mean**) of its claims' scores; the paper's AUC-PR
  (NonFact, NonFact*, Factual; trapezoidal, as :func:`halluscope.evaluation.metrics.auc_pr`) over the sentences;
- passage level: Pearson and Spearman correlation (percent) of the claims' response score (the mean over the
  claims, ``claim_passage_scores``) with the passage's mean label, as for the SelfCheckGPT rows (Table 3);
- response-level methods (LUQ and the other answer scores): passage correlations only (they score no sentence).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..types import ItemResult, Results
from .wikibio import evaluate_results, load_wikibio

HOWS = ("max", "mean")


def claim_row(method: str, how: str) -> str:
    """The row name of a method scored on claims, mapped to sentences by ``how``."""
    return f"{method} [claims, {how}]"


def claims_as_sentences(results: Results, methods: Sequence[str], how: str) -> Results:
    """The results with, for each method, a sentence score from its claims (``max`` or ``mean``) and the claims'
    response score (the mean over the claims) as the passage score, under :func:`claim_row` names."""
    from ..claims import sentence_scores_from_claims

    if how not in HOWS:
        raise ValueError(f"how must be one of {HOWS}, got {how!r}")
    items = []
    for it in results.items:
        d = ItemResult(id=it.id, sentences=it.sentences, labels=it.labels, num_samples=it.num_samples)
        for m in methods:
            d.sentence_scores[claim_row(m, how)] = sentence_scores_from_claims(it, m, how)
            d.passage_scores[claim_row(m, how)] = it.claim_passage_scores[m]
        items.append(d)
    return Results(items=items, methods=[claim_row(m, how) for m in methods])


def passage_correlations(results: Results, method: str) -> dict[str, float]:
    """Pearson and Spearman (percent) of a method's response scores with the passages' mean labels."""
    from scipy.stats import pearsonr, spearmanr

    items = [it for it in results.items if it.labels is not None and method in it.passage_scores]
    y = np.array([np.mean(it.labels) for it in items])
    s = np.array([it.passage_scores[method] for it in items], float)
    ok = np.isfinite(s)
    if ok.sum() < 3 or np.std(s[ok]) == 0 or np.std(y[ok]) == 0:  # a correlation with a constant is undefined
        return {"pearson": float("nan"), "spearman": float("nan")}
    return {"pearson": 100.0 * float(pearsonr(y[ok], s[ok])[0]),
            "spearman": 100.0 * float(spearmanr(y[ok], s[ok])[0])}


def claim_figures(results: Results) -> dict[str, dict[str, float]]:
    """Every figure of a WikiBio run with claims: each sentence method on sentences, then on claims mapped to
    sentences by max and by mean; each response-level method's passage correlations; the random baseline."""
    items = [it for it in results.items if it.labels is not None]
    if not items:
        raise ValueError("these results carry no labels: evaluation needs labelled records")
    res = Results(items=items, methods=results.methods, settings=results.settings)
    sentence = [m for m in items[0].sentence_scores]
    claimed = [m for m in items[0].claim_scores] if items[0].claims is not None else []
    response = [m for m in items[0].passage_scores if m not in sentence]
    out = evaluate_results(res, sentence)
    base = out.pop("random")
    for how in HOWS:
        out.update({k: v for k, v in evaluate_results(claims_as_sentences(res, claimed, how)).items()
                    if k != "random"})
    for m in response:
        out[m] = passage_correlations(res, m)
    order = [x for m in sentence for x in (m, *(claim_row(m, h) for h in HOWS))] + response
    figures = {k: out[k] for k in order if k in out}
    figures["random"] = base
    return figures


def reproduce_claims(detector, data_dir: str | Path | None = None, passages: Sequence[int] | None = None,
                     samples: int | None = None, output: str | Path | None = None, resume: bool = False,
                     progress: bool = False) -> tuple[dict[str, dict[str, float]], Results]:
    """Score WikiBio passages with a detector that scores claims (``Detector(claims="rule")``), with the first
    ``samples`` samples of each passage, and evaluate (:func:`claim_figures`)."""
    recs = load_wikibio(data_dir, passages)
    evidence = (lambda r: r.samples[:samples]) if samples else None
    res = detector.score(recs, output=output, resume=resume, progress=progress, evidence=evidence)
    return claim_figures(res), res
