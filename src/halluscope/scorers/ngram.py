"""SelfCheckGPT with n-gram (Manakul et al. 2023, §5.3, Eq. 13-14; Table 6).

An n-gram model is trained on the N samples plus the main response R (including R acts as add-one smoothing of R's
own tokens). Following the reference implementation, the "n-gram probability" is the relative frequency of the
n-gram among all n-grams counted, with each sentence left-padded by ``<s>`` (n-1 times), lower-cased, no further
smoothing (k = 0). For sentence i with tokens j = 1..J:

    S_avg(i) = -1/J * sum_j log p~_ij          S_max(i) = max_j (-log p~_ij)

Passage level (paper §7.2): Avg is the mean over all tokens of the passage; Max is the mean of the sentence maxima.
Both are unbounded (raw -log p). All n in ``ns`` share one tokenization; counting is vectorized with numpy on
integer-coded n-grams.

``ngram1_max_rel`` (halluscope) divides the unigram Max by its upper bound, log T (T tokens counted; a token seen
only in the response has count 1, so -log p <= log T):

    S_max_rel(i) = max_j (-log p~_ij) / log T          in [0, 1]; 1 = a token that no sample contains

The raw score grows with the amount of sample text (an unseen word scores log 3000 = 8.0 against 20 WikiBio samples,
log 66 = 4.2 against 10 one-line answers); the ratio means the same for long and short answers.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..text import parser_sentences, strip_array, token_arrays, token_sentence_spans
from ..types import MethodInfo
from .base import MethodScores, PreparedItem

PAD = "<s>"
REL = "ngram1_max_rel"


def method_name(n: int, agg: str) -> str:
    return f"ngram{n}_{agg}"


class NgramScorer:
    """Scores every n in ``ns`` and both aggregations (``avg``, ``max``); ``methods`` picks which to return."""

    def __init__(
        self,
        ns: tuple[int, ...] = (1,),
        aggs: tuple[str, ...] = ("max",),
        lowercase: bool = True,
        sentence_split: str = "rule",
        relative: bool = False,
    ):
        if any(n < 1 for n in ns):
            raise ValueError("n must be >= 1")
        if sentence_split not in ("parser", "rule"):
            raise ValueError("sentence_split must be 'parser' or 'rule'")
        self.ns = tuple(sorted(set(ns)))
        self.aggs = tuple(aggs)
        self.lowercase = lowercase
        self.sentence_split = sentence_split
        self.relative = relative and 1 in self.ns and "max" in self.aggs

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
        if self.relative:
            out.append(MethodInfo(REL, bounded=True, description="unigram max -log p divided by its bound log T "
                                  "(T tokens counted), [0, 1]"))
        return out

    def score(self, items: list[PreparedItem]) -> dict[str, list[MethodScores]]:
        """Sentence boundaries of the samples matter only for n > 1 (left padding). Then they come from a
        punctuation rule (``sentence_split="rule"``, the default: Table 6 within 0.17 on every cell) or spaCy's
        parser (``"parser"``, as the reference implementation; within 0.32, about 20x slower). Unigrams need no
        sentence split and always take the fast path, with n > 1 in the same run too: a unigram score does not
        depend on the run's other methods (split samples keep the whitespace tokens of line breaks inside a
        sentence, which moved 20 of WikiBio's 238 records by up to 5.4e-4)."""
        need_split = max(self.ns) > 1
        uni = 1 in self.ns and need_split  # unigrams counted apart, on the unsplit samples
        evidence = [t for it in items for t in it.evidence]
        if need_split and self.sentence_split == "parser":
            ev_sents = parser_sentences(evidence)
            ev_texts = [s for ss in ev_sents for s in ss]
        else:
            ev_sents = None
            ev_texts = evidence
        sent_texts = [s for it in items for s in it.sentences]
        rule = need_split and self.sentence_split == "rule"
        arrs = token_arrays(sent_texts + ev_texts, self.lowercase, words=rule)  # one tokenizer pass over all
        sent_arr, ev_arr = arrs[: len(sent_texts)], arrs[len(sent_texts) :]
        whole = (ev_arr if ev_sents is None else token_arrays(evidence, self.lowercase)) if uni else None
        out: dict[str, list[MethodScores]] = {m.name: [] for m in self.method_info()}
        si = ei = ti = 0
        for it in items:
            eval_sents = [strip_array(a[0], a[1]) for a in sent_arr[si : si + len(it.sentences)]]
            si += len(it.sentences)
            train_sents = list(eval_sents)  # R counts once: its own sentences are part of the training text
            for _ in it.evidence:
                if ev_sents is not None:
                    k = len(ev_sents[ei])
                    train_sents.extend(strip_array(a[0], a[1]) for a in ev_arr[ti : ti + k])
                    ti += k
                elif need_split:
                    ids, space, words = ev_arr[ti]
                    for a, b in token_sentence_spans(words):
                        train_sents.append(strip_array(ids[a:b], space[a:b]))
                    ti += 1
                else:  # unigrams: no split needed; line breaks would be sentence edges, which the reference strips
                    ids, space = ev_arr[ti]
                    train_sents.append(ids[space != 2])
                    ti += 1
                ei += 1
            res = self._score_item(train_sents, eval_sents, tuple(n for n in self.ns if n > 1) if uni else self.ns)
            if uni:
                first = ei - len(it.evidence)
                res.update(self._score_item(list(eval_sents) + [a[0][a[1] != 2] for a in whole[first:ei]],
                                            eval_sents, (1,)))
            for name, ms in res.items():
                if name in out:
                    out[name].append(ms)
        return out

    def _score_item(self, train: list[np.ndarray], evals: list[np.ndarray], ns: tuple[int, ...]
                    ) -> dict[str, MethodScores]:
        """Count n-grams of the training sentences and score the evaluation sentences (token-hash arrays) for each
        order in ``ns``."""
        maxn = max(ns)
        npad = maxn - 1
        sents = train + evals
        lens = np.array([len(x) for x in sents], dtype=np.int64)
        flat = np.concatenate(sents) if len(sents) else np.zeros(0, np.uint64)
        _, dense = np.unique(flat, return_inverse=True)
        dense = dense.astype(np.int64) + 1  # 0 is the <s> padding symbol
        V = int(dense.max(initial=0)) + 1
        # lay the sentences out one after another, each preceded by npad padding symbols
        starts = np.cumsum(np.concatenate([[0], lens[:-1] + npad])) + npad
        pos = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(lens.sum())
        seq = np.zeros(int(lens.sum() + npad * len(sents)), dtype=np.int64)
        seq[pos] = dense
        n_train_tok = int(lens[: len(train)].sum())
        tr_pos, ev_pos = pos[:n_train_tok], pos[n_train_tok:]
        ev_sent = np.repeat(np.arange(len(evals)), lens[len(train) :])
        nsent = len(evals)
        use_int = V**maxn < 2**62
        res: dict[str, MethodScores] = {}
        tr_key, ev_key = seq[tr_pos], seq[ev_pos]
        for n in range(1, maxn + 1):
            if n > 1:
                if use_int:
                    tr_key = tr_key * V + seq[tr_pos - n + 1]
                    ev_key = ev_key * V + seq[ev_pos - n + 1]
                else:  # very large vocabulary: tuple keys
                    tr_key = [tuple(seq[p - n + 1 : p + 1]) for p in tr_pos]
                    ev_key = [tuple(seq[p - n + 1 : p + 1]) for p in ev_pos]
            if n not in ns:
                continue
            if use_int or n == 1:
                uniq, counts = np.unique(tr_key, return_counts=True)
                idx = np.clip(np.searchsorted(uniq, ev_key), 0, max(len(uniq) - 1, 0))
                c = np.where(uniq[idx] == ev_key, counts[idx], 0) if len(uniq) else np.zeros(len(ev_key))
            else:
                cnt = Counter(tr_key)
                c = np.array([cnt.get(k, 0) for k in ev_key])
            with np.errstate(divide="ignore"):
                nlp = -np.log(c / max(n_train_tok, 1))  # unseen n-gram: +inf, as in the reference
            sums = np.bincount(ev_sent, weights=nlp, minlength=nsent)
            cnts = np.bincount(ev_sent, minlength=nsent)
            avg = sums / np.maximum(cnts, 1)
            mx = np.full(nsent, -np.inf)
            np.maximum.at(mx, ev_sent, nlp)
            if "avg" in self.aggs:
                res[method_name(n, "avg")] = MethodScores(avg, float(nlp.mean()))
            if "max" in self.aggs:
                res[method_name(n, "max")] = MethodScores(mx, float(mx.mean()))
            if n == 1 and self.relative:
                rel = mx / np.log(max(n_train_tok, 2))
                res[REL] = MethodScores(rel, float(rel.mean()))
        return res


