"""LUQ, Long-text Uncertainty Quantification (Zhang, Liu, Basaldella & Collier 2024, "LUQ: Long-text Uncertainty
Quantification for LLMs", EMNLP 2024, arXiv 2403.20279; its method section).

Each sentence s_j of the response r is checked for support by each sample r' with the NLI model, the sample as
premise and the sentence as hypothesis, the neutral class left out (the paper computes it from the entailment and
contradiction logits, exp(l_e) / (exp(l_e) + exp(l_c)), which is the same ratio):

    S(s_j, r') = P(entail | r', s_j) = p_e / (p_e + p_c)
    U(s_j)     = 1 - (1/N) sum_{r'} S(s_j, r')                          (the sentence's uncertainty)
    LUQ(r)     = (1/|r|) sum_j U(s_j) = 1 - (1/N) sum_{r'} S(r, r'),    S(r, r') = (1/|r|) sum_j S(s_j, r')

(the paper's definition: the response's similarity to each sample is the mean over its sentences, the uncertainty one
minus its mean over the samples; the two orders of averaging are equal). Bounded in [0, 1], higher = more likely
hallucinated. A response-level method (one score per answer); the evidence keeps each sentence's U(s_j) and the
sample that supports it least.

The premise is the **whole sample**, as in the paper (not the k closest sample sentences that ``nli`` and
``nli_support`` read by default): LUQ asks whether anything in the sample supports the sentence. A sample longer
than the NLI model's window is read in sentence windows by the shared NLI model, and the window that entails the
sentence most counts (AlignScore's chunk-and-max; the paper's DeBERTa truncates instead). The pairs are the shared
NLI cache's: with ``nli_evidence="sample"`` they are exactly the pairs of ``nli`` / ``nli_support`` (then LUQ is
1 - the mean over sentences of 1 - ``nli``, i.e. the mean of SelfCheck-NLI's sentence scores) and cost nothing
more; for a one-sentence answer they are the (sample, answer) pairs of ``non_contradiction`` and the graph scores.
"""

from __future__ import annotations

import numpy as np

from ..models.nli import NLI
from ..types import MethodInfo
from .base import MethodScores, PreparedItem


def entail_share(p: np.ndarray) -> np.ndarray:
    """S = p_e / (p_e + p_c) over the last axis of NLI probabilities (entail, neutral, contradict)."""
    return p[..., 0] / np.clip(p[..., 0] + p[..., 2], 1e-12, None)


class LUQScorer:
    name = "luq"

    def __init__(self, nli: NLI, sentence_first: bool = False):
        self.nli = nli
        self.sentence_first = sentence_first  # a model trained on (sentence, sample) pairs, as the nli scorer

    def method_info(self) -> list[MethodInfo]:
        return [MethodInfo(self.name, bounded=True, passage="response", level="response",
                           description="LUQ: 1 - mean over sentences and samples of p_e / (p_e + p_c), premise = the "
                           f"whole sample (NLI={self.nli.name})")]

    def pairs(self, it: PreparedItem) -> list[tuple[str, str]]:
        """(premise, hypothesis) pairs of one item, sentence-major: every sentence against every whole sample."""
        if self.sentence_first:
            return [(s, e) for s in it.sentences for e in it.evidence]
        return [(e, s) for s in it.sentences for e in it.evidence]

    def score(self, items: list[PreparedItem]) -> dict[str, list[MethodScores]]:
        per_item = [self.pairs(it) for it in items]
        self.nli.probs([p for ps in per_item for p in ps])  # one batched pass over the chunk's unseen pairs
        out = []
        for it, ps in zip(items, per_item):
            support = entail_share(self.nli.probs(ps).reshape(len(it.sentences), len(it.evidence), 3))
            u = 1.0 - support.mean(axis=1)
            ev = [{"uncertainty": round(float(x), 4), "least_supporting_sample": int(support[i].argmin())}
                  for i, x in enumerate(u)]
            out.append(MethodScores(np.zeros(0), float(u.mean()), ev))
        return {self.name: out}


def _register() -> None:
    from ..engine.registry import MethodSpec, register

    register(MethodSpec("luq", level="response", needs=("sentences", "nli"), bounded=True, aggregate=None,
                        source="Zhang et al. 2024, LUQ: Long-text Uncertainty Quantification for LLMs (EMNLP; arXiv "
                               "2403.20279)",
                        formula="1 - mean over the response's sentences s and the samples r' of p_e / (p_e + p_c), "
                                "NLI premise = the whole sample r', hypothesis = s"),
             build=lambda names, art: LUQScorer(art.nli(), sentence_first=art.option("nli_sentence_first", False)))


_register()
