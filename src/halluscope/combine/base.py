"""The combiners (see the package docstring for the interface and the formulas)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

UNSEEN_Z = 5.0  # an unseen n-gram (-log p = inf) counts as 5 standard deviations above the mean: far, but finite


def _matrix(X) -> np.ndarray:
    X = np.array(X, dtype=float, copy=True)  # a copy: the caller's array is never changed
    return X.reshape(-1, 1) if X.ndim == 1 else X


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -500, 500)))


class Combiner:
    kind = ""

    def to_dict(self) -> dict:
        return {"kind": self.kind, **asdict(self)}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")


@dataclass
class ZMean(Combiner):
    """z = (x_m - mean_m) / sd_m per component m, with mean and sd fixed by :meth:`fit`; score = mean_m z."""

    components: list[str]
    mean: list[float] = field(default_factory=list)
    scale: list[float] = field(default_factory=list)
    fitted_on: str = ""
    kind = "zmean"

    def fit(self, X, y=None) -> "ZMean":
        X = _matrix(X)
        mu, sd = [], []
        for col in X.T:
            v = col[np.isfinite(col)]
            mu.append(float(v.mean()) if len(v) else 0.0)
            s = float(v.std()) if len(v) > 1 else 1.0
            sd.append(s if s > 0 else 1.0)
        self.mean, self.scale = mu, sd
        return self

    def z(self, X) -> np.ndarray:
        if not self.mean:
            raise ValueError("ZMean is not fitted: fit it (or load fitted statistics) before use")
        X = _matrix(X)
        mu, sd = np.asarray(self.mean), np.asarray(self.scale)
        X = np.where(np.isposinf(X), mu + UNSEEN_Z * sd, X)
        X = np.where(np.isneginf(X), mu - UNSEEN_Z * sd, X)
        return (X - mu) / sd

    def transform(self, X) -> np.ndarray:
        return self.z(X).mean(axis=1)


@dataclass
class Logistic(Combiner):
    """P(hallucinated) = sigmoid(b + sum_m w_m * z_m), z standardized with statistics fixed at fit."""

    components: list[str]
    mean: list[float] = field(default_factory=list)
    scale: list[float] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    bias: float = 0.0
    C: float = 1.0
    fitted_on: str = ""
    kind = "logistic"

    def fit(self, X, y) -> "Logistic":
        from sklearn.linear_model import LogisticRegression

        X = np.nan_to_num(_matrix(X), nan=0.0, posinf=50.0, neginf=-50.0)
        mu, sd = X.mean(axis=0), X.std(axis=0)
        sd = np.where(sd > 0, sd, 1.0)
        clf = LogisticRegression(C=self.C, max_iter=1000).fit((X - mu) / sd, np.asarray(y, int))
        self.mean, self.scale = mu.tolist(), sd.tolist()
        self.weights, self.bias = clf.coef_[0].tolist(), float(clf.intercept_[0])
        return self

    def predict_proba(self, X) -> np.ndarray:
        X = np.nan_to_num(_matrix(X), nan=0.0, posinf=50.0, neginf=-50.0)
        z = (X - np.asarray(self.mean)) / np.asarray(self.scale)
        return _sigmoid(z @ np.asarray(self.weights) + self.bias)

    transform = predict_proba


@dataclass
class Platt(Combiner):
    """p = sigmoid(a * s + b), fitted by (nearly unregularized) logistic regression of y on the one score s."""

    a: float = 1.0
    b: float = 0.0
    fitted_on: str = ""
    kind = "platt"

    def fit(self, s, y) -> "Platt":
        from sklearn.linear_model import LogisticRegression

        s = np.asarray(s, float).reshape(-1, 1)
        clf = LogisticRegression(C=1e4, max_iter=1000).fit(s, np.asarray(y, int))
        self.a, self.b = float(clf.coef_[0, 0]), float(clf.intercept_[0])
        return self

    def predict_proba(self, s) -> np.ndarray:
        return _sigmoid(self.a * np.asarray(s, float) + self.b)

    transform = predict_proba


@dataclass
class Calibrated(Combiner):
    """A :class:`ZMean` of the components, then :class:`Platt` scaling: one calibrator for sentences and one for
    whole answers (whose score is the mean of their sentences' z-means). ``threshold``: the flag."""

    base: ZMean
    sentence: Platt
    response: Platt
    threshold: float = 0.5
    fitted_on: str = ""
    kind = "calibrated"

    @property
    def components(self) -> list[str]:
        return self.base.components

    def sentence_proba(self, X) -> np.ndarray:
        return self.sentence.predict_proba(self.base.transform(X))

    def response_proba(self, X) -> float:
        """X: the answer's sentences (rows) by components."""
        return float(self.response.predict_proba(self.base.transform(X).mean()))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "base": self.base.to_dict(), "sentence": self.sentence.to_dict(),
                "response": self.response.to_dict(), "threshold": self.threshold, "fitted_on": self.fitted_on}


def from_dict(d: dict) -> Combiner:
    d = dict(d)
    kind = d.pop("kind", None)
    if kind == "calibrated":
        return Calibrated(base=from_dict(d["base"]), sentence=from_dict(d["sentence"]),
                          response=from_dict(d["response"]), threshold=d.get("threshold", 0.5),
                          fitted_on=d.get("fitted_on", ""))
    classes = {"zmean": ZMean, "logistic": Logistic, "platt": Platt}
    if kind not in classes:
        raise ValueError(f"unknown combiner kind {kind!r}; expected one of {sorted(classes)} or 'calibrated'")
    return classes[kind](**d)


def load(path: str | Path) -> Combiner:
    try:
        return from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise ValueError(f"cannot read the combiner file {path}: {e}") from e
