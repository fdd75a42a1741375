"""BERTScore, NLI and combination with the real offline models, and the sharing of model work."""

import numpy as np
import pytest

from halluscope import Detector
from halluscope.evaluation.wikibio import evaluate_results
from halluscope.scorers.base import PreparedItem
from halluscope.scorers.bertscore import BERTScoreScorer, bertscore_f1
from halluscope.scorers.nli import NLIScorer, evidence_premises
from halluscope.types import Record


def _detector(models, methods):
    det = Detector(methods=methods)
    det._models["encoder"], det._models["nli"] = models
    return det


def test_bertscore_stays_in_bounds_on_unrelated_texts(detector_models):
    """A sentence against one unrelated sample: the best token cosines average slightly below 0 (R -0.012, P -0.016
    with MiniLM), and 2PR / (P + R) over a denominator clamped to 1e-8 gave F1 = 37059, the score -37058 and a default
    probability of 0.0 (a nightly-run walkthrough, 2026-11-29). P and R below 0 count as 0: F1 0, the score 1."""
    e = np.eye(4, dtype=np.float32)
    assert bertscore_f1([e[:1]], [-e[:1]])[0, 0] == 0.0 and bertscore_f1([e[:2]], [e[:2]])[0, 0] == 1.0  # P = R = -1
    code = Detector(methods=["bertscore"]).score([{  # samples of Markdown without prose (they raised in BERTScore)
        "id": "c", "response": "Install it with pip. Then run it.",
        "samples": ["Install it with pip and run it.", "```bash\npip install foo\n```", "# Install\n\n| a | b |\n|---|---|"]}])
    assert not code.errors and 0 <= code.items[0].passage_scores["bertscore"] <= 1
    res = Detector(methods=["bertscore", "probability"]).score([{
        "id": "r", "response": "He served in the Senate until 1929.",
        "samples": ["Other religions also embrace the concept of the blood divine."] * 3}])
    assert res.items[0].sentence_scores["bertscore"][0] == 1.0
    assert res.items[0].sentence_scores["probability"][0] > 0.9


