"""Graph and spectral scores (Lin et al. 2023), Kernel Language Entropy (Nikitin et al. 2024), PRR and the
risk-coverage curve: against direct computations on hand-made matrices, and on real SAC3 answers with one NLI pass."""

import numpy as np
import pytest
import scipy.linalg

from halluscope.evaluation.metrics import aurc, prr, risk_coverage
from halluscope.scorers.graph import (degree, degree_set, eccentricity, eigv, graph_scores, semantic_sets,
                                      symmetric_similarity)
from halluscope.scorers.kle import kle, kle_weights

GRAPH = ("num_sets", "eigv", "degree", "eccentricity", "kle")


def _blocks(sizes, inside=1.0, outside=0.0):
    """A similarity matrix of clusters of the given sizes (answer 0 in the first)."""
    labels = np.repeat(np.arange(len(sizes)), sizes)
    W = np.where(labels[:, None] == labels[None, :], inside, outside).astype(float)
    np.fill_diagonal(W, 1.0)
    return W


def _eigv_by_hand(W):
    d = W.sum(axis=1)
    L = np.eye(len(W)) - W / np.sqrt(np.outer(d, d))
    return sum(max(0.0, 1.0 - lam) for lam in np.linalg.eigvalsh(L))


def test_graph_scores_agree_with_a_direct_computation_on_hand_made_matrices():
    two = _blocks([4, 7], inside=0.95, outside=0.02)  # two clear clusters of 11 answers
    one = _blocks([11], inside=0.95)
    assert eigv(two) == pytest.approx(_eigv_by_hand(two)) and abs(eigv(two) - 2) < 0.1
    assert eigv(one) == pytest.approx(_eigv_by_hand(one)) and abs(eigv(one) - 1) < 0.1
    assert eigv(_blocks([1, 1, 1])) == pytest.approx(3.0)  # no two answers related: one set each
    assert semantic_sets(11, lambda i, r: two[i, r] > 0.5) == [0] * 4 + [1] * 7
    assert len(set(semantic_sets(11, lambda i, r: one[i, r] > 0.5))) == 1
    assert degree(two) == pytest.approx(1 - (3 * 0.95 + 7 * 0.02) / 10)
    assert degree_set(two) == pytest.approx((121 - two.sum()) / 121)
    # eccentricity, closed form for disconnected all-ones clusters: the kept eigenvectors (eigenvalue 0) are the
    # cluster indicators / sqrt(size); alone against 10 agreeing samples the response sits at sqrt(1 - 1/m) from
    # the centre, inside the 10 (one sample alone) at sqrt(1/110)
    assert eccentricity(_blocks([1, 10])) == pytest.approx(np.sqrt(10 / 11))
    W = _blocks([1, 10])[::-1, ::-1].copy()  # the lone answer is now the last sample
    assert eccentricity(W) == pytest.approx(np.sqrt(1 / 110))
    assert eccentricity(_blocks([11])) == pytest.approx(0.0, abs=1e-9)
    s = graph_scores(two, GRAPH, sets=2)
    assert s["num_sets"] == pytest.approx(0.1) and s["eigv"] == pytest.approx((eigv(two) - 1) / 10)
    assert set(s) == {"num_sets", "eigv", "degree", "eccentricity"} and all(0 <= v <= 1 for v in s.values())
    A = np.array([[1.0, 0.9, 0.1], [0.7, 1.0, 0.3], [0.5, 0.2, 1.0]])
    assert symmetric_similarity(A)[0, 1] == pytest.approx(0.8) and symmetric_similarity(A)[2, 0] == pytest.approx(0.3)


def _kle_by_hand(W, t=0.4):
    L = np.diag(W.sum(axis=1)) - W
    K = scipy.linalg.expm(-t * L)
    rho = K / np.sqrt(np.outer(np.diag(K), np.diag(K))) / len(K)
    mu = np.linalg.eigvalsh(rho)
    mu = mu[mu > 1e-12]
    return -(mu * np.log(mu)).sum() / np.log(len(K))


def test_kle_against_a_direct_matrix_exponential():
    rng = np.random.default_rng(0)
    A = rng.random((9, 9))  # entailment probabilities of 9 answers, not symmetric
    np.fill_diagonal(A, 1.0)
    W = kle_weights(A)
    assert W[2, 5] == pytest.approx(A[2, 5] + A[5, 2]) and W[3, 3] == 0
    assert kle(W) == pytest.approx(_kle_by_hand(W), abs=1e-9)
    assert kle(np.zeros((6, 6))) == pytest.approx(1.0)  # unrelated answers: K = I, maximal entropy
    agree, split = kle_weights(_blocks([11])), kle_weights(_blocks([5, 6]))
    assert kle(agree) < 0.05 and kle(split) == pytest.approx(_kle_by_hand(split), abs=1e-9)
    assert kle(agree) < kle(split) < kle(np.zeros((11, 11)))


