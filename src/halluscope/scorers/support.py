"""Word support: how many samples contain the sentence's least-supported content word (issue 3, route 3).

A sentence that states a fact the model does not "know" tends to carry a word (a name, a number, a date, a place)
that the other samples do not repeat. For sentence r_i with content words w (lower-cased spaCy tokens, neither stop
words nor punctuation) and N samples S_1..S_N:

    df(w) = #{n : w occurs in S_n}          S_support(i) = 1 - min_w df(w) / N

Bounded in [0, 1]; 0 when every content word occurs in every sample, 1 when some word occurs in none. A sentence
with no content word scores 0 (it states nothing checkable). Passage: mean of the sentence scores. Unlike the
unigram model (Eq. 14) it counts samples, not occurrences, so a word the response repeats, or one sample repeats,
does not look supported. The evidence kept per sentence is that least-supported word and its count.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..text import token_arrays
from ..types import MethodInfo
from .base import MethodScores, PreparedItem


@lru_cache(maxsize=1)
def _stop_ids() -> np.ndarray:
    from spacy.lang.en.stop_words import STOP_WORDS
    from spacy.strings import get_string_id

    return np.array(sorted({get_string_id(w.lower()) for w in STOP_WORDS}), dtype=np.uint64)


def _is_content(word: str) -> bool:
    return any(c.isalnum() for c in word)


class SupportScorer:
    def __init__(self, name: str = "support"):
        self.name = name

    def method_info(self) -> list[MethodInfo]:
        return [
            MethodInfo(
                self.name,
                bounded=True,
                description="1 - share of samples containing the sentence's least-supported content word",
            )
        ]

    def score(self, items: list[PreparedItem]) -> dict[str, list[MethodScores]]:
        sent_texts = [s for it in items for s in it.sentences]
        ev_texts = [t for it in items for t in it.evidence]
        arrs = token_arrays(sent_texts + ev_texts, lowercase=True, words=True)  # one tokenizer pass
        sent_arr, ev_arr = arrs[: len(sent_texts)], arrs[len(sent_texts) :]
        stop = _stop_ids()
        out = []
        si = ei = 0
        for it in items:
            n = len(it.evidence)
            # df: in how many evidence texts each token occurs (each text's tokens counted once)
            per_text = [np.unique(ids[space == 0]) for ids, space, _ in ev_arr[ei : ei + n]]
            ei += n
            vocab, df = np.unique(np.concatenate(per_text), return_counts=True) if per_text else (np.zeros(0), [])
            scores, evidence = [], []
            for ids, space, words in sent_arr[si : si + len(it.sentences)]:
                keep = (space == 0) & ~np.isin(ids, stop) & np.array([_is_content(w) for w in words], dtype=bool)
                if not keep.any():
                    scores.append(0.0)
                    evidence.append(None)
                    continue
                kid = ids[keep]
                pos = np.clip(np.searchsorted(vocab, kid), 0, max(len(vocab) - 1, 0))
                counts = np.where(vocab[pos] == kid, np.asarray(df)[pos], 0) if len(vocab) else np.zeros(len(kid))
                j = int(np.argmin(counts))
                scores.append(1.0 - float(counts[j]) / n)
                evidence.append({"word": [w for w, k in zip(words, keep) if k][j], "samples_with_word": int(counts[j]),
                                 "samples": n})
            si += len(it.sentences)
            s = np.array(scores)
            out.append(MethodScores(s, float(s.mean()), evidence))
        return {self.name: out}


def _register() -> None:
    from ..engine.registry import MethodSpec, register

    register(MethodSpec("support", level="sentence", needs=("sentences",), bounded=True, claims=True,
                        source="halluscope (issue 3): word support across samples",
                        formula="1 - min over the sentence's content words w of (#samples containing w) / N"),
             build=lambda names, art: SupportScorer())


_register()
