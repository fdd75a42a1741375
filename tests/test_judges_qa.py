"""LLM judges (003 §3.3 and the 002 CoT metric) on the packaged local model, the QA-pipeline loaders and graders on
the shared benchmarks, and the response-level figures (ROC, accuracy-at-tau) on real SAC3 answers."""

import json
import math

import numpy as np
import pytest

from halluscope.engine.components import ComponentScorer, ResponseItem
from halluscope.evaluation.qa import DEFAULT_BENCHMARKS, QAQuestion, extract, grade, load_benchmark
from halluscope.evaluation.response_metrics import accuracy_at_tau
from halluscope.evaluation.response_report import presets_from_reports, write_figures
from halluscope.evaluation.sac3 import analyze, bsdetector, load_sac3
from halluscope.llm import Sampler
from halluscope.llm.local import LlamaCppBackend
from halluscope.scorers.judging import CoTJudge, LLMJudge, parse_verdict, parse_yes_reason


@pytest.fixture(scope="module")
def sampler(tmp_path_factory):
    return Sampler(LlamaCppBackend("gemma"), cache=str(tmp_path_factory.mktemp("c") / "cache.sqlite"), concurrency=1)


def test_verdict_and_cot_parsing():
    assert parse_verdict("Correct - 300") == 1.0
    assert parse_verdict('\n"Incorrect"') == 0.0
    assert parse_verdict("I'm not sure.") == 0.5 and parse_verdict("I AM NOT SURE") == 0.5
    # a verdict must open the reply: a word quoted inside another sentence is not one
    assert parse_verdict('You should answer "Correct"') is None and parse_verdict("correctness") is None
    assert parse_yes_reason("yes\nThe answer names the wrong year.") == (True, "The answer names the wrong year.")
    assert parse_yes_reason("No.") == (False, "") and parse_yes_reason("maybe") == (None, "")
    # the vote opens the reply; the instruction echoed back is no vote (the 270M model's usual reply)
    assert parse_yes_reason('**No**') == (False, "") and parse_yes_reason("Yes, the year is wrong.")[0] is True
    assert parse_yes_reason("Answer: Yes") == (True, "") and parse_yes_reason("Return: no")[0] is False  # a label
    for echo in ('"Yes" if the generated answer is a hallucination, "No" otherwise.', "yes or no", "Yes/No",
                 '"yes" if the generated answer is a hallucination. Otherwise, return "no".', "The answer is yes."):
        assert parse_yes_reason(echo) == (None, ""), echo


def test_llm_judge_records_missing_never_guesses(sampler):
    pairs = [("What is the capital of France?", "Paris"), ("How many legs does a spider have?", "Six")]
    judge = LLMJudge(sampler, retries=1)
    verdicts = judge.judge(pairs)
    for v in verdicts:
        assert v.missing or v.confidence in (0.0, 0.5, 1.0)
        assert 1 <= len(v.replies) <= 2  # greedy try plus at most one retry
        assert v.missing == all(parse_verdict(r) is None for r in v.replies)
    # a template the model cannot answer with a verdict: every try fails, so the value is missing (NaN)
    count = LLMJudge(sampler, template="Count on: {question} {answer} 1, 2, 3,", retries=2, max_tokens=4)
    seen = []
    v = count.judge([("x", "y")], seen.append)[0]
    assert len(v.replies) == 3 and math.isnan(v.confidence)
    assert sum(seen) == 1  # progress counts the answer once, not each of its three tries
    # the judgements are cached: a second judge over the same sampler makes no new generation
    n = len(sampler.cache)
    judge.judge(pairs)
    assert len(sampler.cache) == n


def test_cot_judge_self_consistency(sampler):
    res = CoTJudge(sampler, k=3).score([("The duck crossed the road", "The duck did not cross the road", None)])[0]
    assert len(res.votes) == len(res.replies) == 3
    known = [v for v in res.votes if v is not None]
    assert (math.isnan(res.score) and not known) or res.score == pytest.approx(sum(known) / len(known))
    assert all(r == "" for v, r in zip(res.votes, res.reasons) if v is not True)  # a reason only with "yes"


def test_benchmarks_load_and_grade(data_dir):
    for name in DEFAULT_BENCHMARKS:
        qs = load_benchmark(name, data_dir, limit=3)
        assert len(qs) == 3 and all(q.gold for q in qs)
    gsm = load_benchmark("gsm8k", data_dir, 1)[0]
    assert gsm.gold == ["18"] and grade(gsm, "16 - 3 - 4 = 9 and 9 * 2 = 18. The answer is 18.")
    assert not grade(gsm, "The answer is 16.") and grade(gsm, "She makes $18")
    arc = load_benchmark("arc", data_dir, 1)[0]
    assert arc.gold == ["C"] and "\nD. " in arc.question
    assert grade(arc, "C. Planetary days will become shorter.") and not grade(arc, "B. Planetary years")
    nq = load_benchmark("nq_open", data_dir, 1)[0]
    assert grade(nq, "It was in December 1972.") and not grade(nq, "1969")
    assert extract("numeric", "1,250 dollars") == "1250" and extract("choice", "none") is None


