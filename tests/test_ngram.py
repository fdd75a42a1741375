"""The n-gram scorer against the paper (Table 6) and against hand-computed values."""

import math

import numpy as np
import pytest

from halluscope import Detector
from halluscope.evaluation.paper import TABLE6
from halluscope.evaluation.wikibio import evaluate_results
from halluscope.scorers.base import PreparedItem
from halluscope.scorers.ngram import NgramScorer
from halluscope.types import Record


def test_unigram_hand_computed():
    rec = Record(response="Anna sang. Anna cried.", samples=["Anna sang."], sentences=["Anna sang.", "Anna cried."],
                 id="x")
    out = NgramScorer(ns=(1,), aggs=("avg", "max")).score([PreparedItem.from_record(rec)])
    # tokens (lower): anna sang . anna cried . anna sang .  -> anna:3 sang:2 .:3 cried:1, total 9
    p = {"a": 3 / 9, "b": 2 / 9, ".": 3 / 9, "c": 1 / 9}
    s2 = [-math.log(p[t]) for t in ("a", "c", ".")]
    assert out["ngram1_max"][0].sentence[1] == pytest.approx(max(s2))
    assert out["ngram1_avg"][0].sentence[1] == pytest.approx(np.mean(s2))
    all_tok = [-math.log(p[t]) for t in ("a", "b", ".", "a", "c", ".")]
    assert out["ngram1_avg"][0].passage == pytest.approx(np.mean(all_tok))  # passage avg: over all tokens


def test_bigram_left_padding():
    rec = Record(response="Anna sang.", samples=["Sang Anna."], sentences=["Anna sang."], id="x")
    out = NgramScorer(ns=(2,), aggs=("max",), sentence_split="rule").score([PreparedItem.from_record(rec)])
    # bigrams: (<s>,anna) (anna,sang) (sang,.) | (<s>,sang) (sang,anna) (anna,.): R's each seen once out of 6
    assert out["ngram2_max"][0].sentence[0] == pytest.approx(math.log(6))


def test_unigram_reproduces_table6_on_all_wikibio(wikibio):
    res = Detector(methods="ngram1_avg,ngram1_max").score(wikibio)
    figs = evaluate_results(res)
    for m in ("ngram1_avg", "ngram1_max"):
        for col, paper in TABLE6[m].items():
            assert abs(figs[m][col] - paper) < 0.5, (m, col, figs[m][col], paper)
    assert figs["random"]["nonfact"] == pytest.approx(72.96, abs=0.01)
    assert figs["random"]["nonfact_star"] == pytest.approx(29.72, abs=0.01)


def test_every_ngram_row_reproduces_table6_on_all_wikibio(wikibio):
    """n = 1..5, Avg and Max, with the default punctuation-rule splitter for the samples: every cell within 0.5."""
    figs = evaluate_results(Detector(methods="ngram").score(wikibio))
    for m, row in TABLE6.items():
        for col, paper in row.items():
            assert abs(figs[m][col] - paper) < 0.5, (m, col, figs[m][col], paper)


@pytest.mark.slow
def test_parser_split_agrees_with_the_rule_split(wikibio):
    """The reference's spaCy-parser split of the samples (slow) gives nearly the same bigram scores."""
    from halluscope.scorers.ngram import NgramScorer as NS

    items = [PreparedItem.from_record(r) for r in wikibio[:20]]
    rule = NS(ns=(2,), aggs=("max",), sentence_split="rule").score(items)["ngram2_max"]
    par = NS(ns=(2,), aggs=("max",), sentence_split="parser").score(items)["ngram2_max"]
    a = np.concatenate([x.sentence for x in rule])
    b = np.concatenate([x.sentence for x in par])
    assert np.corrcoef(a, b)[0, 1] > 0.97
