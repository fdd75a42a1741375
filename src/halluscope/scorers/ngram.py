"""SelfCheckGPT with n-gram (Manakul et al. 2023, §5.3, Eq. 13-14; Table 6).

An n-gram model is trained on the N samples plus the main response R (including R acts as add-one smoothing of R's
own tokens). Following the reference implementation, the "n-gram probability" is the relative frequency of the
n-gram among all n-grams counted, with each sentence left-padded by ``<s>`` (n-1 times), lower-cased, no further
smoothing (k = 0). For sentence i with tokens j = 1..J:

    S_avg(i) = -1/J * sum_j log p~_ij          S_max(i) = max_j (-log p~_ij)

Passage level (paper §7.2): Avg is the mean over all tokens of the passage; Max is the mean of the sentence maxima.
Both are unbounded (raw -log p). All n in ``ns`` share one tokenization; counting is vectorized with numpy on
integer-coded n-grams.
"""

from __future__ import annotations

import numpy as np

from ..text import parser_sentences, strip_space, token_sentences, tokenize_many
from ..types import MethodInfo
from .base import MethodScores, PreparedItem

PAD = "<s>"


def method_name(n: int, agg: str) -> str:
    return f"ngram{n}_{agg}"


class NgramScorer:
    """Scores every n in ``ns`` and both aggregations (``avg``, ``max``); ``methods`` picks which to return."""

    def __init__(
        self,
        ns: tuple[int, ...] = (1,),
        aggs: tuple[str, ...] = ("max",),
        lowercase: bool = True,
        sentence_split: str = "parser",
    ):
        if any(n < 1 for n in ns):
            raise ValueError("n must be >= 1")
        if sentence_split not in ("parser", "rule"):
            raise ValueError("sentence_split must be 'parser' or 'rule'")
        self.ns = tuple(sorted(set(ns)))
        self.aggs = tuple(aggs)
        self.lowercase = lowercase
        self.sentence_split = sentence_split

    def method_info(self) -> list[MethodInfo]:
        out = []
        for n in self.ns:
            for agg in self.aggs:
                how = "mean over tokens" if agg == "avg" else "max over tokens"
                out.append(
                    MethodInfo(
                        method_name(n, agg),
                        bounded=False,
                        description=f"{n}-gram model on samples + response, {how} of -log p (raw, unbounded)",
                        passage="mean over all tokens" if agg == "avg" else "mean of sentence maxima",
                    )
                )
        return out

    def score(self, items: list[PreparedItem]) -> dict[str, list[MethodScores]]:
        """Sentence boundaries of the samples matter only for n > 1 (left padding). Then they come from spaCy's
        parser (``sentence_split="parser"``, faithful to the reference) or a punctuation rule (``"rule"``, faster,
        within about 2 points of the paper for n > 1). Unigrams need no sentence split and take the fast path."""
        need_split = max(self.ns) > 1
        evidence = [t for it in items for t in it.evidence]
        if need_split and self.sentence_split == "parser":
            ev_sents = parser_sentences(evidence)
            ev_texts = [s for ss in ev_sents for s in ss]
        else:
            ev_sents = None
            ev_texts = evidence
        sent_texts = [s for it in items for s in it.sentences]
        toks = tokenize_many(sent_texts + ev_texts)  # one tokenizer pass over everything
        if self.lowercase:
            toks = [[t.lower() for t in ts] for ts in toks]
        sent_toks, ev_toks = toks[: len(sent_texts)], toks[len(sent_texts) :]
        out: dict[str, list[MethodScores]] = {m.name: [] for m in self.method_info()}
        si = ei = ti = 0
        for it in items:
            eval_sents = [self._clean(t) for t in sent_toks[si : si + len(it.sentences)]]
            si += len(it.sentences)
            train_sents = list(eval_sents)  # R counts once: its own sentences are part of the training text
            for _ in it.evidence:
                if ev_sents is not None:
                    k = len(ev_sents[ei])
                    train_sents.extend(self._clean(t) for t in ev_toks[ti : ti + k])
                    ti += k
                elif need_split:
                    train_sents.extend(token_sentences(ev_toks[ti]))
                    ti += 1
                else:  # unigrams: no split needed; line breaks would be sentence edges, which the reference strips
                    train_sents.append([t for t in ev_toks[ti] if not (t.isspace() and "\n" in t)])
                    ti += 1
                ei += 1
            res = self._score_item(train_sents, eval_sents)
            for name, ms in res.items():
                if name in out:
                    out[name].append(ms)
        return out

    @staticmethod
    def _clean(tokens: list[str]) -> list[str]:
        return strip_space(tokens) or tokens

    def _score_item(self, train: list[list[str]], evals: list[list[str]]) -> dict[str, MethodScores]:
        vocab: dict[str, int] = {PAD: 0}
        maxn = max(self.ns)
        npad = maxn - 1

        def encode(sents: list[list[str]]):
            seq: list[int] = []
            pos: list[int] = []
            sent_of: list[int] = []
            for si, s in enumerate(sents):
                seq.extend([0] * npad)
                for t in s:
                    idx = vocab.get(t)
                    if idx is None:
                        idx = vocab[t] = len(vocab)
                    pos.append(len(seq))
                    sent_of.append(si)
                    seq.append(idx)
            return np.asarray(seq, dtype=np.int64), np.asarray(pos, dtype=np.int64), np.asarray(sent_of)

        tr_seq, tr_pos, _ = encode(train)
        ev_seq, ev_pos, ev_sent = encode(evals)
        V = len(vocab)
        use_int = V ** maxn < 2**62
        res: dict[str, MethodScores] = {}
        tr_key = tr_seq[tr_pos] if use_int else None
        ev_key = ev_seq[ev_pos] if use_int else None
        nsent = len(evals)
        for n in range(1, maxn + 1):
            if n > 1:
                if use_int:
                    tr_key = tr_key * V + tr_seq[tr_pos - n + 1]
                    ev_key = ev_key * V + ev_seq[ev_pos - n + 1]
            if n not in self.ns:
                continue
            if use_int:
                uniq, counts = np.unique(tr_key, return_counts=True)
                idx = np.searchsorted(uniq, ev_key)
                idx = np.clip(idx, 0, len(uniq) - 1)
                found = uniq[idx] == ev_key
                c = np.where(found, counts[idx], 0)
            else:  # very large vocabulary: fall back to tuple keys
                from collections import Counter

                trk = [tuple(tr_seq[p - n + 1 : p + 1]) for p in tr_pos]
                cnt = Counter(trk)
                c = np.array([cnt.get(tuple(ev_seq[p - n + 1 : p + 1]), 0) for p in ev_pos])
            total = len(tr_pos)
            with np.errstate(divide="ignore"):
                nlp = -np.log(c / total)  # unseen n-gram: +inf, as in the reference (cannot happen for R's own)
            sums = np.bincount(ev_sent, weights=nlp, minlength=nsent)
            lens = np.bincount(ev_sent, minlength=nsent)
            avg = sums / np.maximum(lens, 1)
            mx = np.full(nsent, -np.inf)
            np.maximum.at(mx, ev_sent, nlp)
            if "avg" in self.aggs:
                res[method_name(n, "avg")] = MethodScores(avg, float(nlp.mean()))
            if "max" in self.aggs:
                res[method_name(n, "max")] = MethodScores(mx, float(mx.mean()))
        return res
