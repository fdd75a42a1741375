"""SelfCheckGPT with BERTScore (Manakul et al. 2023, §5.1, Eq. 6).

    S_BERT(i) = 1 - 1/N * sum_n max_k B(r_i, s_nk)

B is BERTScore F1 (Zhang et al. 2020): greedy matching of unit-length token vectors of one encoder layer,
P = mean over candidate tokens of the best cosine, R = mean over reference tokens, F1 = 2PR / (P + R); no IDF
weighting. Sample sentences of three words or fewer are skipped (the reference implementation skips those of three
spaCy tokens or fewer, punctuation counted: of WikiBio's 34,354 sample sentences 28 differ, mostly cut-off fragments
such as "In 1982, after"); where every sentence of a sample is that short, the sample's sentences are kept. With a
baseline file, F1 is rescaled as (F1 - b) / (1 - b) (bert_score's ``rescale_with_baseline``): a linear map that
changes the values, not the ranking. Each unique sentence is encoded once (shared :class:`~halluscope.models.Encoder`
cache); all sentence-pair similarities of a record come from one batched matrix product.
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


def bertscore_f1(ref: list[np.ndarray], cand: list[np.ndarray]) -> np.ndarray:
    """BERTScore F1 of every (reference, candidate) pair: a [len(ref), len(cand)] matrix."""
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
    recall = (best_for_ref.clamp(-1, 1) * rmf).sum(-1) / rmf.sum(-1)
    precision = (best_for_cand.clamp(-1, 1) * cmf).sum(-1) / cmf.sum(-1)
    f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-8)
    return f1.numpy()


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
