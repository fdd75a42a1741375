"""ROUGE-L lexical similarity of the response to its samples: the lexical baseline of LM-Polygraph
(``LexicalSimilarity``, after Fomicheva et al. 2020, "Unsupervised Quality Estimation for Neural Machine
Translation", TACL 8), with ROUGE-L as defined by Lin (2004, "ROUGE: A Package for Automatic Evaluation of
Summaries", ACL workshop):

    LCS(y, s)        the length of the longest common subsequence of the two word sequences
    P = LCS / |y|,   R = LCS / |s|,   F1 = 2 P R / (P + R)   (0 when LCS = 0)

    rouge_l = 1 - (1/N) sum_n F1(y, s_n)

over the response y and its N samples s_n. Words are the lower-cased ``\\w+`` runs of each text (rouge_score's
tokenizer keeps ``[a-z0-9]+`` and can stem; here letters of every script count and nothing is stemmed). A text with
no word shares nothing (F1 = 0). Higher = more likely hallucinated: 0 when every sample repeats the response word
for word in the same order. Two texts without a word ("🙂") are alike (F1 1) when they are the same text.

Differences from LM-Polygraph: its ``LexicalSimilarity`` averages the similarity over pairs of *samples* (the
model's uncertainty, the response unread) and stems with Porter; this score compares the response with each
sample, as every response method here does. BLEU is not offered: it is a precision of n-grams of the candidate,
which the n-gram methods (``ngram1_max`` ...) already read.

The LCS is computed bit-parallel (Hyyro 2004, "Bit-parallel LCS-length computation revisited"): one pass over the
sample's words with machine-word operations on a bit vector as long as the response, so a 300-word answer
against 20 samples costs milliseconds in plain Python.
"""

from __future__ import annotations

import re

import numpy as np

from .base import MethodScores, PreparedItem

_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """The lower-cased word runs of a text (letters and digits of any script)."""
    return _WORD.findall(text.lower())


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of ``a`` and ``b`` (bit-parallel: V' = (V + U) | (V - U),
    U = V & M[w]; the LCS is the number of zero bits left in the |a| low bits of V)."""
    if not a or not b:
        return 0
    match: dict[str, int] = {}
    for i, w in enumerate(a):
        match[w] = match.get(w, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for w in b:
        u = v & match.get(w, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - bin(v).count("1")


def rouge_l_f1(a: list[str], b: list[str]) -> float:
    """ROUGE-L F1 of two word sequences (symmetric)."""
    lcs = lcs_length(a, b)
    if lcs == 0:
        return 0.0
    p, r = lcs / len(a), lcs / len(b)
    return 2 * p * r / (p + r)


def _similarity(response: str, y: list[str], sample: str) -> float:
    """ROUGE-L F1 of the response's words ``y`` and the sample's; two texts without a word (emoji, symbols) are
    alike when they are the same text."""
    s = words(sample)
    if not y and not s:
        return float(response.strip() == sample.strip())
    return rouge_l_f1(y, s)


class RougeScorer:
    """``rouge_l`` over prepared items: the response against each evidence text (the samples)."""

    def score(self, items: list[PreparedItem]) -> dict[str, list[MethodScores]]:
        out = []
        for it in items:
            y = words(it.record.response)
            sims = [_similarity(it.record.response, y, s) for s in it.evidence]
            out.append(MethodScores(np.zeros(0), float(1.0 - np.mean(sims)) if sims else float("nan")))
        return {"rouge_l": out}


def _register() -> None:
    from ..engine.registry import MethodSpec, register

    register(MethodSpec("rouge_l", level="response", needs=(), bounded=True, aggregate=None,
                        source="Lin 2004 (ROUGE-L); LM-Polygraph LexicalSimilarity (Fomicheva et al. 2020)",
                        formula="1 - mean over samples of ROUGE-L F1 (longest common word subsequence) of the "
                                "response and the sample, lower-cased words, no stemming"),
             build=lambda names, art: RougeScorer())


_register()
