"""The HTML report of a real WikiBio run, opened in headless Chromium (Debian's package, installed by `make install`):
it renders with no console errors, the highlighted passages and every plot are there, a click shows the scores, and
a screenshot is saved (to $HALLUSCOPE_SCREENSHOTS when set, else the test's temporary folder)."""

import os
from pathlib import Path

import pytest

from halluscope.engine.components import ComponentScorer
from halluscope.evaluation.sac3 import analyze, load_sac3
from halluscope.evaluation.wikibio import ablation_samples, reproduce
from halluscope.pipeline import Detector
from halluscope.report.html import build_report

from browser import chromium_page


@pytest.fixture(scope="module")
def report_file(detector_models, data_dir, tmp_path_factory):
    enc, nli = detector_models
    det = Detector(methods="ngram1_max,bertscore,nli")
    det._models.update(encoder=enc, nli=nli)  # the session's shared models
    figures, res = reproduce(detector=det, data_dir=data_dir, passages=[0, 1, 2, 3, 4, 5])
    fig7 = ablation_samples("ngram1_max", ks=(1, 2, 4), data_dir=data_dir, passages=[0, 1, 2, 3, 4, 5],
                            detector=Detector(methods="ngram1_max"))
    items = load_sac3(data_dir, limit=24)
    comps = ["exact_match", "bertscore"]
    ens = analyze(items, ComponentScorer(enc, None, components=comps).score(items), comps, folds=3)
    from halluscope.evaluation.wikibio import load_wikibio

    samples = {r.id: r.samples for r in load_wikibio(data_dir, [0, 1, 2, 3, 4, 5])}
    out = tmp_path_factory.mktemp("report") / "report.html"
    build_report(res, out, "WikiBio test run", samples, fig7, ens, source="test", figures_dir=out.parent / "figs")
    return out, res


def test_report_is_self_contained(report_file):
    out, res = report_file
    text = out.read_text()
    for col in ("AUROC", "PRR", "AURC", "ECE", "Brier"):  # the ensemble table's figures
        assert f"<th>{col}</th>" in text
    assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text  # no network
    for it in res.items:
        assert it.id in text
    assert "<th>methods</th><td>ngram1_max, bertscore, nli" in text  # names (was a raw JSON dict of descriptions)
    # --figures: the paper's figures under the names the README links (docs/figures/...), the others by title
    pngs = {f.name for f in (out.parent / "figs").glob("*.png")}
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    linked = {n for n in pngs if f"docs/figures/{n}" in readme}
    assert linked == {"fig5_precision_recall.png", "fig6_passage_vs_human.png", "fig8_nonfact_star_vs_samples.png"}
    assert "fig7_score_vs_samples.png" in pngs and "roc_sac3_nq_open_ensemble_paper_figure_2.png" in pngs, pngs


def test_report_renders_in_headless_chromium(report_file):
    out, res = report_file
    shots = Path(os.environ.get("HALLUSCOPE_SCREENSHOTS", out.parent))
    shots.mkdir(parents=True, exist_ok=True)
    with chromium_page() as (page, errors):
        page.goto(out.as_uri())
        page.wait_for_selector(".passage")
        assert errors == []
        assert page.locator(".passage").count() == len(res.items)
        n_sent = sum(len(it.sentences) for it in res.items)
        assert page.locator(".s").count() == n_sent
        colours = page.eval_on_selector_all(".s", "els => els.map(e => getComputedStyle(e).backgroundColor)")
        assert len(set(colours)) > 3  # sentences are shaded by score, not one flat colour
        imgs = page.eval_on_selector_all("img", "els => els.map(e => [e.alt, e.naturalWidth, e.complete])")
        alts = [a for a, w, done in imgs if w > 0 and done]
        # PR, passage scatter, Figure 7 (x2), and for the ensemble ROC, accuracy-at-tau, risk-coverage, reliability
        assert len(alts) == len(imgs) == 8, imgs
        assert any("precision-recall" in a for a in alts) and any("ROC" in a for a in alts)
        assert any("accuracy at tau" in a for a in alts) and any("Figure 7" in a for a in alts)
        assert any("risk-coverage" in a for a in alts) and any("reliability" in a for a in alts)
        page.locator(".s").nth(2).click()
        panel = page.locator("#panel")
        assert panel.is_visible() and "ngram1_max" in panel.inner_text() and "evidence" in panel.inner_text()
        page.select_option("#method", "bertscore")  # recolour by another method
        assert page.eval_on_selector_all(".s", "els => els.map(e => getComputedStyle(e).backgroundColor)") != colours
        assert errors == []
        page.screenshot(path=str(shots / "report.png"), full_page=False)
    assert (shots / "report.png").read_bytes()[:4] == b"\x89PNG"


def test_a_report_of_graded_answers_shows_their_figures_and_which_were_wrong(data_dir, tmp_path):
    """Answers graded as a whole (`correct`, no sentence labels): the report has each method's answer-level figures,
    the same as `evaluate` computes, and the ids of the answers graded wrong (it said "no labels in this file"); an
    `ensemble score` output given as results is one clear error naming the file and line, not a KeyError."""
    import json

    from halluscope.evaluation.response_metrics import answer_figures
    from halluscope.io import read_results, write_results

    every = load_sac3(data_dir)
    picked = [it for it in every if it.correct][:3] + [it for it in every if not it.correct][:3]
    res = Detector(methods="ngram1_max_rel,cosine").score([{"id": it.id, "prompt": it.question,
                                                            "response": it.response, "samples": it.samples[:3],
                                                            "correct": it.correct} for it in picked])
    f = tmp_path / "graded.jsonl"
    write_results(res, f)
    html = build_report(read_results(f), tmp_path / "r.html").read_text()
    fig = answer_figures(res, ["ngram1_max_rel", "cosine"])
    assert "<h2 id='graded'>Graded answers</h2><p>6 answers graded as a whole, 3 wrong" in html
    assert f"<td>ngram1_max_rel</td><td>6</td><td>3</td><td>{fig['ngram1_max_rel']['auroc']:.2f}</td>" in html
    assert f"Graded wrong: {', '.join(str(it.id) for it in picked[3:])}." in html
    other = tmp_path / "ens.jsonl"
    other.write_text(json.dumps({"id": "q1", "confidence": 0.4, "flagged": True, "components": {}}) + "\n")
    with pytest.raises(ValueError, match="ens.jsonl: line 1 is not a result of `halluscope score`"):
        read_results(other)
