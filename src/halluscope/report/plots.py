"""Every PNG figure (matplotlib, no display needed): the SelfCheckGPT experiments (Figure 7), reliability diagrams,
risk-coverage curves, and the response-level ROC curves (tunable-ensemble paper 003, Figure 2) and accuracy-at-tau
(Figure 1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def wrap(title: str, width: int = 48) -> str:
    """A figure title folded into lines of at most ``width`` characters, so a long one is not cut at the edges."""
    import textwrap

    return "\n".join(textwrap.fill(line, width) for line in title.split("\n"))


def save(fig, path):
    """Lay out, write as PNG and close ``fig``: ``path`` a file path (its folder made) or a file-like object (an
    in-memory PNG for the HTML report); returns ``path``."""
    fig.tight_layout()
    if isinstance(path, (str, Path)):
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    pyplot().close(fig)
    return path


def plot_samples(out: dict[str, dict[int, dict[str, float]]], path, metric: str = "spearman"):
    """Figure 7: ``metric`` (default passage Spearman) of each method against the number of samples."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.8), dpi=120)
    for m, by_k in out.items():
        by_k = {int(k): v for k, v in by_k.items()}  # JSON keys are strings
        ks = sorted(by_k)
        ax.plot(ks, [by_k[k][metric] for k in ks], marker="o", ms=3, label=m)
    ax.set_xlabel("number of samples N")
    ax.set_ylabel({"spearman": "passage Spearman (%)", "nonfact_star": "NonFact* AUC-PR (%)"}.get(metric, metric))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)


def plot_reliability(cal: dict, path, title: str = "reliability"):
    """Reliability diagram: per bin, the share of positives against the mean predicted probability (the diagonal is
    perfect calibration), with the bin counts as bars; ECE and Brier score in the title."""
    plt = pyplot()
    fig, (ax, axn) = plt.subplots(2, 1, figsize=(4.8, 5.2), dpi=120, sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1]})
    pts = cal["reliability"]
    ax.plot([0, 1], [0, 1], color="#999", lw=1, ls="--", label="perfect calibration")
    ax.plot([p["mean_p"] for p in pts], [p["positive_rate"] for p in pts], marker="o", label="observed")
    ax.set_ylabel("share hallucinated")
    ax.set_title(f"{wrap(title)}\nECE {cal['ece']:.3f}, Brier {cal['brier']:.3f}, n = {cal['n']}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    width = 1.0 / cal["bins"]
    axn.bar([(p["bin"] + 0.5) * width for p in pts], [p["n"] for p in pts], width=width * 0.9, color="#90a4ae")
    axn.set_xlabel("predicted probability of hallucination")
    axn.set_ylabel("count")
    axn.set_xlim(0, 1)
    return save(fig, path)


def plot_risk_coverage(curves: dict[str, tuple], path, title: str = "risk-coverage", base_rate: float | None = None):
    """Risk-coverage curves of selective prediction: ``curves`` maps a name to (coverage, risk, AURC), e.g. from
    :func:`halluscope.evaluation.response_metrics.rejection_curve` and :func:`~halluscope.evaluation.metrics.aurc`;
    the AURC (lower is better) in the legend, and the error rate of keeping everything (a random order) as a dotted
    line."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 4.2), dpi=110)
    for name, (cov, risk, area) in curves.items():
        if len(cov):
            ax.plot(cov, risk, lw=1.2, label=f"{name} ({area:.3f})")
    if base_rate is not None:
        ax.axhline(base_rate, ls=":", c="grey", lw=0.8, label=f"random ({base_rate:.3f})")
    ax.set(xlabel="coverage (share of answers kept)", ylabel="risk (share incorrect among kept)", xlim=(0, 1),
           ylim=(-0.02, 1.02), title=wrap(title))
    ax.legend(fontsize=7, title="AURC", title_fontsize=7)
    return save(fig, path)


def plot_roc(curves: dict[str, list[float]], halluc, path, title: str = ""):
    """ROC of each confidence (positive class = hallucination, scored by 1 - confidence), AUROC in the legend."""
    from sklearn.metrics import roc_auc_score, roc_curve

    plt = pyplot()
    h = np.asarray(halluc, int)
    fig, ax = plt.subplots(figsize=(4.6, 4.2), dpi=110)
    for name, c in curves.items():
        c = np.asarray(c, float)
        ok = np.isfinite(c)
        if ok.sum() < 2 or len(set(h[ok])) < 2:
            continue
        fpr, tpr, _ = roc_curve(h[ok], 1 - c[ok])
        ax.plot(fpr, tpr, label=f"{name} ({roc_auc_score(h[ok], 1 - c[ok]):.3f})")
    ax.plot([0, 1], [0, 1], ls=":", c="grey", lw=0.8)
    ax.set(xlabel="false positive rate", ylabel="true positive rate",
           title=wrap(title or "ROC (positive = hallucination)"))
    ax.legend(fontsize=7, loc="lower right")
    return save(fig, path)


def plot_accuracy_at_tau(curves: dict[str, list[float]], halluc, path, title: str = ""):
    """Accuracy of the answers whose confidence is >= tau, tau = 0, 0.1, ..., 0.9 (003 Figure 1)."""
    from ..evaluation.response_metrics import TAUS, accuracy_at_tau

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 4.2), dpi=110)
    for name, c in curves.items():
        ax.plot(TAUS, accuracy_at_tau(c, halluc), marker="o", ms=3, label=name)
    ax.set(xlabel="confidence threshold tau", ylabel="accuracy of answers with confidence >= tau", ylim=(-0.02, 1.02),
           title=wrap(title or "Accuracy at tau"))
    ax.legend(fontsize=7)
    return save(fig, path)
