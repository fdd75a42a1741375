"""What every scorer shares: the prepared item it reads and the score table it returns.

A scorer is constructed with its settings (and the shared models it needs), and ``score(items)`` turns a list of
prepared items into one :class:`MethodScores` per item for each method name it produces. Scorers never load a model
or split a text themselves when a shared one exists: models come from :mod:`halluscope.models` (one instance per
run, with caches), texts are split by :mod:`halluscope.text` (cached per unique text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np

from ..text import split_sentences
from ..types import MethodInfo, Record


@dataclass
class PreparedItem:
    """A record made ready for scoring.

    ``evidence`` are the texts each sentence is checked against: the samples (SelfCheckGPT), or another source
    such as the reference passage (the Table 4 ablation) or the first k samples (the Figure 7 ablation).
    """

    record: Record
    sentences: tuple[str, ...]
    evidence: tuple[str, ...]

    @property
    def id(self) -> str:
        return self.record.id

    @classmethod
    def from_record(cls, record: Record, evidence: Sequence[str] | None = None) -> "PreparedItem":
        sentences = tuple(record.sentences) if record.sentences else split_sentences(record.response)
        if not sentences:
            sentences = (record.response.strip(),)
        ev = tuple(record.samples if evidence is None else evidence)
        return cls(record=record, sentences=sentences, evidence=ev)

    def evidence_sentences(self, min_words: int = 0) -> list[tuple[str, ...]]:
        """Each evidence text split into sentences (cached per text); optionally dropping very short ones."""
        out = []
        for text in self.evidence:
            sents = split_sentences(text)
            if min_words:
                kept = tuple(s for s in sents if len(s.split()) > min_words)
                sents = kept or sents
            out.append(sents)
        return out


@dataclass
class MethodScores:
    sentence: np.ndarray  # one score per sentence
    passage: float
    evidence: list[Any] | None = None  # per sentence, e.g. the most contradicting sample


class Scorer(Protocol):
    def method_info(self) -> list[MethodInfo]: ...

    def score(self, items: list[PreparedItem]) -> dict[str, list[MethodScores]]: ...
