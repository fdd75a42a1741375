"""NLI consistency of each sentence with the samples: two readings of one set of NLI probabilities (one pass).

``nli``, SelfCheckGPT with NLI (Manakul et al. 2023, later version §5.4; the ``SelfCheckNLI`` reference). For
sentence r_i and sample S_n, with the sample as premise and the sentence as hypothesis, the neutral class is left
out and contradiction renormalized against entailment:

    P(contradict | r_i, S_n) = p_c / (p_e + p_c)          S_NLI(i) = 1/N * sum_n P(contradict | r_i, S_n)

``nli_support``, the support reading of a 3-way model (the question AlignScore, Zha et al. 2023, and MiniCheck,
Tang et al. 2024, ask of a claim and its evidence: is it supported?):

    S_support(i) = 1/N * sum_n (1 - p_e(S_n, r_i))

A made-up sentence is mostly *not entailed* by the other samples (they say something else, or nothing, about it:
neutral) rather than contradicted, so this reading keeps the neutral mass the SelfCheck formula drops; for a
2-class model (p_n = 0) the two readings are equal. Measured on WikiBio passages 0-118 in EVALUATION.md.

Both bounded in [0, 1]. The evidence kept per sentence is the sample that contradicts it most (``nli``) or supports
it least (``nli_support``). The NLI model is the
shared :class:`~halluscope.models.nli.NLI` instance (each pair computed once, batched).

Sentence-sized evidence (the default, ``evidence=k``): the premise for (r_i, S_n) is not the whole sample but the
k sentences of S_n whose sentence embeddings (the shared encoder's, the same vectors BERTScore's pass computes) are
closest to r_i by cosine, joined in their order in the sample. Pairs are about a third as long, nothing of a long
sample is cut unread, and repeated sample sentences hit the pair cache. ``evidence="sample"`` keeps the whole
sample as the premise (the reference's setting; a sample longer than the model's window is read in sentence
windows by the NLI model itself).
"""

from __future__ import annotations

import numpy as np

from ..models.nli import NLI
from ..types import MethodInfo
from .base import MethodScores, PreparedItem


def contradiction_share(p: np.ndarray) -> np.ndarray:
    """P(contradict) = p_c / (p_e + p_c) over the last axis of NLI probabilities (entail, neutral, contradict)."""
    return p[..., 2] / np.clip(p[..., 0] + p[..., 2], 1e-12, None)


def check_evidence(k: int | str) -> int | str:
    """An NLI evidence setting as :func:`evidence_premises` reads it: ``"sample"`` (the whole sample) or the number
    of closest sample sentences, 1 or more (an integer, or its digits as text, as a command line gives it)."""
    if k == "sample":
        return k
    text = str(k).strip()
    digits = text.isascii() and text.isdigit()
    n = k if isinstance(k, int) and not isinstance(k, bool) else int(text) if digits else None
    if n is None or n < 1:
        raise ValueError(f"nli_evidence (--nli-evidence) must be 'sample' or a number of closest sample sentences, "
                         f"1 or more; got {k!r}")
    return n


def evidence_premises(encoder, sentences: list[tuple[str, ...]], samples: list[tuple[str, ...]],
                      k: int | str = 2) -> list[list[list[str]]]:
    """Premises per record, sentence and sample: ``[record][sentence][sample]``. With an integer ``k`` each premise
    is the sample's k sentences most similar to the response sentence (cosine of sentence embeddings), in sample
    order; with ``"sample"`` it is the whole sample. All embeddings of all records come from one batched pass."""
    from ..text import split_sentences

    if k == "sample" or encoder is None:
        return [[list(smp) for _ in sents] for sents, smp in zip(sentences, samples)]
    k = int(k)
    split = [[split_sentences(x) or (x,) for x in smp] for smp in samples]
    encoder.sentence_embeddings([t for sents, sp in zip(sentences, split) for t in (*sents, *(y for x in sp for y in x))])
    out = []
    for sents, sp in zip(sentences, split):
        flat = [y for x in sp for y in x]
        if not flat:
            out.append([["" for _ in sp] for _ in sents])
            continue
        sim = encoder.sentence_embeddings(list(sents)) @ encoder.sentence_embeddings(flat).T  # [m, K]
        bounds = np.cumsum([0, *(len(x) for x in sp)])
        rows = []
        for i in range(len(sents)):
            row = []
            for n, x in enumerate(sp):
                part = sim[i, bounds[n] : bounds[n + 1]]
                keep = sorted(np.argsort(-part, kind="stable")[:k])
                row.append(" ".join(x[j] for j in keep))
            rows.append(row)
        out.append(rows)
    return out


