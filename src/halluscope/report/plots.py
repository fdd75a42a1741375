"""PNG figures of the SelfCheckGPT experiments (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
    fig.tight_layout()
    if isinstance(path, (str, Path)):  # else a file-like object (an in-memory PNG for the HTML report)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path