def test_benchmark_bad_record_names_field_and_record(tmp_path):
    (tmp_path / "questions").mkdir()
    (tmp_path / "questions" / "gsm8k_test.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n{"question": "q"}\n')
    with pytest.raises(ValueError, match=r"record 1: field 'answer'"):
        load_benchmark("gsm8k", tmp_path)


def test_closed_form_exact_match_and_selfcheck_component(detector_models):
    enc, nli = detector_models
    it = ResponseItem("1", "2+2?", "2 + 2 = 4. The answer is 4.", ["The answer is 4.", "It is 5.", "4"],
                      meta={"extracted": ["4", "4", "5", "4"]})
    before = nli.forward_pairs
    r = ComponentScorer(enc, nli, components=("exact_match", "non_contradiction", "selfcheck_nli")).score([it])[0]
    assert r["exact_match"] == pytest.approx(2 / 3)  # by the extracted numbers, not the texts
    assert 0 <= r["selfcheck_nli"] <= 1
    sents = 2  # SelfCheck pairs (sample, sentence) add 3 x 2 pairs to the 2 x 3 both-way pairs, none twice
    assert nli.forward_pairs - before <= 3 * 2 + 3 * sents


def test_bsdetector_with_self_reflection():
    C = {"non_contradiction": 0.5, "exact_match": 1.0, "self_judge": 0.0}
    o = 0.8 * 0.5 + 0.2 * 1.0
    assert bsdetector(C) == pytest.approx(o)
    assert bsdetector(C, reflection="self_judge") == pytest.approx(0.7 * o)
    assert bsdetector({**C, "self_judge": float("nan")}, reflection="self_judge") == pytest.approx(o)


def test_sac3_figures_roc_and_accuracy_at_tau(detector_models, data_dir, tmp_path):
    enc, _ = detector_models
    items = load_sac3(data_dir, limit=30)
    comps = ["exact_match", "bertscore"]
    rows = ComponentScorer(enc, None, components=comps).score(items)
    res = analyze(items, rows, comps, folds=3)
    assert res["components"]["bertscore"]["auroc"] > 0.6  # informative on real answers
    curves = res["scores"]["curves"]
    assert set(curves) == {"ensemble (agnostic)", "ensemble (joint)"}
    acc = accuracy_at_tau(curves["ensemble (agnostic)"], res["scores"]["hallucination"])
    assert acc[0] == pytest.approx(1 - res["hallucination_rate"])  # tau = 0 keeps every answer
    names = write_figures(res, tmp_path, "sac3", "SAC3")
    assert names == ["roc_sac3.png", "accuracy_at_tau_sac3.png", "risk_coverage_sac3.png", "reliability_sac3.png"]
    for n in names:
        assert (tmp_path / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    presets = presets_from_reports([], [("sac3", res)])
    assert set(presets) == {"open-ended"}
    p = presets["open-ended"]
    assert abs(sum(p["weights"]) - 1) < 1e-9 and "sac3: 30" in p["trained_on"] and p["components"] == comps


def test_qa_pipeline_end_to_end(sampler, detector_models, data_dir, tmp_path):
    from halluscope.evaluation.response_report import run_qa

    enc, nli = detector_models
    rep = run_qa(["svamp"], sampler, tmp_path, data_dir, limit=3, m=2, encoder=enc, nli=nli,
                 judges={"self_judge": LLMJudge(sampler, retries=0)})
    lines = [json.loads(x) for x in (tmp_path / "items_svamp.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all(len(x["samples"]) == 2 and "self_judge" in x["judges"] for x in lines)
    qs = load_benchmark("svamp", data_dir, 3)
    assert [x["correct"] for x in lines] == [grade(q, x["response"]) for q, x in zip(qs, lines)]
    assert rep["benchmarks"]["svamp"]["n"] == 3
    assert (tmp_path / "report.md").read_text().startswith("# QA pipeline report")
    # a re-run is served from the cache
    n = len(sampler.cache)
    run_qa(["svamp"], sampler, tmp_path, data_dir, limit=3, m=2, encoder=enc, nli=nli,
           judges={"self_judge": LLMJudge(sampler, retries=0)})
    assert len(sampler.cache) == n
    assert isinstance(QAQuestion("x", "svamp", "numeric", "q", ["1"]).prompt(), str)
    assert np.isfinite(rep["benchmarks"]["svamp"]["accuracy"])


def test_sac3_external_judge_is_a_component(sampler, data_dir):
    from halluscope.evaluation.sac3 import run_sac3

    out = run_sac3(data_dir, limit=8, folds=2, components=["exact_match"],
                   judges={"external_judge": LLMJudge(sampler, retries=0)})
    assert out["components_used"] == ["exact_match", "external_judge"]
    assert len(out["judge_replies"]) == 8 and all("external_judge" in v for v in out["judge_replies"].values())
    col = [row[1] for row in out["scores"]["components"]]
    assert all(v is None or np.isnan(v) or v in (0.0, 0.5, 1.0) for v in col)


def test_sac3_cot_on_few_answers_uses_the_folds_the_components_use(tmp_path, data_dir):
    """`ensemble sac3 --limit 8 --cot K` (4 wrong answers, 5 folds asked) cut the components' cross-validation to 4
    folds, but the CoT judge's not: after all the LLM work it ended in scikit-learn's "n_splits=5 cannot be greater
    than the number of members in each class"."""
    from typer.testing import CliRunner

    from halluscope.cli import app

    out = tmp_path / "s.json"
    r = CliRunner().invoke(app, ["ensemble", "sac3", "--data", str(data_dir), "--limit", "8", "--components",
                                 "exact_match", "--external-judge", "local", "--cot", "1", "-o", str(out), "--cache",
                                 str(tmp_path / "c.sqlite")])
    assert r.exit_code == 0, r.output
    got = json.loads(out.read_text())
    assert got["folds"] == 4 and len(got["cot"]["answers"]) == 8
