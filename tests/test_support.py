"""The word-support scorer: hand-computed values and its figures on a WikiBio slice."""

import pytest

from halluscope import Detector
from halluscope.evaluation.wikibio import evaluate_results
from halluscope.scorers.base import PreparedItem
from halluscope.scorers.support import SupportScorer
from halluscope.types import Record


def test_support_hand_computed():
    rec = Record(id="x", response="Anna sang in Paris. Anna cried. It was.",
                 sentences=["Anna sang in Paris.", "Anna cried.", "It was."],
                 samples=["Anna sang in Rome, Anna sang.", "anna sang in PARIS."])
    out = SupportScorer().score([PreparedItem.from_record(rec)])["support"][0]
    # content words: anna 2/2, sang 2/2, paris 1/2 -> 0.5 | anna 2/2, cried 0/2 -> 1.0 | stop words only -> 0
    assert list(out.sentence) == pytest.approx([0.5, 1.0, 0.0])
    assert out.passage == pytest.approx(0.5)
    assert out.evidence[1] == {"word": "cried", "samples_with_word": 0, "samples": 2}
    assert out.evidence[2] is None


def test_support_beats_unigram_on_a_wikibio_slice(wikibio):
    res = Detector(methods="support,ngram1_max").score(wikibio[:60])
    figs = evaluate_results(res)
    assert figs["support"]["nonfact"] > figs["random"]["nonfact"] + 10
    assert figs["support"]["nonfact_star"] > figs["ngram1_max"]["nonfact_star"]


def test_random_tie_breaking_removes_the_trapezoid_bonus_of_tied_scores(wikibio):
    """support takes at most N+1 values, so many sentences tie; the paper's trapezoidal AUC-PR rewards that."""
    res = Detector(methods="support,ngram1_avg").score(wikibio[:60])
    as_is = evaluate_results(res)
    rnd = evaluate_results(res, ties="random")
    assert rnd["support"]["nonfact"] < as_is["support"]["nonfact"] - 1
    assert rnd["ngram1_avg"]["nonfact"] == pytest.approx(as_is["ngram1_avg"]["nonfact"], abs=0.05)  # few ties
    assert rnd["support"]["spearman"] == pytest.approx(as_is["support"]["spearman"])  # passage level unchanged
