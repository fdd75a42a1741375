"""SelfCheckGPT with NLI (Manakul et al. 2023, later version §5.4; the ``SelfCheckNLI`` reference).

For sentence r_i and sample S_n, with the sample as premise and the sentence as hypothesis, the neutral class is
left out and contradiction renormalized against entailment:

    P(contradict | r_i, S_n) = p_c / (p_e + p_c)          S_NLI(i) = 1/N * sum_n P(contradict | r_i, S_n)

Bounded in [0, 1]. The evidence kept per sentence is the sample that contradicts it most. The NLI model is the
shared :class:`~halluscope.models.nli.NLI` instance (each pair computed once, batched).
"""

from __future__ import annotations

import numpy as np

from ..models.nli import NLI
from ..types import MethodInfo
from .base import MethodScores, PreparedItem


def contradiction_share(p: np.ndarray) -> np.ndarray:
    """P(contradict) = p_c / (p_e + p_c) over the last axis of NLI probabilities (entail, neutral, contradict)."""
    return p[..., 2] / np.clip(p[..., 0] + p[..., 2], 1e-12, None)


class NLIScorer:
    name = "nli"

    def __init__(self, nli: NLI, sentence_first: bool = False):
        self.nli = nli
        self.sentence_first = sentence_first  # the potsawee/deberta-v3-large-mnli reference feeds (sentence, sample)

    def method_info(self) -> list[MethodInfo]:
        return [
            MethodInfo(
                self.name,
                bounded=True,
                description=f"mean over samples of P(contradiction)/(P(entailment)+P(contradiction)), NLI={self.nli.name}",
            )
        ]

    def pairs(self, it: PreparedItem) -> list[tuple[str, str]]:
        if self.sentence_first:
            return [(s, e) for s in it.sentences for e in it.evidence]
        return [(e, s) for s in it.sentences for e in it.evidence]

    def score(self, items: list[PreparedItem]) -> dict[str, list[MethodScores]]:
        all_pairs = [p for it in items for p in self.pairs(it)]
        self.nli.probs(all_pairs)  # one batched pass over the chunk's unseen pairs
        out = []
        for it in items:
            p = self.nli.probs(self.pairs(it)).reshape(len(it.sentences), len(it.evidence), 3)
            c = contradiction_share(p)
            s = c.mean(axis=1)
            worst = c.argmax(axis=1)
            evidence = [
                {"sample": int(w), "p_contradiction": round(float(c[i, w]), 4)} for i, w in enumerate(worst)
            ]
            out.append(MethodScores(s, float(s.mean()), evidence))
        return {self.name: out}
