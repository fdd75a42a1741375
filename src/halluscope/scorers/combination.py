"""SelfCheckGPT-Combination (Manakul et al. 2023, §5.4): the average of the normalized scores of several variants.

Each component's sentence scores are z-normalized over all sentences of the run (mean 0, standard deviation 1:
the variants live on different scales, and unbounded n-gram scores have no fixed range), then averaged. The
passage score is the mean of the sentence scores (Eq. 15). The result is unbounded and relative to the run it was
computed on; the normalization statistics are kept in the run's settings so they can be re-applied to other data.
"""

from __future__ import annotations

import numpy as np

from ..types import ItemResult, MethodInfo

NAME = "combination"


def info(components: list[str]) -> MethodInfo:
    return MethodInfo(
        NAME,
        bounded=False,
        description="mean of z-normalized sentence scores of " + ", ".join(components) + " (raw, unbounded)",
    )


def normalization_stats(items: list[ItemResult], components: list[str]) -> dict[str, tuple[float, float]]:
    stats = {}
    for m in components:
        v = np.concatenate([np.asarray(it.sentence_scores[m], dtype=float) for it in items]) if items else np.zeros(0)
        v = v[np.isfinite(v)]
        mu = float(v.mean()) if len(v) else 0.0
        sd = float(v.std()) if len(v) > 1 else 1.0
        stats[m] = (mu, sd if sd > 0 else 1.0)
    return stats


def apply(items: list[ItemResult], components: list[str], stats: dict[str, tuple[float, float]] | None = None):
    """Add the ``combination`` scores to every item (in place); returns the statistics used."""
    if not components:
        raise ValueError("combination needs at least one other method")
    stats = stats or normalization_stats(items, components)
    for it in items:
        zs = []
        for m in components:
            mu, sd = stats[m]
            v = np.asarray(it.sentence_scores[m], dtype=float)
            v = np.where(np.isposinf(v), mu + 5 * sd, v)  # an unseen n-gram: far above the mean, but finite
            zs.append((v - mu) / sd)
        comb = np.mean(zs, axis=0)
        it.sentence_scores[NAME] = [float(x) for x in comb]
        it.passage_scores[NAME] = float(comb.mean())
    return stats