class NLIScorer:
    """``names``: which readings to return, from ``("nli", "nli_support")``; both read the same NLI pairs."""

    name = "nli"
    READINGS = ("nli", "nli_support")

    def __init__(self, nli: NLI, sentence_first: bool = False, encoder=None, evidence: int | str = 2,
                 names: tuple[str, ...] = ("nli",)):
        self.nli = nli
        self.sentence_first = sentence_first  # the potsawee/deberta-v3-large-mnli reference feeds (sentence, sample)
        self.encoder = encoder
        self.evidence = evidence if encoder is not None else "sample"
        unknown = [n for n in names if n not in self.READINGS]
        if unknown:
            raise ValueError(f"unknown NLI readings {unknown}; choose from {self.READINGS}")
        self.names = tuple(names)

    def method_info(self) -> list[MethodInfo]:
        ev = f"NLI={self.nli.name}, evidence=" + ("whole sample" if self.evidence == "sample"
                                                   else f"{self.evidence} closest sentences")
        text = {"nli": "mean over samples of P(contradiction)/(P(entailment)+P(contradiction))",
                "nli_support": "mean over samples of 1 - P(entailment) (not supported)"}
        return [MethodInfo(n, bounded=True, description=f"{text[n]}, {ev}") for n in self.names]

    def pairs(self, it: PreparedItem, prem: list[list[str]]) -> list[tuple[str, str]]:
        """(premise, hypothesis) pairs of one item, sentence-major, given its premises [sentence][sample]."""
        if self.sentence_first:
            return [(s, e) for s, row in zip(it.sentences, prem) for e in row]
        return [(e, s) for s, row in zip(it.sentences, prem) for e in row]

    def score(self, items: list[PreparedItem]) -> dict[str, list[MethodScores]]:
        prem = evidence_premises(self.encoder, [it.sentences for it in items], [it.evidence for it in items],
                                 self.evidence)
        per_item = [self.pairs(it, pr) for it, pr in zip(items, prem)]
        self.nli.probs([p for ps in per_item for p in ps])  # one batched pass over the chunk's unseen pairs
        out: dict[str, list[MethodScores]] = {n: [] for n in self.names}
        for it, ps in zip(items, per_item):
            p = self.nli.probs(ps).reshape(len(it.sentences), len(it.evidence), 3)
            for n in self.names:
                v = contradiction_share(p) if n == "nli" else 1.0 - p[..., 0]
                key = "p_contradiction" if n == "nli" else "p_not_entailed"
                worst = v.argmax(axis=1)
                ev = [{"sample": int(w), key: round(float(v[i, w]), 4)} for i, w in enumerate(worst)]
                s = v.mean(axis=1)
                out[n].append(MethodScores(s, float(s.mean()), ev))
        return out


def _build(names: list[str], art) -> NLIScorer:
    evidence = art.option("nli_evidence", 3)
    enc = art.encoder() if evidence != "sample" else None
    return NLIScorer(art.nli(), sentence_first=art.option("nli_sentence_first", False), encoder=enc,
                     evidence=evidence, names=tuple(names))


def _register() -> None:
    from ..engine.registry import MethodSpec, register

    needs = ("sentences", "sample_sentences", "sentence_embeddings", "nli")
    register(
        MethodSpec("nli", level="sentence", needs=needs, bounded=True, group="nli", claims=True,
                   source="SelfCheckGPT (Manakul et al. 2023) §5.4, Eq. 10 (SelfCheck-NLI)",
                   formula="mean over samples of p_c / (p_e + p_c), premise = the sample's k closest sentences"),
        MethodSpec("nli_support", level="sentence", needs=needs, bounded=True, group="nli", claims=True,
                   source="the support question of AlignScore (Zha et al. 2023) and MiniCheck (Tang et al. 2024)",
                   formula="mean over samples of 1 - p_e (the sentence is not entailed by the sample's evidence)"),
        build=_build)


_register()
