"""The learned logistic combination: training, storage, and per-record scoring independent of the batch."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from halluscope import Detector
from halluscope.cli import app
from halluscope.evaluation.wikibio import evaluate_results
from halluscope.scorers.learned import LearnedCombination


def test_fit_save_load_and_score_one_record_alone(tmp_path, wikibio):
    train = Detector(methods="ngram1_max,ngram2_avg").score(wikibio[:40])
    model = LearnedCombination.fit(train, ["ngram1_max", "ngram2_avg"], trained_on="passages 0-39")
    path = tmp_path / "learned.json"
    model.save(path)
    det = Detector(methods="learned", learned=str(path))
    assert det.methods == ["ngram1_max", "ngram2_avg", "learned"]  # components are scored too
    batch = det.score(wikibio[40:60])
    alone = det.score(wikibio[45:46])
    assert alone.items[0].sentence_scores["learned"] == pytest.approx(batch.items[5].sentence_scores["learned"])
    p = np.concatenate([it.sentence_scores["learned"] for it in batch.items])
    assert np.all((p > 0) & (p < 1))
    figs = evaluate_results(batch)
    assert figs["learned"]["nonfact"] > figs["random"]["nonfact"] + 5  # held-out passages 40-59


def test_packaged_model_and_train_command(tmp_path, wikibio):
    packaged = LearnedCombination.load()
    assert packaged.components == ["ngram1_max", "bertscore", "nli"] and "0-118" in packaged.trained_on
    import inspect

    from halluscope.cli.train import train_learned

    default = inspect.signature(train_learned).parameters["components"].default.default  # the command's default
    assert default.split(",") == packaged.components  # reproduces the packaged file (it was support,bertscore,nli)
    res = tmp_path / "res.jsonl"
    src = tmp_path / "lab.jsonl"
    src.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in wikibio[:30]))
    r = CliRunner().invoke(app, ["score", str(src), "--methods", "ngram1_max,ngram1_avg", "-o", str(res), "--json"])
    assert r.exit_code == 0, r.output
    out = tmp_path / "m.json"
    r = CliRunner().invoke(app, ["train-learned", str(res), "--components", "ngram1_max,ngram1_avg", "--passages",
                                 "0-29", "--folds", "3", "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert set(d["weights"]) == {"ngram1_max", "ngram1_avg"} and "learned" in d["cross_validated"]
    assert LearnedCombination.load(out).components == ["ngram1_max", "ngram1_avg"]


def test_combiners_fitted_in_python_are_used_by_the_detector_and_a_refit_file_is_read_again(tmp_path, wikibio):
    """A Logistic or Calibrated combiner fitted in Python and saved is what `Detector(learned=...)` and
    `Detector(calibration=...)` read (their own formats refused it: two files for one model); a calibration file
    rewritten at the same path is read again (a notebook's refit was served from the first read's cache)."""
    from halluscope.combine import Calibrated, Logistic, Platt, ZMean
    from halluscope.scorers.learned import features, labels

    comps = ["ngram1_max", "support"]
    train = Detector(methods=comps).score(wikibio[:10])
    X, y = features(train, comps), labels(train)
    lr = Logistic(comps).fit(X, y)
    lr.save(tmp_path / "lr.json")
    test = wikibio[10:12]
    got = Detector(methods=[*comps, "learned"], learned=str(tmp_path / "lr.json")).score(test)
    want = lr.predict_proba(features(got, comps))
    assert np.concatenate([it.sentence_scores["learned"] for it in got]) == pytest.approx(want, abs=1e-9)
    zm = ZMean(comps).fit(X)
    cal = Calibrated(base=zm, sentence=Platt().fit(zm.transform(X), y), response=Platt())
    cal.save(tmp_path / "cal.json")
    probs = Detector(methods=[*comps, "probability"], calibration=str(tmp_path / "cal.json")).score(test)
    p0 = np.concatenate([it.sentence_scores["probability"] for it in probs])
    assert p0 == pytest.approx(cal.sentence.predict_proba(zm.transform(features(probs, comps))), abs=1e-9)
    with pytest.raises(ValueError, match="never fitted"):
        Logistic(comps).save(tmp_path / "unfitted.json") or LearnedCombination.load(tmp_path / "unfitted.json")
    from halluscope import calibration

    with pytest.raises(ValueError, match="too few labels to refit"):  # the saved combiner is a base for a refit too
        calibration.refit_from_reviews(str(tmp_path / "reviews.db"), tmp_path / "cal.json")
    steeper = Calibrated(base=zm, sentence=Platt(a=cal.sentence.a * 3, b=cal.sentence.b), response=Platt())
    steeper.save(tmp_path / "cal.json")  # the same path, rewritten
    p1 = np.concatenate([it.sentence_scores["probability"] for it in Detector(
        methods=[*comps, "probability"], calibration=str(tmp_path / "cal.json")).score(test)])
    assert not np.allclose(p0, p1)


def test_calibrate_refits_the_default_probability_on_your_own_labelled_results(tmp_path, wikibio):
    """A team with its own labelled answers could refit the default probability only through the service's reviews
    (`calibrate --wikibio` wants WikiBio's passages 0-118): `calibrate --labelled RESULTS` refits the sentence map on
    their labels, says before / after by cross-validation and when the refit does worse, keeps a level with too few
    labels (the answers here: none is graded), and `evaluate --calibration` applies the file."""
    from halluscope import calibration
    from halluscope.io import write_results

    recs = [{"id": r.id, "response": r.response, "samples": r.samples[:3], "sentences": list(r.sentences),
             "labels": r.labels} for r in wikibio[150:158]]
    res = Detector(methods=["ngram1_max_rel", "bertscore", "nli_support", "entity", "probability"]).score(recs)
    write_results(res, tmp_path / "mine.jsonl")
    mine_file = str(tmp_path / "mine.jsonl")
    r = CliRunner().invoke(app, ["calibrate", "--labelled", mine_file, "-o", str(tmp_path / "c.json")])
    assert r.exit_code == 0, r.output
    n = sum(len(x["labels"]) for x in recs)
    assert f"sentences ({n} labelled): ECE" in r.output and "answers: kept as it was: 0 labelled" in r.output
    rep = json.loads(next(x for x in r.output.splitlines() if x.startswith("{")))
    assert rep["sentence"]["worse"] == (rep["sentence"]["after_cv"]["brier"] >= rep["sentence"]["before"]["brier"])
    mine, packaged = calibration.load(tmp_path / "c.json"), calibration.load()
    assert "refitted from mine.jsonl" in mine.fitted_on and mine.response == packaged.response
    assert (mine.sentence.a, mine.sentence.b) != (packaged.sentence.a, packaged.sentence.b)
    out = tmp_path / "ev.json"
    r = CliRunner().invoke(app, ["evaluate", mine_file, "--calibration", str(tmp_path / "c.json"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "refitted from mine.jsonl" in json.loads(out.read_text())["settings"]["probability"]["fitted_on"]  # said
    assert f"probability, {n} labelled sentences: ECE" in r.output and "few sentences" in r.output  # noisy: said
    src = tmp_path / "records.jsonl"  # score and check apply it too (only evaluate and serve could)
    src.write_text("".join(json.dumps(x) + "\n" for x in recs[:2]))
    r = CliRunner().invoke(app, ["score", str(src), "--calibration", str(tmp_path / "c.json"), "-o",
                                 str(tmp_path / "s.json"), "-q"])
    assert r.exit_code == 0, r.output
    scored = json.loads((tmp_path / "s.json").read_text())
    assert "refitted from mine.jsonl" in scored["settings"]["probability"]["fitted_on"]
    x = [[scored["items"][0]["sentence_scores"][m][0] for m in mine.components]]
    assert scored["items"][0]["sentence_scores"]["probability"][0] == pytest.approx(
        float(mine.sentence_proba(x, 3)[0]), abs=1e-6)
    bare = CliRunner().invoke(app, ["calibrate", "--labelled", mine_file, "-o", str(tmp_path / "d.json"), "--base",
                                    str(tmp_path / "c.json")])
    assert bare.exit_code == 0, bare.output
    unlabelled = tmp_path / "plain.jsonl"
    write_results(Detector(methods=["ngram1_max"]).score([{k: v for k, v in recs[0].items() if k != "labels"}]),
                  unlabelled)
    r = CliRunner().invoke(app, ["calibrate", "--labelled", str(unlabelled), "-o", str(tmp_path / "e.json")])
    assert r.exit_code == 2 and "no record carries sentence labels" in r.output, r.output
