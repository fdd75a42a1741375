"""Ensemble tuning (003 §3.4) and its evaluation.

The ensemble confidence is s = sum_k w_k c_k with w on the simplex; a response is flagged as a hallucination when
s < tau. The positive class of every metric here is **hallucination** (incorrect answer), scored by 1 - s.

- ``tune_weights``: threshold-agnostic weights maximizing AUROC (or average precision) over the simplex: 4,000
  Dirichlet draws plus the vertices and the centre, then Nelder-Mead on a softmax parametrization from the best
  draw (scipy); ``tune_threshold``: the tau maximizing F1 over the observed scores.
- ``tune_joint``: threshold-aware: weights and tau maximizing F1 together (the same search, F1 at its best tau).
- Missing component values (NaN) are handled per row by renormalizing the weights of the components present. Every
  weight is kept above 1e-4, so a row missing its heavily weighted components still gets a confidence and no
  candidate weight vector is judged on a subset of the rows.
- ``cross_validate``: k-fold (stratified): each fold's weights and tau are tuned on the other folds and applied
  to it, so no reported figure is measured on the data that tuned it.
- ``selective_figures``: every row (component, baseline, ensemble) also gets the selective-prediction figures PRR and
  AURC (answers rejected by decreasing hallucination score 1 - s) and the calibration figures ECE and Brier of 1 - s
  read as the probability of hallucination (:mod:`halluscope.evaluation.metrics`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from sklearn.metrics import average_precision_score, f1_score, precision_score, recall_score, roc_auc_score

TAUS = tuple(round(0.1 * k, 1) for k in range(10))


def combine(C: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted confidence per row; NaN components drop out and the remaining weights are renormalized."""
    C = np.asarray(C, float)
    present = np.isfinite(C)
    W = np.where(present, w[None, :], 0.0)
    tot = W.sum(axis=1)
    s = np.where(present, C, 0.0) @ w / np.where(tot > 0, tot, 1.0)
    return np.where(tot > 0, s, np.nan)


def _metric(name: str, halluc: np.ndarray, s: np.ndarray) -> float:
    ok = np.isfinite(s)
    if ok.sum() < 2 or len(np.unique(halluc[ok])) < 2:
        return float("nan")
    if name == "roc_auc":
        return float(roc_auc_score(halluc[ok], 1 - s[ok]))
    if name == "average_precision":
        return float(average_precision_score(halluc[ok], 1 - s[ok]))
    raise ValueError(f"unknown metric {name!r} (roc_auc, average_precision)")


def best_threshold(halluc: np.ndarray, s: np.ndarray) -> tuple[float, float]:
    """(tau, F1) maximizing F1 of 'hallucination when s < tau' over every distinct cut of the observed scores
    (vectorized: one sort, cumulative counts)."""
    ok = np.isfinite(s)
    h, s = np.asarray(halluc)[ok].astype(int), np.asarray(s, float)[ok]
    P = int(h.sum())
    if len(s) == 0 or P == 0:
        return 0.5, 0.0
    order = np.argsort(s, kind="stable")
    ss, hs = s[order], h[order]
    last = np.flatnonzero(np.r_[ss[1:] != ss[:-1], True])  # last index of each group of equal scores
    tp = np.cumsum(hs)[last]
    predicted = last + 1
    f1 = 2 * tp / (predicted + P)
    k = int(np.argmax(f1))
    return float(ss[last[k]] + 1e-9), float(f1[k])


W_FLOOR = 1e-4  # every weight stays positive: a row whose heavily weighted components are missing still gets a
# confidence from the others (renormalized), so no candidate is scored on a convenient subset of the rows


