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
