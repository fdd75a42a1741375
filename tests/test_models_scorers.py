"""BERTScore, NLI and combination with the real offline models, and the sharing of model work."""

import numpy as np
import pytest

from halluscope import Detector
from halluscope.evaluation.wikibio import evaluate_results
from halluscope.scorers.base import PreparedItem
from halluscope.scorers.bertscore import BERTScoreScorer, bertscore_f1
from halluscope.scorers.nli import NLIScorer
from halluscope.types import Record


def _detector(models, methods):
    det = Detector(methods=methods)
    det._models["encoder"], det._models["nli"] = models
    return det


def test_bertscore_f1_matches_a_direct_computation(detector_models):
    enc, _ = detector_models
    a, b = "The cat sat on the mat.", "A dog slept on the rug."
    ea, eb = enc.token_embeddings([a, b])
    sim = ea.astype(np.float32) @ eb.astype(np.float32).T
    r, p = sim.max(1).mean(), sim.max(0).mean()
    f = bertscore_f1([ea], [eb])[0, 0]
    assert f == pytest.approx(2 * p * r / (p + r), rel=1e-4)
    assert bertscore_f1([ea], [ea])[0, 0] == pytest.approx(1.0, abs=1e-3)


def test_bertscore_separates_supported_from_unsupported(detector_models):
    enc, _ = detector_models
    rec = Record(id="x", response="Marie Curie was a physicist and chemist. She owned a pet dragon named Fluffy.",
                 samples=["Marie Curie was a Polish physicist and chemist who studied radioactivity."] * 3
                 + ["Curie was a chemist and physicist, born in Warsaw."])
    s = BERTScoreScorer(enc).score([PreparedItem.from_record(rec)])["bertscore"][0].sentence
    assert 0 <= s[0] < s[1] <= 1


def test_each_unique_text_encoded_once_and_each_pair_computed_once(detector_models, wikibio):
    enc, nli = detector_models
    det = _detector(detector_models, "bertscore,nli")
    recs = wikibio[:2]
    for r in recs:
        r.samples = r.samples[:3]
    f0, p0 = enc.forward_texts, nli.forward_pairs
    det.score(recs)
    items = [PreparedItem.from_record(r) for r in recs]
    unique_texts = {s for it in items for s in (*it.sentences, *(x for e in it.evidence_sentences(3) for x in e))}
    unique_pairs = {(e, s) for it in items for s in it.sentences for e in it.evidence}
    assert enc.forward_texts - f0 <= len(unique_texts)
    assert nli.forward_pairs - p0 <= len(unique_pairs)
    f1, p1 = enc.forward_texts, nli.forward_pairs
    again = det.score(recs)  # everything comes from the caches
    assert (enc.forward_texts, nli.forward_pairs) == (f1, p1)
    assert all(0 <= x <= 1 for it in again for x in it.sentence_scores["nli"])


def test_nli_contradiction_direction(detector_models):
    _, nli = detector_models
    p = nli.probs([("He was born in London in 1820.", "He was born in Paris."),
                   ("He was born in London in 1820.", "He was born in London.")])
    assert p.shape == (2, 3)
    assert p[0, 2] > p[1, 2]
    rec = Record(id="x", response="He was born in Paris.", samples=["He was born in London in 1820."] * 2)
    ms = NLIScorer(nli).score([PreparedItem.from_record(rec)])["nli"][0]
    assert ms.evidence[0]["sample"] in (0, 1) and ms.sentence[0] == pytest.approx(p[0, 2] / (p[0, 0] + p[0, 2]), rel=1e-5)


@pytest.mark.slow
def test_bertscore_nli_combination_beat_random_on_a_wikibio_slice(detector_models, wikibio):
    """12 passages spread over the file, 5 samples each: every method must rank better than chance."""
    recs = [wikibio[i] for i in range(0, 238, 20)]
    for r in recs:
        r.samples = r.samples[:5]
    det = _detector(detector_models, "ngram1_max,bertscore,nli,combination")
    res = det.score(recs)
    figs = evaluate_results(res)
    for m in ("ngram1_max", "bertscore", "nli", "combination"):
        assert figs[m]["nonfact"] > figs["random"]["nonfact"], (m, figs[m])
        assert figs[m]["spearman"] > 20, (m, figs[m])
    z = np.concatenate([it.sentence_scores["combination"] for it in res])
    assert abs(z.mean()) < 1e-6  # mean of z-scores over the run
    assert res.settings["combination_stats"].keys() == {"ngram1_max", "bertscore", "nli"}
