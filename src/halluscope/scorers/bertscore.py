"""SelfCheckGPT with BERTScore (Manakul et al. 2023, §5.1, Eq. 6).

    S_BERT(i) = 1 - 1/N * sum_n max_k B(r_i, s_nk)

B is BERTScore F1 (Zhang et al. 2020): greedy matching of unit-length token vectors of one encoder layer, P = mean
over candidate tokens of the best cosine, R = mean over reference tokens, F1 = 2PR / (P + R); no IDF weighting; P
and R below 0 count as 0, so F1 lies in [0, 1] and the score in [0, 1] (the reference's F1 leaves [-1, 1] for texts
whose best matches are anti-aligned on average; no WikiBio pair comes near). Sample sentences of three words or
fewer are skipped (the reference implementation skips those of three spaCy tokens or fewer, punctuation counted: of
WikiBio's 34,354 sample sentences 28 differ, mostly cut-off fragments such as "In 1982, after"); where every
sentence of a sample is that short, the sample's sentences are kept. With a baseline file, F1 is rescaled as (F1 -
b) / (1 - b) (bert_score's ``rescale_with_baseline``): a linear map that changes the values, not the ranking. Each
unique sentence is encoded once (shared :class:`~halluscope.models.Encoder` cache); all sentence-pair similarities
of a record come from one batched matrix product, cut into blocks of pairs where that product would exceed ``BLOCK``
similarities (a long answer against long samples: memory stays bounded).
"""

from __future__ import annotations

import numpy as np

from ..models.encoder import Encoder, load_baseline
from ..types import MethodInfo
from .base import MethodScores, PreparedItem


def _pad(vecs: list[np.ndarray]):
    import torch

    L = max(v.shape[0] for v in vecs)
    d = vecs[0].shape[1]
    out = torch.zeros((len(vecs), L, d), dtype=torch.float32)
    mask = torch.zeros((len(vecs), L), dtype=torch.bool)
    for i, v in enumerate(vecs):
        out[i, : v.shape[0]] = torch.from_numpy(v.astype(np.float32))
        mask[i, : v.shape[0]] = True
    return out, mask


BLOCK = 2**24  # token-pair similarities held at once (64 MB in fp32; masking and maxima take about three times it)