def test_prr_and_risk_coverage_on_a_hand_computed_example():
    err = [0, 0, 1, 1]
    assert prr([0.1, 0.2, 0.3, 0.4], err) == pytest.approx(1.0)  # the oracle's order
    assert prr([0.4, 0.3, 0.2, 0.1], err) == pytest.approx(-1.0)  # reversed
    # rejecting by [0.1, 0.3, 0.2, 0.4] keeps errors 0, 1, 0, 1: risks 0, 1/2, 1/3, 1/2 -> AURC 1/3; random 1/2,
    # oracle (0 + 0 + 1/3 + 1/2) / 4 = 5/24 -> PRR = (1/2 - 1/3) / (1/2 - 5/24) = 4/7
    cov, risk = risk_coverage([0.1, 0.3, 0.2, 0.4], err)
    assert cov.tolist() == [0.25, 0.5, 0.75, 1.0] and risk == pytest.approx([0, 1 / 2, 1 / 3, 1 / 2])
    assert aurc([0.1, 0.3, 0.2, 0.4], err) == pytest.approx(1 / 3)
    assert prr([0.1, 0.3, 0.2, 0.4], err) == pytest.approx(4 / 7)
    assert prr([0.5] * 4, err) == pytest.approx(0.0)  # all tied: the expected (random) order
    assert prr([0.1, 0.1, 0.3, 0.4], [0, 1, 1, 1]) == pytest.approx(prr([0.1, 0.1, 0.3, 0.4], [1, 0, 1, 1]))
    assert np.isnan(prr([0.1, 0.2], [1, 1]))  # nothing to rank
    rng = np.random.default_rng(1)
    e = (rng.random(4000) < 0.4).astype(float)
    assert abs(np.mean([prr(rng.random(4000), e) for _ in range(10)])) < 0.03  # random scores: about 0


def test_one_nli_pass_serves_non_contradiction_entropy_and_every_graph_method(data_dir):
    """Detector and ensemble components on real SAC3 answers: each unique NLI pair through the model once, exactly
    the ordered pairs of different answers; the ensemble path (ComponentScorer, tuning) takes the same names."""
    from halluscope import Detector
    from halluscope.engine.components import ComponentScorer
    from halluscope.evaluation.response_report import markdown_table
    from halluscope.evaluation.sac3 import analyze, load_sac3
    from halluscope.models.nli import load_nli
    from halluscope.scorers.graph import entailment_matrix, text_pairs

    nli = load_nli()  # a fresh cache, so the counts are this run's
    seen = []
    forward = nli._forward
    nli._forward = lambda pairs: (seen.extend(pairs), forward(pairs))[1]
    items = load_sac3(data_dir, limit=6)
    for it in items:
        it.samples = it.samples[:5]
    recs = [{"id": it.id, "prompt": it.question, "response": it.response, "samples": it.samples} for it in items]
    det = Detector(methods="non_contradiction,semantic_negentropy," + ",".join(GRAPH), chunk_size=3)
    det._models.update(nli=nli)
    res = det.score(recs)
    pairs = {p for it in items for p in text_pairs([it.response, *it.samples])}
    expected = {u for p in pairs for u in nli.windows(p)}  # a premise too long for the model is read in windows
    assert len(seen) == len(set(seen)) and set(seen) == expected
    comps = ["non_contradiction", "semantic_negentropy", *GRAPH]
    rows = ComponentScorer(nli=nli, components=tuple(comps)).score(items)  # the ensemble's path: all cached
    assert len(seen) == len(expected)
    for it, r, x in zip(items, rows, res.items):
        W = symmetric_similarity(entailment_matrix(nli, [it.response, *it.samples]))
        assert x.passage_scores["degree"] == pytest.approx(degree(W))
        assert x.passage_scores["eigv"] == pytest.approx((eigv(W) - 1) / 5)
        for c in comps:
            assert 0.0 <= x.passage_scores[c] <= 1.0 and r[c] == pytest.approx(1.0 - x.passage_scores[c])
        if x.passage_scores["num_sets"] == 0:  # one semantic set: no semantic entropy either
            assert x.passage_scores["semantic_negentropy"] == pytest.approx(0.0)
    out = analyze(items, rows, comps, folds=2)
    assert set(out["components"]) == set(comps)
    assert "| PRR |" in markdown_table(out) and "component: kle" in markdown_table(out)