def _simplex_search(K: int, objective, seed: int = 0, draws: int = 4000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    cands = np.vstack([np.eye(K), np.full((1, K), 1.0 / K), rng.dirichlet(np.ones(K), size=draws)])
    cands = np.maximum(cands, W_FLOOR)
    cands /= cands.sum(axis=1, keepdims=True)
    vals = np.array([objective(w) for w in cands])
    w0 = cands[int(np.nanargmax(vals))]

    def neg(z):
        w = np.exp(z - z.max())
        return -objective(w / w.sum())

    res = minimize(neg, np.log(np.clip(w0, 1e-6, None)), method="Nelder-Mead",
                   options={"maxiter": 400, "xatol": 1e-4, "fatol": 1e-6})
    w1 = np.maximum(np.exp(res.x - res.x.max()), W_FLOOR * np.exp(res.x - res.x.max()).sum())
    w1 /= w1.sum()
    return w1 if objective(w1) >= objective(w0) else w0


@dataclass
class EnsembleConfig:
    components: list[str]
    weights: list[float]
    threshold: float
    objective: str = "roc_auc"
    mode: str = "agnostic"  # or "joint"
    positive_class: str = "hallucination (incorrect answer): flagged when confidence < threshold"
    trained_on: str = ""
    settings: dict = field(default_factory=dict)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path, preset: str | None = None) -> "EnsembleConfig":
        """One tuned config, or (``preset``) one entry of a presets file written by ``ensemble presets``."""
        try:
            d = json.loads(Path(path).read_text())
            if "components" not in d and preset in d:
                d = d[preset]
            return cls(**d)
        except (OSError, ValueError, TypeError) as e:
            raise ValueError(f"cannot read ensemble config {path}: {e}") from e

    @classmethod
    def preset(cls, name: str, path: str | Path | None = None) -> "EnsembleConfig":
        """A packaged weight preset for users without graded data: ``closed-form`` (numbers, choices) or
        ``open-ended``; ``trained_on`` says which data tuned it (``halluscope ensemble presets`` rebuilds them)."""
        from importlib import resources

        src = Path(path) if path else Path(str(resources.files("halluscope") / "data" / "presets.json"))
        presets = json.loads(src.read_text())
        if name not in presets:
            raise ValueError(f"unknown preset {name!r}; choose from {sorted(presets)}")
        return cls(**presets[name])

    def confidence(self, C: np.ndarray) -> np.ndarray:
        return combine(C, np.asarray(self.weights))


def tune(C: np.ndarray, halluc: np.ndarray, components: list[str], objective: str = "roc_auc",
         mode: str = "agnostic", seed: int = 0) -> EnsembleConfig:
    C, halluc = np.asarray(C, float), np.asarray(halluc, int)
    K = C.shape[1]
    if mode == "agnostic":
        w = _simplex_search(K, lambda w: np.nan_to_num(_metric(objective, halluc, combine(C, w)), nan=-1), seed)
        tau, _ = best_threshold(halluc, combine(C, w))
    elif mode == "joint":
        w = _simplex_search(K, lambda w: best_threshold(halluc, combine(C, w))[1], seed, draws=1500)
        tau, _ = best_threshold(halluc, combine(C, w))
    else:
        raise ValueError("mode must be 'agnostic' or 'joint'")
    return EnsembleConfig(list(components), [float(x) for x in w], float(tau), objective, mode)


