"""Response-level components and ensemble tuning on real SAC3 NQ-Open answers."""

import numpy as np
import pytest

from halluscope.ensemble import ComponentScorer, best_threshold, combine, cross_validate, normalize_answer, tune
from halluscope.ensemble.sac3 import load_sac3


def test_components_on_sac3_and_each_nli_pair_once(detector_models, data_dir):
    enc, nli = detector_models
    items = load_sac3(data_dir, limit=8)
    assert {it.correct for it in items} == {True, False}  # spread over the label-sorted file
    before = nli.forward_pairs
    rows = ComponentScorer(enc, nli).score(items)
    pairs = set()
    for it in items:
        texts = list(dict.fromkeys([it.response, *it.samples]))
        pairs |= {(a, b) for a in texts for b in texts if a != b}
    assert nli.forward_pairs - before <= len(pairs)  # never more than one forward pass per unique pair
    for r in rows:
        assert set(r) == {"exact_match", "non_contradiction", "semantic_negentropy", "bertscore", "cosine"}
        assert all(0.0 <= v <= 1.0 for v in r.values())
    for it, r in zip(items, rows):  # Eq. 4: the share of samples equal to the answer after normalization
        assert r["exact_match"] == pytest.approx(np.mean([normalize_answer(s) == normalize_answer(it.response)
                                                           for s in it.samples]))
    assert normalize_answer("The  Beatles!") == normalize_answer("beatles")


def test_tuning_weights_threshold_missing_values_and_cv():
    rng = np.random.default_rng(0)
    n = 200
    halluc = (rng.random(n) < 0.4).astype(int)
    good = np.clip(0.7 - 0.4 * halluc + 0.15 * rng.standard_normal(n), 0, 1)  # informative component
    noise = rng.random(n)  # uninformative component
    C = np.column_stack([good, noise])
    cfg = tune(C, halluc, ["good", "noise"])
    assert cfg.weights[0] > 0.8 and abs(sum(cfg.weights) - 1) < 1e-9
    tau, f1 = best_threshold(halluc, combine(C, np.array(cfg.weights)))
    assert cfg.threshold == pytest.approx(tau) and f1 > 0.7
    C2 = C.copy()
    C2[0, 1] = np.nan  # a missing value: that row uses the other component alone
    assert combine(C2, np.array([0.5, 0.5]))[0] == pytest.approx(C[0, 0])
    fig, oof, taus = cross_validate(C, halluc, ["good", "noise"], folds=5)
    assert fig["auroc"] > 0.85 and np.isfinite(oof).all() and fig["f1"] > 0.6


def test_a_mostly_missing_component_never_shrinks_the_evaluated_rows():
    rng = np.random.default_rng(1)
    n = 120
    halluc = (rng.random(n) < 0.5).astype(int)
    judge = np.where(rng.random(n) < 0.15, 1.0 - halluc, np.nan)  # a perfect judge that answers 15% of the time
    other = np.clip(0.6 - 0.2 * halluc + 0.2 * rng.standard_normal(n), 0, 1)
    C = np.column_stack([judge, other])
    for mode in ("agnostic", "joint"):
        fig, oof, _ = cross_validate(C, halluc, ["judge", "other"], folds=4, mode=mode)
        assert fig["n"] == n and np.isfinite(oof).all()  # rows without a verdict fall back on the other component