def bertscore_f1(ref: list[np.ndarray], cand: list[np.ndarray], block: int = BLOCK) -> np.ndarray:
    """BERTScore F1 of every (reference, candidate) pair: a [len(ref), len(cand)] matrix. In one product where the
    padded [len(ref), len(cand), Lr, Lc] similarities fit in ``block``; else in blocks of references and of
    candidates, each of like length (the same pairs, the same values to float rounding)."""
    lr, lc = max(len(r) for r in ref), max(len(c) for c in cand)
    if len(ref) * len(cand) * lr * lc <= block:
        return _f1_block(ref, cand)
    out = np.empty((len(ref), len(cand)), np.float32)
    for rows in _runs(ref, max(1, block // lc)):  # each run of references fits against the longest candidate
        for cols in _runs(cand, max(1, block // (len(rows) * len(ref[rows[-1]])))):
            out[np.ix_(rows, cols)] = _f1_block([ref[i] for i in rows], [cand[j] for j in cols])
    return out


def _runs(vecs: list[np.ndarray], cap: int) -> list[list[int]]:
    """Positions of ``vecs`` sorted by length, cut into runs of k with k times the run's longest length at most
    ``cap`` (at least one each)."""
    order = sorted(range(len(vecs)), key=lambda k: len(vecs[k]))
    runs, start = [], 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and (stop + 1 - start) * len(vecs[order[stop]]) <= cap:
            stop += 1
        runs.append(order[start:stop])
        start = stop
    return runs


def _f1_block(ref: list[np.ndarray], cand: list[np.ndarray]) -> np.ndarray:
    """BERTScore F1 of every (reference, candidate) pair in one batched product."""
    import torch

    R, rm = _pad(ref)
    C, cm = _pad(cand)
    sim = torch.einsum("ild,kjd->iklj", R, C)  # [nr, nc, Lr, Lc]
    neg = torch.finfo(sim.dtype).min
    sim = sim.masked_fill(~cm[None, :, None, :], neg).masked_fill(~rm[:, None, :, None], neg)
    best_for_ref = sim.max(dim=3).values  # [nr, nc, Lr]: each reference token's best candidate token
    best_for_cand = sim.max(dim=2).values  # [nr, nc, Lc]
    rmf = rm[:, None, :].float()
    cmf = cm[None, :, :].float()
    # cosines of unit vectors lie in [-1, 1]; rounding gave 1 + 3e-5 (and a bounded score of -0.00003). Clamping
    # the best matches equals clamping every cosine (the max is monotone), on a tensor Lc or Lr times smaller
    # P or R below 0 (the best matches of unrelated texts, anti-aligned on average) counts as 0: the harmonic mean
    # of a negative and a positive value leaves [-1, 1] (-37058 for a sentence against one unrelated sample, which
    # turned its default probability to 0), and 2PR / (P + R) of two negatives was divided by a clamped 1e-8
    recall = ((best_for_ref.clamp(-1, 1) * rmf).sum(-1) / rmf.sum(-1)).clamp(min=0)
    precision = ((best_for_cand.clamp(-1, 1) * cmf).sum(-1) / cmf.sum(-1)).clamp(min=0)
    return (2 * precision * recall / (precision + recall).clamp(min=1e-12)).numpy()  # 0 where P = R = 0


class BERTScoreScorer:

    def __init__(
        self, encoder: Encoder, baseline: str | None = None, min_words: int = 3, layer: int | None = None,
        name: str = "bertscore",
    ):
        self.encoder = encoder
        self.layer = encoder.layer if layer is None else layer
        self.name = name
        self.min_words = min_words
        self.baseline_f = load_baseline(baseline, self.layer)[2] if baseline else None

    def method_info(self) -> list[MethodInfo]:
        return [
            MethodInfo(
                self.name,
                bounded=True,
                description=f"1 - mean over samples of the best BERTScore F1 against the sample's sentences "
                f"({self.encoder.name}, layer {self.layer}, {self.encoder.precision})",
            )
        ]

    def score(self, items: list[PreparedItem]) -> dict[str, list[MethodScores]]:
        # encode every unique sentence of the chunk in one batched pass
        per_item = [(it, it.evidence_sentences(self.min_words)) for it in items]
        all_texts = [s for it, ev in per_item for s in (*it.sentences, *(x for sents in ev for x in sents))]
        self.encoder.token_embeddings(all_texts, self.layer)
        out = []
        for it, ev in per_item:
            ref = self.encoder.token_embeddings(list(it.sentences), self.layer)
            flat = [s for sents in ev for s in sents]
            seg = np.repeat(np.arange(len(ev)), [len(s) for s in ev])
            f1 = bertscore_f1(ref, self.encoder.token_embeddings(flat, self.layer))  # [m, K]
            if self.baseline_f is not None:
                f1 = (f1 - self.baseline_f) / (1.0 - self.baseline_f)
            best = np.full((len(ref), len(ev)), -np.inf)
            for n in range(len(ev)):
                best[:, n] = f1[:, seg == n].max(axis=1)
            s = 1.0 - best.mean(axis=1)
            out.append(MethodScores(s, float(s.mean())))
        return {self.name: out}


def _register() -> None:
    from ..engine.registry import MethodSpec, register

    register(MethodSpec("bertscore", level="sentence", needs=("sentences", "sample_sentences", "token_embeddings"),
                        bounded=True, claims=True, source="SelfCheckGPT (Manakul et al. 2023) §5.1, Eq. 6",
                        formula="1 - mean over samples of the best BERTScore F1 against the sample's sentences"),
             build=lambda names, art: BERTScoreScorer(art.encoder(), baseline=art.option("bertscore_baseline")))


_register()
