"""Claims (issue 17): the rule splitter on real WikiBio sentences, claims in the results schema, a detector run that
scores claims on the shared caches, and LUQ against a direct computation from the NLI probabilities."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from halluscope import Detector
from halluscope.claims import LLMSplitter, RuleSplitter, parse_claims
from halluscope.types import Claim, ItemResult, Results


def test_rule_splitter_gives_the_claims_of_real_wikibio_sentences(wikibio):
    first, second, third = wikibio[0].sentences[0], wikibio[0].sentences[2], wikibio[2].sentences[0]
    assert first == "John Russell Reynolds (1820–1876) was an English lawyer, judge, and author."
    assert second == "He was called to the bar in 1845, and became a Queen's Counsel in 1859."
    assert third.startswith("Rick Mahler (born Richard Alan Mahler on April 18, 1957")
    sp = RuleSplitter()
    a, b, c, d = sp.claims_of([first, second, third, "John Smith (born 1950) is an American actor and singer."])
    assert a == ("John Russell Reynolds (1820–1876) was an English lawyer.", "John Russell Reynolds was a judge.",
                 "John Russell Reynolds was an author.")
    assert b == ("He was called to the bar in 1845.", "He became a Queen's Counsel in 1859.")
    assert c == ("Rick Mahler was born Richard Alan Mahler on April 18, 1957 in Atlanta, Georgia.",
                 "Rick Mahler was an American professional baseball pitcher.",
                 "Rick Mahler played for the Atlanta Braves, Cincinnati Reds, Montreal Expos, and Minnesota Twins "
                 "of Major League Baseball (MLB) from 1978 to 1990.")
    assert d == ("John Smith was born in 1950.", "John Smith is an American actor.", "John Smith is a singer.")
    # disjunctions, shared complements and proper-name coordinations stay whole
    assert sp.claims_of(["Hogan wrote or co-wrote most of the songs."])[0] == (
        "Hogan wrote or co-wrote most of the songs.",)
    claims = sp.split([wikibio[0].sentences[:3]])[0]
    assert [c.sentence for c in claims] == [0, 0, 0, 1, 1, 2, 2]
    assert claims[5] == Claim("He was called to the bar in 1845.", 2)


def test_rule_claims_keep_a_quotation_whole_or_drop_its_marks():
    """Real WikiBio sentences with quotations (a relative clause ending in one, a quoted clause split in two): a claim
    quotes only words that were quoted together, with both marks, and no lone mark leaves a space before the stop
    (until 2026-11-28: 'The term is derived from the Latin sanguis divinus .' and 'He was "by far ... Alexander.".')."""
    sp = RuleSplitter()
    a, b, c = sp.claims_of([
        'The term is derived from the Latin sanguis divinus, which literally translates to "divine blood".',
        'He was "by far the dearest of all the king\'s friends; he had been brought up with Alexander and shared all '
        'his secrets."',
        'Well known for his hip-hop style and use of catchphrases such as "Boo-yah!"'])
    assert a == ("The term is derived from the Latin sanguis divinus.",
                 'The Latin sanguis divinus literally translates to "divine blood".')
    assert b == ("He was by far the dearest of all the king's friends; he had been brought up with Alexander.",
                 "He shared all his secrets.")
    assert c == ("Well known for his hip-hop style.", 'Well known for his use of catchphrases such as "Boo-yah!".')
    assert sp.claims_of(["She starred in \u201cThe Hours\u201d and won an Oscar in 2003."])[0] == (
        "She starred in \u201cThe Hours\u201d.", "She won an Oscar in 2003.")


def test_rule_claims_repeat_a_gapped_object_split_off_common_nouns_only_and_never_read_which_as_a_person():
    """Real WikiBio sentences (2026-11-28): a prepositional phrase coordinated with a verb repeats the verb's object
    ("He studied later at the University of Berlin." until then), a name in another script is not a common noun
    ("Makiko Esumi is a \u6c5f\u89d2\u771f\u7d00\u5b50." until then), and "which" is not about a person the parser
    hung it on ("Jesus Christ is believed to have been shed ..." until then)."""
    sp = RuleSplitter()
    a, b, c = sp.claims_of([
        "He studied medicine at the University of Dorpat and later at the University of Berlin.",
        "Makiko Esumi (\u6c5f\u89d2\u771f\u7d00\u5b50, Esumi Makiko, born April 8, 1965) is a Japanese actress and "
        "former fashion model.",
        "The Blood Divine is a term used to refer to the blood of Jesus Christ, which is believed to have been shed for "
        "the remission of sins."])
    assert c == ("The Blood Divine is a term used to refer to the blood of Jesus Christ.",
                 "The blood of Jesus Christ is believed to have been shed for the remission of sins.")
    assert a == ("He studied medicine at the University of Dorpat.", "He studied medicine later at the University of "
                 "Berlin.")
    assert b == ("Makiko Esumi was born on April 8, 1965.",
                 "Makiko Esumi (\u6c5f\u89d2\u771f\u7d00\u5b50, Esumi Makiko) is a Japanese actress.",
                 "Makiko Esumi is a former fashion model.")


def test_rule_claims_keep_an_example_or_restatement_in_its_sentence_and_never_claim_a_heading_or_list_marker():
    """From a walkthrough on chat answers (2026-11-29): "a mould, i.e. Penicillium notatum" was split off as "A mould
    was an i.e. Penicillium notatum."; a Markdown heading became "## Installation is a part 1." (headings are no
    longer units); an ordinary apposition is still split off."""
    from halluscope.text import split_sentences

    sp = RuleSplitter()
    ie, plain = sp.claims_of(["A mould, i.e. Penicillium notatum, killed bacteria.",
                              "Irena Sendler, a Polish nurse, saved children."])
    assert ie == ("A mould, i.e. Penicillium notatum, killed bacteria.",)
    assert plain == ("Irena Sendler was a Polish nurse.", "Irena Sendler saved children.")
    units = split_sentences("## Installation (part 1)\n\nInstall it with pip. Version 2.31.0 is the latest.")
    assert [c.text for c in sp.split([units])[0]] == ["Install it with pip.", "Version 2.31.0 is the latest."]


def test_llm_splitter_reads_one_claim_per_line_and_keeps_sentence_indices():
    from halluscope.llm import Sampler
    from halluscope.llm.base import Backend, Generation

    class Scripted(Backend):  # answers like an instruction-tuned model, then starts a new prompt
        kind, model = "scripted", "claims"

        def __init__(self):
            self.prompts = []

        def complete(self, prompt, params):
            self.prompts.append(prompt)
            if "Paris" in prompt.split("Sentence:")[-1]:
                return Generation("- Ada lives in Paris.\n2) Ada is a painter.\n- Ada lives in Paris.\nSentence: x")
            return Generation("   \n")  # nothing usable: the sentence is its own claim

    be = Scripted()
    out = LLMSplitter(Sampler(be)).split([["Ada was born in 1990.", "She lives in Paris and paints."]])[0]
    assert out == [Claim("Ada was born in 1990.", 0), Claim("Ada lives in Paris.", 1), Claim("Ada is a painter.", 1)]
    assert "Context: Ada was born in 1990.\nSentence: She lives in Paris and paints." in be.prompts[1]
    assert parse_claims("1. A is B.\n* C is D.\nClaims:\nE") == ["A is B.", "C is D."]
    from halluscope import Detector  # the run says which LLM split its claims (another splits otherwise)

    res = Detector(methods=["ngram1_max"], claims="llm", llm=Sampler(be)).score(
        [{"id": "a", "response": "She lives in Paris and paints.", "samples": ["She lives in Paris."]}])
    assert res.settings["claims"]["llm"] == "scripted:claims" and len(res.items[0].claims) == 2


def _item_with_claims() -> ItemResult:
    it = ItemResult(id="r1", sentences=["A was born in 1950 and died in 2000.", "A was a painter."],
                    sentence_scores={"nli": [0.2, 0.9]}, passage_scores={"nli": 0.55}, labels=[0.0, 1.0])
    it.claims = [Claim("A was born in 1950.", 0), Claim("A died in 2000.", 0), Claim("A was a painter.", 1)]
    it.claim_scores = {"nli": [0.1, 0.7, 0.9]}
    it.claim_passage_scores = {"nli": float(np.mean([0.1, 0.7, 0.9]))}
    it.claim_evidence = {"nli": [{"sample": 0}, {"sample": 2}, {"sample": 1}]}
    it.flags = {"threshold": 0.5, "sentences": [False, True], "response": True, "claims": [False, True, True],
                "claims_response": True}
    return it


def test_claims_round_trip_through_dicts_json_and_the_claim_table(tmp_path):
    from halluscope.claims import sentence_scores_from_claims
    from halluscope.io import read_results, write_results

    it = _item_with_claims()
    back = ItemResult.from_dict(json.loads(json.dumps(it.to_dict())))
    assert back == it
    plain = ItemResult(id="p", sentences=["x."], sentence_scores={"nli": [0.3]}, passage_scores={"nli": 0.3})
    assert "claims" not in plain.to_dict() and ItemResult.from_dict(plain.to_dict()).claims is None
    res = Results(items=[it, plain], methods=["nli"])
    path = write_results(res, tmp_path / "r.jsonl")
    assert read_results(path).items[0] == it
    df = res.to_df("claim")
    assert list(df["claim"]) == [c.text for c in it.claims] and list(df["sentence_index"]) == [0, 0, 1]
    assert list(df["label"]) == [0.0, 0.0, 1.0] and list(df["flagged"]) == [False, True, True]
    assert df["nli"].tolist() == [0.1, 0.7, 0.9]
    assert res.to_df("passage")["claims_nli"].iloc[0] == pytest.approx(0.5666666)
    assert sentence_scores_from_claims(it, "nli", "max") == [0.7, 0.9]
    assert sentence_scores_from_claims(it, "nli", "mean") == pytest.approx([0.4, 0.9])


def _trimmed(records, k: int, sentences: int = 3, samples: int = 3) -> list[dict]:
    out = []
    for r in records[:k]:
        out.append({"id": r.id, "response": " ".join(r.sentences[:sentences]), "samples": r.samples[:samples],
                    "sentences": r.sentences[:sentences], "labels": r.labels[:sentences]})
    return out


def test_detector_scores_claims_on_the_shared_nli_cache(detector_models, wikibio):
    """Claims of 2 WikiBio passages: scores in range, the calibrated probability on claims, and the NLI pairs of a
    claim that equals its sentence come from the cache (each piece through the model once, counted)."""
    from halluscope.models.nli import load_nli

    nli = load_nli()  # a fresh cache, so the count is this test's
    seen = []
    forward = nli._forward
    nli._forward = lambda pairs: (seen.extend(pairs), forward(pairs))[1]
    recs = _trimmed([wikibio[0], wikibio[1]], 2)
    det = Detector(methods="nli,nli_support,bertscore,entity,ngram1_max_rel,probability", claims="rule")
    det._models.update(encoder=detector_models[0], nli=nli)
    res = det.score(recs)
    assert seen and len(seen) == len(set(seen))
    same = 0
    for it in res.items:
        assert it.claims and {c.sentence for c in it.claims} == set(range(len(it.sentences)))
        for m in det.claim_methods:
            v = np.asarray(it.claim_scores[m])
            assert len(v) == len(it.claims) and np.isfinite(v).all()
            assert it.claim_passage_scores[m] == pytest.approx(v.mean())
        for m in ("nli", "nli_support", "bertscore", "entity", "ngram1_max_rel", "probability"):
            assert all(0.0 <= x <= 1.0 for x in it.claim_scores[m]), m
        assert len(it.flags["claims"]) == len(it.claims) and 0 <= it.claim_passage_scores["probability"] <= 1
        for k, c in enumerate(it.claims):
            if c.text == it.sentences[c.sentence]:  # the same (premise, hypothesis) pairs as the sentence's
                same += 1
                assert it.claim_scores["nli"][k] == it.sentence_scores["nli"][c.sentence]
                # the same scores and the same sample count (2, below the calibration's 3): the same probability
                assert it.claim_scores["probability"][k] == pytest.approx(it.sentence_scores["probability"][c.sentence])
    assert same >= 1  # Matthew Aylmer's passage has sentences that are one claim
    n = len(seen)
    det.score(recs)
    assert len(seen) == n  # a second run: every pair from the cache


def test_luq_agrees_with_a_direct_computation_and_shares_the_nli_pairs(detector_models, wikibio):
    from halluscope.models.nli import load_nli

    nli = load_nli()
    seen = []
    forward = nli._forward
    nli._forward = lambda pairs: (seen.extend(pairs), forward(pairs))[1]
    rec = _trimmed([wikibio[1]], 1)[0]
    det = Detector(methods="nli,luq", nli_evidence="sample")
    det._models.update(encoder=detector_models[0], nli=nli)
    it = det.score([rec]).items[0]
    p = nli.probs([(smp, s) for s in rec["sentences"] for smp in rec["samples"]]).astype(float).reshape(3, 3, 3)
    direct = 1.0 - np.mean(p[..., 0] / (p[..., 0] + p[..., 2]))
    assert it.passage_scores["luq"] == pytest.approx(direct, abs=1e-6)  # float32 probabilities
    assert "luq" not in it.sentence_scores and len(it.evidence["luq"]) == 3
    # with whole samples as the NLI premise, LUQ reads exactly the pairs of SelfCheck-NLI: nothing computed twice
    assert it.passage_scores["luq"] == pytest.approx(np.mean(it.sentence_scores["nli"]), abs=1e-6)
    assert len(seen) == len(set(seen))


def test_score_cli_with_claims_prints_and_writes_claims(tmp_path):
    from halluscope.cli import app

    out = tmp_path / "r.json"
    r = CliRunner().invoke(app, ["score", "--claims", "rule", "-m", "ngram1_max_rel,entity", "-o", str(out)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "from 0 as in the output): ngram1_max_rel=" in text and " s0: " in text and " s1: " in text
    items = json.loads(out.read_text())["items"]
    assert all(it["claims"] and len(it["claim_scores"]["entity"]) == len(it["claims"]) for it in items)
    bad = CliRunner().invoke(app, ["score", "--claims", "nonsense", "-m", "ngram1_max_rel"])
    assert bad.exit_code == 2 and "claims must be one of ('rule', 'llm')" in bad.output
    # the library without an LLM: the LLM splitter says what it needs (the CLI gives it the packaged model)
    with pytest.raises(ValueError, match="needs an LLM"):
        Detector(methods=["ngram1_max_rel"], claims="llm").score([{"id": "a", "response": "He was born in 1820.",
                                                                   "samples": ["He was born in 1820."]}])


def test_html_report_carries_each_sentences_claims_with_scores_and_evidence(tmp_path):
    from halluscope.report.html import build_report

    it = _item_with_claims()
    it.labels = None
    path = build_report(Results(items=[it], methods=["nli"]), tmp_path / "r.html", samples={"r1": ["s0", "s1", "s2"]})
    html = path.read_text()
    data = json.loads(html.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    claims = data["passages"][0]["claims"]
    assert [c["text"] for c in claims] == ["A was born in 1950.", "A died in 2000.", "A was a painter."]
    assert claims[1]["sentence"] == 0 and claims[1]["scores"]["nli"] == 0.7
    assert claims[1]["evidence"]["nli"] == 'sample 2: "s2"'
    assert "function claimsHtml" in html
