"""A learned combination of sentence scores: logistic regression with few parameters (issue 3, route 4).

    P(hallucinated | sentence i) = sigmoid(b + sum_m w_m * (x_m(i) - mu_m) / sd_m)

over the chosen component methods m (their sentence scores x_m), trained on labelled sentences (positive = minor
or major inaccurate, the paper's NonFact class) with scikit-learn's L2-regularized logistic regression. Unlike the
z-mean ``combination`` it needs no statistics of the run it scores: the standardization and the weights are fixed
at training time and stored in a JSON file, so a single record gets the same score alone as in a batch, and the
output is a calibrated probability in [0, 1]. Passage score: mean of the sentence probabilities.

The packaged file (``halluscope/data/learned.json``) is trained by ``halluscope train-learned`` on WikiBio
passages 0-118 only (the development half); figures on passages 119-237 are therefore held out.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from ..combine import Logistic
from ..types import ItemResult, MethodInfo, Results

NAME = "learned"


def default_path() -> Path:
    return Path(str(resources.files("halluscope") / "data" / "learned.json"))


@dataclass
class LearnedCombination:
    components: list[str]
    mean: list[float]
    scale: list[float]
    weights: list[float]
    bias: float
    trained_on: str = ""
    settings: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ fitting and storage
    @classmethod
    def fit(cls, results: Results, components: list[str], C: float = 1.0, trained_on: str = "") -> "LearnedCombination":
        """Fit the :class:`~halluscope.combine.Logistic` combiner on the labelled sentences of ``results``."""
        X, y = features(results, components), labels(results)
        lr = Logistic(list(components), C=C).fit(X, y)
        return cls(components=list(components), mean=lr.mean, scale=lr.scale, weights=lr.weights, bias=lr.bias,
                   trained_on=trained_on,
                   settings={"C": C, "sentences": int(len(y)), "positives": int(y.sum()),
                             "positive_class": "label > 0.499 (minor or major inaccurate)"})

    def combiner(self) -> Logistic:
        return Logistic(self.components, self.mean, self.scale, self.weights, self.bias,
                        C=self.settings.get("C", 1.0), fitted_on=self.trained_on)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path | None = None) -> "LearnedCombination":
        p = Path(path) if path else default_path()
        try:
            d = json.loads(p.read_text())
            if d.get("kind") == "logistic":  # a fitted Logistic combiner saved on its own (Logistic(...).save(path))
                from ..combine import from_dict

                lr = from_dict(d)
                if not lr.weights:
                    raise ValueError("the Logistic combiner saved there was never fitted")
                return cls(components=list(lr.components), mean=list(lr.mean), scale=list(lr.scale),
                           weights=list(lr.weights), bias=float(lr.bias), trained_on=lr.fitted_on,
                           settings={"C": lr.C})
            return cls(**d)
        except (OSError, ValueError, TypeError, KeyError) as e:
            raise ValueError(f"cannot read the learned combination file {p}: {e}") from e

    # ------------------------------------------------------------------ use
    def info(self) -> MethodInfo:
        return MethodInfo(
            NAME,
            bounded=True,
            description="logistic combination of " + ", ".join(self.components)
            + (f" (trained on {self.trained_on})" if self.trained_on else ""),
        )

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.combiner().predict_proba(X)

    def apply(self, items: list[ItemResult]) -> None:
        """Add the ``learned`` sentence and passage scores to every item (in place)."""
        for it in items:
            X = np.column_stack([_finite(it.sentence_scores[m]) for m in self.components])
            p = self.predict(X)
            it.sentence_scores[NAME] = [float(x) for x in p]
            it.passage_scores[NAME] = float(p.mean())


def _finite(v) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    return np.nan_to_num(v, nan=0.0, posinf=50.0, neginf=-50.0)


def features(results: Results, components: list[str]) -> np.ndarray:
    items = [it for it in results.items if it.labels is not None]
    missing = [m for m in components if items and m not in items[0].sentence_scores]
    if missing:
        raise ValueError(f"the results lack the component methods {missing}: score them first")
    return np.column_stack([np.concatenate([_finite(it.sentence_scores[m]) for it in items]) for m in components])


def labels(results: Results) -> np.ndarray:
    items = [it for it in results.items if it.labels is not None]
    if not items:
        raise ValueError("training the learned combination needs labelled records")
    return (np.concatenate([np.asarray(it.labels, float) for it in items]) > 0.499).astype(int)


def cross_validate(results: Results, components: list[str], C: float = 1.0, folds: int = 5) -> Results:
    """k-fold check grouped by passage: every passage scored by a combination fitted without it. Returns the
    out-of-fold results (``learned`` added), for :func:`~halluscope.evaluation.wikibio.evaluate_results`."""
    from sklearn.model_selection import KFold

    oof = []
    for train_idx, test_idx in KFold(n_splits=folds, shuffle=True, random_state=0).split(results.items):
        fold = LearnedCombination.fit(Results(items=[results.items[i] for i in train_idx]), components, C=C)
        held = [results.items[i] for i in test_idx]
        fold.apply(held)
        oof.extend(held)
    return Results(items=oof, methods=[*components, NAME])
