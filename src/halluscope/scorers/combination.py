"""SelfCheckGPT-Combination (Manakul et al. 2023, §5.4): the average of the normalized scores of several variants.

Each component's sentence scores are z-normalized (mean 0, standard deviation 1: the variants live on different
scales, and unbounded n-gram scores have no fixed range), then averaged; the passage score is the mean of the
sentence scores (Eq. 15). The normalization statistics are **fixed**: those of WikiBio passages 0-118 (packaged in
``data/calibration.json``, written by ``halluscope calibrate``), so a record gets the same score alone as in any
batch. A component with no packaged statistics (an LLM method, say) is normalized over the run's own sentences, as
the paper does over its dataset, and the run's settings say so; ``stats="run"`` normalizes every component over the
run (the paper's setting, used by ``reproduce``). The combiner itself is :class:`halluscope.combine.ZMean`.
"""

from __future__ import annotations

import numpy as np

from ..combine import ZMean
from ..types import ItemResult, MethodInfo

NAME = "combination"


def info(components: list[str]) -> MethodInfo:
    return MethodInfo(
        NAME,
        bounded=False,
        description="mean of z-normalized sentence scores of " + ", ".join(components) + " (raw, unbounded; "
        "z with the statistics of WikiBio passages 0-118)",
    )


def matrix(items: list[ItemResult], components: list[str]) -> np.ndarray:
    """Sentences (rows of every item, in order) by components."""
    if not items:
        return np.zeros((0, len(components)))
    return np.column_stack([np.concatenate([np.asarray(it.sentence_scores[m], float) for it in items])
                            for m in components])


def combiner(items: list[ItemResult], components: list[str], stats: dict | str | None = None) -> ZMean:
    """The ZMean to apply: packaged statistics (or the ``stats`` given) where known, the run's (``items``) for the
    rest; the run is fitted only when some component needs it."""
    if not components:
        raise ValueError("combination needs at least one other method")
    if stats is None:
        from ..calibration import packaged_zstats

        stats = packaged_zstats()
    known = {} if stats == "run" else dict(stats)
    unknown = [m for m in components if m not in known]
    if unknown:
        run = ZMean(unknown).fit(matrix(items, unknown))
        known.update({m: (mu, sd) for m, mu, sd in zip(unknown, run.mean, run.scale)})
    fitted = "run" if stats == "run" else ",".join(unknown)
    return ZMean(list(components), [known[m][0] for m in components], [known[m][1] for m in components],
                 fitted_on=f"run-relative: {fitted}" if fitted else "packaged")


def add_scores(items: list[ItemResult], zm: ZMean) -> None:
    """Add the ``combination`` scores of ``zm`` to every item (in place)."""
    for it in items:
        comb = zm.transform(matrix([it], zm.components))
        it.sentence_scores[NAME] = [float(x) for x in comb]
        it.passage_scores[NAME] = float(comb.mean())


def summary(zm: ZMean) -> dict:
    """The statistics used, per component, and where they come from (for a run's settings)."""
    return {"statistics": {m: (mu, sd) for m, mu, sd in zip(zm.components, zm.mean, zm.scale)}, "from": zm.fitted_on}


def apply(items: list[ItemResult], components: list[str], stats: dict | str | None = None) -> dict:
    """Add the ``combination`` scores to every item (in place); returns the statistics used, per component."""
    zm = combiner(items, components, stats)
    add_scores(items, zm)
    return summary(zm)