def _build(names: list[str], art) -> NgramScorer:
    ns = tuple(sorted({int(n[5]) for n in names}))
    aggs = tuple(sorted({n.split("_")[1] for n in names}))
    return NgramScorer(ns=ns, aggs=aggs, sentence_split=art.option("sentence_split", "rule"), relative=REL in names)


def _register() -> None:
    from ..engine.registry import MethodSpec, register

    specs = []
    for agg in ("avg", "max"):
        for n in range(1, 6):
            how = "mean" if agg == "avg" else "max"
            specs.append(MethodSpec(
                method_name(n, agg), level="sentence", needs=("sentences", "sample_sentences", "ngram_model"),
                bounded=False, source="SelfCheckGPT (Manakul et al. 2023) §5.3, Eq. 13-14",
                formula=f"{how} over the sentence's tokens of -log p~ under a {n}-gram model of samples + response",
                aggregate="token-mean" if agg == "avg" else "mean", group="ngram", claims=True))
    specs.append(MethodSpec(
        REL, level="sentence", needs=("sentences", "sample_sentences", "ngram_model"), bounded=True, group="ngram",
        claims=True,
        source="SelfCheckGPT Eq. 14 (unigram Max) over its upper bound log T (halluscope)",
        formula="max over the sentence's tokens of -log p~ (unigram model of samples + response) / log T, T tokens "
                "counted: 1 = a token no sample contains"))
    register(*specs, build=_build)


_register()
