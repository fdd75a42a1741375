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
    """p = sigmoid(a * s + b), fitted by (nearly unregularized) logistic regression of y on the one score s.

    With the number of samples n each score was computed from (``fit(s, y, n)`` over at least two sample counts),
    slope and intercept move with log n, because fewer samples make every consistency score noisier (a flatter map)
    and shift some of them (an n-gram model of 3 samples has seen fewer words):

        p = sigmoid((a + a_n * l) * s + b + b_n * l),     l = ln(clip(n, n_min, n_max) / n_ref)

    n_min and n_max are the smallest and largest sample counts fitted on (no extrapolation outside them), n_ref the
    count at which the map is plain ``sigmoid(a * s + b)`` (n_max after such a fit). Without n, with an unknown n
    (0), or with a_n = b_n = 0 the map is that of n_ref. A refit on scores of a single sample count n0 (reviews of
    one deployment) refits a and b at n0, which becomes n_ref, and keeps the fitted dependence on log n.
    """

    a: float = 1.0
    b: float = 0.0
    a_n: float = 0.0
    b_n: float = 0.0
    n_ref: float = 0.0
    n_min: float = 0.0
    n_max: float = 0.0
    fitted_on: str = ""
    kind = "platt"

    @staticmethod
    def _counts(n, s: np.ndarray) -> np.ndarray:
        """The sample count of every score (0: unknown)."""
        return np.broadcast_to(np.asarray(n if n is not None else 0, float), s.shape)

    def _log_n(self, n, like: np.ndarray) -> np.ndarray:
        if n is None or not self.n_ref or not (self.a_n or self.b_n):
            return np.zeros_like(like)
        n = self._counts(n, like)
        known = n > 0
        clipped = np.clip(np.where(known, n, self.n_ref), self.n_min, self.n_max)
        return np.where(known, np.log(clipped / self.n_ref), 0.0)

    def fit(self, s, y, n=None) -> "Platt":
        """s: scores, y: 1 = hallucinated; n (optional): the number of samples of each score. With two or more
        sample counts (all known) the dependence on log n is fitted too; otherwise plain Platt scaling."""
        from sklearn.linear_model import LogisticRegression

        s, y = np.asarray(s, float).reshape(-1), np.asarray(y, int)
        n = self._counts(n, s)
        counts = np.unique(n)
        if len(counts) < 2 or counts[0] <= 0:
            self.a_n = self.b_n = 0.0
            self.n_ref = self.n_min = self.n_max = float(counts[0]) if len(counts) == 1 else 0.0
            clf = LogisticRegression(C=1e4, max_iter=1000).fit(s.reshape(-1, 1), y)
            self.a, self.b = float(clf.coef_[0, 0]), float(clf.intercept_[0])
            return self
        self.n_ref = self.n_max = float(counts.max())
        self.n_min = float(counts.min())
        lg = np.log(n / self.n_ref)
        clf = LogisticRegression(C=1e4, max_iter=1000).fit(np.column_stack([s, lg, s * lg]), y)
        (self.a, self.b_n, self.a_n), self.b = clf.coef_[0].tolist(), float(clf.intercept_[0])
        return self

    def refit(self, s, y, n=None) -> "Platt":
        """a and b refitted on new scores (reviews of a deployment), keeping the fitted dependence on log n: scores
        of a single sample count n0 make n0 the reference (n_min / n_max widened to include it); mixed counts keep
        the reference and fit a, b with the dependence as a fixed offset. Returns self."""
        from scipy.optimize import minimize

        s, y = np.asarray(s, float).reshape(-1), np.asarray(y, float)
        n = self._counts(n, s)
        counts = np.unique(n[n > 0])
        if len(counts) == 1 and (n > 0).all():
            n0 = float(counts[0])
            self.n_min, self.n_max = (min(self.n_min, n0), max(self.n_max, n0)) if self.n_ref else (n0, n0)
            self.n_ref = n0
        lg = self._log_n(n, s)
        offset = self.a_n * lg * s + self.b_n * lg
        ridge = 1.0 / (1e4 * len(s))  # the slope's L2 penalty of :meth:`fit` (C = 1e4), bounded on separable reviews

        def loss(w):
            q = _sigmoid(w[0] * s + w[1] + offset)
            g = q - y
            return (-np.mean(y * np.log(q + 1e-12) + (1 - y) * np.log(1 - q + 1e-12)) + ridge * w[0] ** 2 / 2,
                    np.array([np.mean(g * s) + ridge * w[0], np.mean(g)]))

        self.a, self.b = (float(x) for x in minimize(loss, [self.a, self.b], jac=True, method="BFGS").x)
        return self

    def predict_proba(self, s, n=None) -> np.ndarray:
        """P(hallucinated) of scores ``s``; ``n``: their number of samples (one, or one per score)."""
        s = np.asarray(s, float)
        lg = self._log_n(n, s)
        return _sigmoid((self.a + self.a_n * lg) * s + self.b + self.b_n * lg)

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

    def sentence_proba(self, X, n=None) -> np.ndarray:
        """X: sentences (rows) by components; n: the number of samples they were scored against."""
        return self.sentence.predict_proba(self.base.transform(X), n)

    def response_proba(self, X, n=None) -> float:
        """X: the answer's sentences (rows) by components; n: the number of samples."""
        return float(self.response.predict_proba(self.base.transform(X).mean(), n))

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