def _prf(halluc: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """Precision, recall and F1 of the hallucination class."""
    return {"precision": float(precision_score(halluc, pred, zero_division=0)),
            "recall": float(recall_score(halluc, pred, zero_division=0)),
            "f1": float(f1_score(halluc, pred, zero_division=0))}


def accuracy_at_tau(conf, halluc) -> list[float]:
    """The share of correct answers among those with confidence >= tau, for tau = 0, 0.1, ..., 0.9 (003 Figure 1);
    NaN where no answer is left."""
    c, h = np.asarray(conf, float), np.asarray(halluc, int)
    ok = np.isfinite(c)
    c, h = c[ok], h[ok]
    return [float(1 - h[c >= t].mean()) if (c >= t).any() else float("nan") for t in TAUS]


def rejection_curve(conf, halluc) -> tuple[np.ndarray, np.ndarray, float]:
    """(coverage, risk, AURC): the risk-coverage curve (:func:`~halluscope.evaluation.metrics.risk_coverage`) of
    answers kept by decreasing confidence, uncertainty = 1 - confidence, error = hallucination (incorrect answer),
    and its area (:func:`~halluscope.evaluation.metrics.aurc`); NaN rows left out."""
    from ..evaluation.metrics import aurc, risk_coverage

    u, e = 1 - np.asarray(conf, float), np.asarray(halluc, float)
    return (*risk_coverage(u, e), aurc(u, e))


def calibration_of(conf, halluc) -> dict:
    """:func:`~halluscope.evaluation.metrics.calibration` (ECE, Brier, reliability points) of 1 - confidence read as
    the probability of hallucination; NaN rows left out."""
    from ..evaluation.metrics import calibration

    return calibration(1 - np.asarray(conf, float), np.asarray(halluc, float))


def selective_figures(conf, halluc) -> dict[str, float]:
    """PRR and AURC of rejecting answers by decreasing hallucination score 1 - confidence (error = incorrect answer,
    tied scores averaged), and ECE and Brier score of 1 - confidence as the probability of hallucination."""
    from ..evaluation.metrics import prr

    c, h = np.asarray(conf, float), np.asarray(halluc, float)
    cal = calibration_of(c, h)
    return {"prr": prr(1 - c, h), "aurc": rejection_curve(c, h)[2],
            "ece": cal["ece"] if cal["n"] else float("nan"), "brier": cal["brier"]}


def evaluate(conf: np.ndarray, halluc: np.ndarray, tau: float) -> dict:
    """AUROC (hallucination as positive, scored by 1 - confidence), PRR / AURC / ECE / Brier
    (:func:`selective_figures`), precision / recall / F1 at tau, and accuracy-at-tau."""
    conf, halluc = np.asarray(conf, float), np.asarray(halluc, int)
    ok = np.isfinite(conf)
    c, h = conf[ok], halluc[ok]
    return {
        "auroc": _metric("roc_auc", h, c),
        **selective_figures(c, h),
        **_prf(h, c < tau),
        "threshold": float(tau),
        "n": int(ok.sum()),
        "accuracy_at_tau": {str(t): a for t, a in zip(TAUS, accuracy_at_tau(c, h))},
    }


def cross_validate(C: np.ndarray, halluc: np.ndarray, components: list[str], folds: int = 5, seed: int = 0,
                   objective: str = "roc_auc", mode: str = "agnostic") -> tuple[dict, np.ndarray, np.ndarray]:
    """Out-of-fold confidences and thresholds; returns (figures, out-of-fold confidence, per-row threshold)."""
    from sklearn.model_selection import StratifiedKFold

    C, halluc = np.asarray(C, float), np.asarray(halluc, int)
    oof = np.full(len(halluc), np.nan)
    taus = np.full(len(halluc), np.nan)
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(C, halluc):
        cfg = tune(C[tr], halluc[tr], components, objective, mode, seed)
        oof[te] = cfg.confidence(C[te])
        taus[te] = cfg.threshold
    ok = np.isfinite(oof)
    pred = oof < taus
    fig = evaluate(oof, halluc, 0.5)
    fig.update(_prf(halluc[ok], pred[ok]), threshold=float(np.nanmean(taus)))
    return fig, oof, taus


def component_figures(C: np.ndarray, halluc: np.ndarray, components: list[str], folds: int = 5, seed: int = 0):
    """Each component alone: AUROC, PRR, AURC, ECE and Brier (no tuning; :func:`selective_figures`) and F1 at a
    threshold tuned by k-fold cross-validation."""
    from sklearn.model_selection import StratifiedKFold

    out = {}
    for k, name in enumerate(components):
        c = C[:, k]
        taus = np.full(len(c), np.nan)
        for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(C, halluc):
            taus[te] = best_threshold(halluc[tr], c[tr])[0]
        ok = np.isfinite(c)
        pred = c < taus
        out[name] = {
            "n": int(ok.sum()),  # answers with a value (a judge's missing verdicts are left out)
            "auroc": _metric("roc_auc", halluc, c),
            **selective_figures(c, halluc),
            **_prf(halluc[ok], pred[ok]),
        }
    return out