def test_bertscore_f1_in_blocks_equals_one_product_and_bounds_memory(monkeypatch):
    """A long answer against long samples is scored in blocks of pairs (the padded similarity tensor of one product
    grew with the square of the sentence lengths: 8 GB for an 11k-character markdown answer): every block size gives
    the one product's values, and no block holds more similarities than asked."""
    import torch

    from halluscope.scorers import bertscore

    rng = np.random.default_rng(0)

    def unit(n):
        v = rng.normal(size=(n, 16)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    ref, cand = [unit(n) for n in rng.integers(1, 40, 7)], [unit(n) for n in rng.integers(1, 60, 30)]
    whole = bertscore.bertscore_f1(ref, cand)
    seen = []
    real = torch.einsum
    monkeypatch.setattr(torch, "einsum", lambda eq, a, b: seen.append(a.shape[0] * b.shape[0] * a.shape[1]
                                                                      * b.shape[1]) or real(eq, a, b))
    for block in (1, 3000, 40000):
        seen.clear()
        np.testing.assert_allclose(bertscore.bertscore_f1(ref, cand, block=block), whole, atol=1e-6)
        assert len(seen) > 1 and max(seen) <= max(block, 39 * 59)  # a single pair is never cut


def test_bertscore_f1_matches_a_direct_computation(detector_models):
    enc, _ = detector_models
    a, b = "The cat sat on the mat.", "A dog slept on the rug."
    ea, eb = enc.token_embeddings([a, b])
    sim = ea.astype(np.float32) @ eb.astype(np.float32).T
    r, p = sim.max(1).mean(), sim.max(0).mean()
    f = bertscore_f1([ea], [eb])[0, 0]
    assert f == pytest.approx(2 * p * r / (p + r), rel=1e-4)
    assert bertscore_f1([ea], [ea])[0, 0] == pytest.approx(1.0, abs=1e-3)


def test_bf16_encoder_gives_the_fp32_bertscore_within_rounding(detector_models, wikibio):
    from halluscope.models.encoder import Encoder

    items = [PreparedItem.from_record(r, r.samples[:4]) for r in wikibio[:2]]
    scores = {}
    for precision in ("fp32", "bf16"):
        enc = Encoder(precision=precision)
        assert enc.precision == precision
        out = BERTScoreScorer(enc).score(items)["bertscore"]
        scores[precision] = np.concatenate([o.sentence for o in out])
    diff = np.abs(scores["fp32"] - scores["bf16"])
    assert diff.max() < 0.01
    assert np.corrcoef(scores["fp32"], scores["bf16"])[0, 1] > 0.995


def test_cpu_encoder_runs_fp32_on_its_onnx_graph_with_pytorchs_embeddings(wikibio):
    """``auto`` is fp32 on every CPU, whatever its bf16 support (the same embeddings to ~1e-6), and runs through
    ONNX Runtime on the exported graph of the layers the encoder keeps, in slices of a few hundred positions: the
    sentence embeddings agree with PyTorch's fp32 to 1e-5, the stored fp16 token vectors to their rounding, for the
    last layer and for one layer of a sweep's graph (every layer)."""
    from halluscope.models.encoder import Encoder

    texts = list(dict.fromkeys(t for r in wikibio[:2] for t in [*r.sentences, *r.samples[:3]]))  # 6 to 256 tokens
    onnx, ref = Encoder(device="cpu"), Encoder(precision="fp32", runtime="torch", device="cpu")
    assert onnx.precision == "fp32" and onnx.graph is not None and ref.graph is None
    assert onnx.graph.outputs == ("hidden_6",)
    assert np.abs(onnx.sentence_embeddings(texts) - ref.sentence_embeddings(texts)).max() < 1e-5

    def same_tokens(a, b):
        for x, y in zip(a, b):
            assert x.shape == y.shape and np.abs(x.astype(np.float32) - y.astype(np.float32)).max() < 5e-4  # fp16 ulp

    same_tokens(onnx.token_embeddings(texts), ref.token_embeddings(texts))
    sweep = Encoder(extra_layers="all", device="cpu")
    assert sweep.graph.outputs == tuple(f"hidden_{k}" for k in range(1, 7))
    same_tokens(sweep.token_embeddings(texts, layer=3), Encoder(precision="fp32", runtime="torch", extra_layers=(3,),
                                                                device="cpu").token_embeddings(texts, layer=3))
    third = Encoder(layer=3, device="cpu")  # BERTScore's layer 3; the sentence embedding stays the last layer's
    assert third.graph.outputs == ("hidden_3", "hidden_6")
    assert np.abs(third.sentence_embeddings(texts) - ref.sentence_embeddings(texts)).max() < 1e-5
    same_tokens(third.token_embeddings(texts), sweep.token_embeddings(texts, layer=3))
    assert onnx.forward_tokens == ref.forward_tokens and onnx.forward_texts == ref.forward_texts == len(texts)
    with pytest.raises(ValueError, match="fp32 on the CPU only"):
        Encoder(precision="bf16", runtime="onnx", device="cpu")


def test_layer_sweep_matches_the_detector_at_each_layer(detector_models, data_dir):
    from halluscope.evaluation.wikibio import load_wikibio, sweep_layers

    enc, _ = detector_models
    sweep = sweep_layers(precision=enc.precision, data_dir=data_dir, passages=[0, 1, 2, 3])
    assert set(sweep) == {f"layer{k}" for k in range(1, enc.num_layers + 1)} | {"random"}
    recs = load_wikibio(data_dir, [0, 1, 2, 3])
    for layer in (3, enc.num_layers):
        det = Detector(methods="bertscore", layer=layer, precision=enc.precision)
        figs = evaluate_results(det.score(recs))["bertscore"]
        for col in ("nonfact", "factual", "spearman"):
            assert figs[col] == pytest.approx(sweep[f"layer{layer}"][col], abs=1e-6)


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
    # BERTScore's sample sentences (over 3 words) and the NLI evidence selection's (all) share one encoder pass
    unique_texts = {s for it in items for s in (*it.sentences, *(x for e in it.evidence_sentences() for x in e))}
    prem = evidence_premises(enc, [it.sentences for it in items], [it.evidence for it in items], det.nli_evidence)
    unique_pairs = {(e, s) for it, pr in zip(items, prem) for s, row in zip(it.sentences, pr) for e in row}
    unique_pairs = {u for p in unique_pairs for u in nli.windows(p)}  # a pair over the window is read in pieces
    assert all(len(e) < len(x) for it, pr in zip(items, prem) for row in pr for e, x in zip(row, it.evidence))
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
    ms = NLIScorer(nli, evidence="sample").score([PreparedItem.from_record(rec)])["nli"][0]
    assert ms.evidence[0]["sample"] in (0, 1) and ms.sentence[0] == pytest.approx(p[0, 2] / (p[0, 0] + p[0, 2]), rel=1e-5)


@pytest.mark.slow
def test_bertscore_nli_combination_beat_random_on_a_wikibio_slice(detector_models, wikibio):
    """12 passages spread over the file, 5 samples each: every method must rank better than chance."""
    recs = [wikibio[i] for i in range(0, 238, 20)]
    for r in recs:
        r.samples = r.samples[:5]
    det = _detector(detector_models, "ngram1_max,bertscore,nli,nli_support,combination")
    res = det.score(recs)
    figs = evaluate_results(res)
    for m in ("ngram1_max", "bertscore", "nli", "nli_support", "combination"):
        assert figs[m]["nonfact"] > figs["random"]["nonfact"], (m, figs[m])
        assert figs[m]["spearman"] > 20, (m, figs[m])
    z = np.concatenate([it.sentence_scores["combination"] for it in res])
    assert abs(z.mean()) < 1e-6  # mean of z-scores over the run
    assert res.settings["combination_stats"]["statistics"].keys() == {"ngram1_max", "bertscore", "nli", "nli_support"}
    assert res.settings["combination_stats"]["from"] == "run-relative: run"


def test_mentions_are_matched_as_whole_words_in_one_normal_form():
    from halluscope.text import mentions, normalize_mention as norm

    assert norm("The Seven Years' War (1756-1763)") == "the 7 years war 1756 1763"
    assert norm("1,000,000 people") == "1000000 people" and norm("3,5") == "3 5" and norm("1,000s") == "1000s"
    assert norm("Twenty-one days") == norm("twenty one days") == "21 days" and norm("July 4th") == "july 4"
    text = norm("Ada Lovelace's father, Lord Byron, left when she was one; twenty-one Americans came in the 1820s.")
    for found in ("Lord Byron", "21", "1", "American", "Americans"):
        assert mentions(text, norm(found)), found
    for absent in ("Byr", "Ada Lovelace's mother", "Byron's", "20", "1820", ""):
        assert not mentions(text, norm(absent)), absent
    # short forms a chat answer writes, where the samples spell out (a walkthrough's "Dec. 7, 2023" and "U.S." were
    # found in no sample, and flagged the answer); a full date in either order; "us" is still a pronoun
    text = norm("It opened in the United States on December 7, 2023, and in September in the United Kingdom.")
    for found in ("Dec. 7, 2023", "Dec 7 2023", "7 December 2023", "U.S.", "USA", "the US", "the U.K.", "Sept."):
        assert mentions(text, norm(found)), found
    assert norm("us") == "us" and not mentions(text, norm("8 December 2023")) and not mentions(text, norm("Dec. 8"))
    # only where they are short forms (the review's over-matches): a name, a pronoun in capitals, the U.S.S.R.
    assert norm("Jan Kowalski and Mar Vista") == "jan kowalski and mar vista" and norm("LET US GO") == "let us go"
    assert norm("the U.S.S.R.") == "the u s s r" and norm("USB and UKIP") == "usb and ukip"
    assert mentions(norm("born 7 December 1815"), norm("December 7, 1815"))


def test_entity_agreement_scorer(wikibio):
    from halluscope.pipeline import Detector, PreparedItem
    from halluscope.scorers.entity import EntityScorer
    from halluscope.types import Record

    rec = Record(id="x", response="Ada Lovelace was born in London in 1815. She liked it. She died in Paris.",
                 samples=["Ada Lovelace was born in 1815 in London.", "Ada Lovelace, born in London in 1815, died in 1852.",
                          "Ada Lovelace (1815-1852) was born in London."])
    item = PreparedItem.from_record(rec)
    s = EntityScorer().score([item])["entity"][0]
    assert s.sentence[0] == 0.0  # Ada Lovelace, London, 1815: every sample repeats each
    assert s.sentence[2] == 1.0 and s.evidence[2]["entity"] == "Paris"  # no sample says Paris
    assert s.evidence[1] is None and s.sentence[1] == 0.5  # no entity: the median of the record's other sentences
    # numbers as words or digits, thousands with or without commas, and whole words only ("1820" is not "1820s")
    rec = Record(id="n", response="The siege lasted seven days. It ended in 1820. It cost 1,000 lives.",
                 samples=["The siege lasted 7 days and ended in 1820, when 1000 lives were lost.",
                          "After seven days the siege ended in the 1820s; 1000 lives were lost."])
    s = EntityScorer().score([PreparedItem.from_record(rec)])["entity"][0]
    assert [e["entity"] for e in s.evidence] == ["seven days", "1820", "1,000"]
    assert s.sentence.tolist() == [0.0, 0.5, 0.0]
    # on real WikiBio passages the default detector includes it and it ranks better than chance
    recs = [wikibio[i] for i in range(0, 238, 12)]
    res = Detector(methods="entity").score(recs)
    figs = evaluate_results(res)
    assert figs["entity"]["nonfact"] > figs["random"]["nonfact"] + 5
    assert "entity" in Detector().methods


def test_nli_readings_share_one_pass_and_follow_their_formulas(detector_models):
    """nli (SelfCheck: p_c / (p_e + p_c)) and nli_support (1 - p_e) read the same pairs: asking for both costs no
    more model work than asking for one, and each equals its formula over the cached probabilities."""
    enc, nli = detector_models
    rec = Record(id="r", response="Marie Curie was born in Warsaw. She won two Nobel Prizes. She had a pet dragon.",
                 samples=["Marie Curie, born in Warsaw in 1867, won the Nobel Prize in Physics and in Chemistry.",
                          "Curie was a Polish-born physicist. She was born in Warsaw and won two Nobel Prizes.",
                          "Born in Warsaw, Marie Curie studied in Paris. She received two Nobel Prizes."])
    it = PreparedItem.from_record(rec)
    both = NLIScorer(nli, encoder=enc, names=("nli", "nli_support"))
    before = nli.forward_pairs
    out = both.score([it])
    first = nli.forward_pairs - before
    NLIScorer(nli, encoder=enc, names=("nli",)).score([it])
    assert nli.forward_pairs - before == first  # the second scorer found every pair in the cache
    prem = evidence_premises(enc, [it.sentences], [it.evidence], 2)[0]
    p = nli.probs([(e, s) for s, row in zip(it.sentences, prem) for e in row]).reshape(3, 3, 3)
    assert out["nli_support"][0].sentence == pytest.approx((1 - p[..., 0]).mean(1), abs=1e-6)
    assert out["nli"][0].sentence == pytest.approx((p[..., 2] / (p[..., 0] + p[..., 2])).mean(1), abs=1e-6)
    s = out["nli_support"][0].sentence
    assert s[2] > max(s[0], s[1])  # the dragon is supported by no sample
