"""The default output: a calibrated probability of hallucination per sentence and per answer, with a flag.

    z(i)        = mean over the default methods m of (x_m(i) - mean_m) / sd_m      (SelfCheckGPT-Combination, §5.4)
    l           = ln(n / n_ref), n the record's number of samples (clipped to the counts fitted at)
    P_sent(i)   = sigmoid((a_s + a_s' l) * z(i) + b_s + b_s' l)                    (Platt scaling, by sample count)
    P_resp      = sigmoid((a_r + a_r' l) * mean_i z(i) + b_r + b_r' l)
    flag        = P >= threshold (0.5)

mean_m and sd_m are those of WikiBio GPT-3 passages 0-118 (the development half) with all 20 samples; the sentence
map is fitted on the same passages' sentences against their human labels (positive: minor or major inaccurate),
scored with their first 3, 5, 10 and 20 samples; the answer map on graded answers (SAC3 NQ-Open: gpt-3.5's answers,
positive: the answer is wrong) with their first 3, 5 and 10 samples, so the answer-level probability is calibrated on
short answers from another source than the sentence one. The sample count enters because the same component scores
mean less with fewer samples (every consistency score is noisier, and an n-gram model of 3 samples has seen fewer
words): without it, sentences checked with 3 samples got probabilities too high (held-out mean 0.785 for a
hallucination rate of 0.724; ECE 0.071 against 0.025 with 20).
Everything is fixed at fit time and packaged in ``data/calibration.json`` (``halluscope calibrate`` rewrites it):
a record gets the same probability alone as in any batch. Calibration on the held-out passages 119-237 (ECE, Brier
score, reliability diagram) is in EVALUATION.md.
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from .combine import Calibrated, Platt, ZMean, from_dict
from .types import ItemResult, MethodInfo, Results

NAME = "probability"
DEFAULT_COMPONENTS = ("ngram1_max_rel", "bertscore", "nli_support", "entity")


def packaged_path() -> Path:
    return Path(str(resources.files("halluscope") / "data" / "calibration.json"))


def _read(path: str) -> dict:
    """The calibration file's content, read again when the file changes (a refit written to the same path in a
    notebook was served from the cache of the first read)."""
    try:
        st = Path(path).stat()
    except OSError:
        return {}
    return _parse(path, st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=4)
def _parse(path: str, _mtime_ns: int, _size: int) -> dict:
    p = Path(path)
    if not p.is_file():
        return {}
    try:
        return json.loads(p.read_text())
    except ValueError as e:
        raise ValueError(f"cannot read the calibration file {p}: {e}") from e


def packaged_zstats(path: str | Path | None = None) -> dict[str, tuple[float, float]]:
    """Per method, the (mean, sd) of its sentence scores on WikiBio passages 0-118."""
    return {m: tuple(v) for m, v in _read(str(path or packaged_path())).get("zstats", {}).items()}


def load(path: str | Path | None = None) -> Calibrated:
    if path and not Path(path).is_file():
        raise ValueError(f"no calibration file {path}: `halluscope calibrate -o {path}` writes one")
    return from_dict(_wrapped(_read(str(path or packaged_path())), path or packaged_path())["probability"])


def _wrapped(d: dict, path) -> dict:
    """A calibration file's content: as ``calibrate`` writes it (``probability``, ``zstats``, ...), or a
    :class:`~halluscope.combine.Calibrated` combiner saved on its own (``Calibrated(...).save(path)``), as the
    former's ``probability``."""
    if d.get("kind") == "calibrated":
        return {"probability": d}
    if "probability" not in d:
        raise ValueError(f"no calibrated probability in {path}: run `halluscope calibrate` (or save a fitted "
                         "Calibrated combiner there)")
    return d


def info(cal: Calibrated) -> MethodInfo:
    return MethodInfo(NAME, bounded=True, description="calibrated P(hallucinated): Platt scaling (by number of "
                      "samples) of the z-mean of " + ", ".join(cal.components)
                      + f" (flag at {cal.threshold:g}; {cal.fitted_on})")


def apply(items: list[ItemResult], cal: Calibrated) -> None:
    """Add ``probability`` (sentence and answer) and the flags to every item, in place."""
    for it in items:
        missing = [m for m in cal.components if m not in it.sentence_scores]
        if missing:
            raise ValueError(f"record {it.id}: no {', '.join(missing)} scores, which the calibrated probability is "
                             f"computed from ({', '.join(cal.components)}): score them, or keep them in --methods")
        X = np.column_stack([np.asarray(it.sentence_scores[m], float) for m in cal.components])
        p = cal.sentence_proba(X, it.num_samples)
        it.sentence_scores[NAME] = [float(x) for x in p]
        it.passage_scores[NAME] = cal.response_proba(X, it.num_samples)
        it.flags = {"threshold": cal.threshold, "sentences": [bool(x >= cal.threshold) for x in p],
                    "response": bool(it.passage_scores[NAME] >= cal.threshold)}


def zstats(results: Results) -> dict[str, list[float]]:
    """(mean, sd) of every method's sentence scores in ``results`` (the packaged normalization)."""
    from .scorers.combination import matrix

    methods = [m for m in results.items[0].sentence_scores if m not in ("combination", "learned", NAME)]
    zm = ZMean(methods).fit(matrix(results.items, methods))
    return {m: [mu, sd] for m, mu, sd in zip(methods, zm.mean, zm.scale)}


def fit(dev: list[Results], graded: list[Results], graded_wrong: dict[str, bool], components=DEFAULT_COMPONENTS,
        dev_name: str = "WikiBio GPT-3 passages 0-118", graded_name: str = "SAC3 NQ-Open") -> dict:
    """The calibration file's content. ``dev``: the development passages scored at one or more sample counts (the
    z statistics of every method come from the run with the most samples), ``graded``: the graded answers likewise
    (``graded_wrong[id]``: the answer is wrong). The sentence Platt is fitted on ``dev``'s labelled sentences, the
    answer Platt on ``graded``, each over all its runs with the sample count as a covariate (:class:`Platt`).
    ``fit_report`` says per level and sample count how well each map fits (:func:`fit_report`)."""
    from .scorers.combination import matrix

    full = max(dev, key=lambda r: max((it.num_samples for it in r.items), default=0))
    stats = zstats(full)
    comps = list(components)
    base = ZMean(comps, [stats[m][0] for m in comps], [stats[m][1] for m in comps], fitted_on=dev_name)
    labelled = [it for r in dev for it in r.items if it.labels is not None]
    y = (np.concatenate([np.asarray(it.labels, float) for it in labelled]) > 0.499).astype(int)
    n = np.concatenate([[it.num_samples] * len(it.labels) for it in labelled])
    groups = np.concatenate([[it.id] * len(it.labels) for it in labelled])
    z = base.transform(matrix(labelled, comps))
    sent = Platt(fitted_on=f"{dev_name}: {len(y) // len(dev)} sentences, {_counts(dev)} samples").fit(z, y, n)
    answers = [it for r in graded for it in r.items]
    za = np.array([base.transform(matrix([it], comps)).mean() for it in answers])
    ya = np.array([graded_wrong[it.id] for it in answers], int)
    na = np.array([it.num_samples for it in answers])
    resp = Platt(fitted_on=f"{graded_name}: {len(answers) // len(graded)} answers, {_counts(graded)} samples")
    resp.fit(za, ya, na)
    cal = Calibrated(base, sent, resp, 0.5, fitted_on=f"sentences: {dev_name}; answers: {graded_name}")
    report = {"sentence": fit_report(sent, z, y, n, groups),
              "response": fit_report(resp, za, ya, na, np.array([it.id for it in answers]))}
    return {"zstats": stats, "probability": cal.to_dict(), "fit_report": report}


def fit_report(platt: Platt, z: np.ndarray, y: np.ndarray, n: np.ndarray, groups: np.ndarray,
               folds: int = 5) -> dict:
    """Per sample count: the fitted map's ECE and Brier score on the data it was fitted on, and out-of-fold (K-fold
    over records, so a record's other sample counts never sit on the other side) for this map and for one Platt
    scaling that ignores the sample count."""
    from sklearn.model_selection import GroupKFold

    from .evaluation.metrics import calibration as calib

    oof_n, oof_plain = np.full(len(z), np.nan), np.full(len(z), np.nan)
    for tr, te in GroupKFold(min(folds, len(set(groups)))).split(z, y, groups):
        oof_n[te] = Platt().fit(z[tr], y[tr], n[tr]).predict_proba(z[te], n[te])
        oof_plain[te] = Platt().fit(z[tr], y[tr]).predict_proba(z[te])
    rows = {}
    for c in sorted(set(n.tolist())):
        m = n == c
        row = {"n": int(m.sum()), "positive_rate": float(y[m].mean())}
        for name, p in (("fitted", platt.predict_proba(z[m], n[m])), ("cv", oof_n[m]), ("cv_one_map", oof_plain[m])):
            cal = calib(p, y[m])
            row[name] = {"ece": cal["ece"], "brier": cal["brier"]}
        rows[str(int(c))] = row
    return rows


def describe_fit_report(report: dict) -> list[str]:
    """The lines ``calibrate`` prints from :func:`fit_report`."""
    lines = []
    for level, rows in report.items():
        for c, r in rows.items():
            f = lambda k: f"{r[k]['ece']:.3f} / {r[k]['brier']:.3f}"  # noqa: E731
            lines.append(f"{level}s, {c} samples ({r['n']}, {r['positive_rate']:.0%} positive): ECE / Brier fitted "
                         f"{f('fitted')}; cross-validated {f('cv')}, one map for all "
                         f"counts {f('cv_one_map')}")
    return lines


def _counts(runs: list[Results]) -> str:
    return "/".join(str(c) for c in sorted({it.num_samples for r in runs for it in r.items}))


def describe_platt(d: dict) -> str:
    """A Platt entry of the calibration file as its formula."""
    text = f"p = sigmoid({d['a']:.3f} z {d['b']:+.3f})"
    if d.get("a_n") or d.get("b_n"):
        text = (f"p = sigmoid(({d['a']:.3f} {d['a_n']:+.3f} l) z {d['b']:+.3f} {d['b_n']:+.3f} l), "
                f"l = ln(n / {d['n_ref']:g}), n = {d['n_min']:g}..{d['n_max']:g} samples")
    return text


def save(content: dict, path: str | Path | None = None) -> Path:
    p = Path(path or packaged_path())
    p.write_text(json.dumps(content, indent=1) + "\n")
    _parse.cache_clear()
    return p


def graded_records(data: str | Path | None = None, limit: int | None = None):
    """SAC3 NQ-Open as records (prompt, response, samples) and whether each answer is wrong."""
    from .evaluation.sac3 import load_sac3
    from .types import Record

    items = load_sac3(data, limit)
    recs = [Record(response=it.response, samples=list(it.samples), id=it.id, prompt=it.question) for it in items]
    return recs, {it.id: not it.correct for it in items}


SAMPLE_COUNTS = (3, 5, 10, 20)  # the sample counts the packaged probability is fitted at


def calibrate(data: str | Path | None = None, wikibio=(), graded=(), progress: bool = False,
              samples=SAMPLE_COUNTS) -> dict:
    """Fit the packaged calibration: z statistics and sentence Platt on WikiBio passages 0-118, answer Platt on SAC3
    NQ-Open, each at every count of ``samples`` (the first n samples of each record; SAC3 has 10, so its counts stop
    there). ``wikibio`` / ``graded``: results files to use instead of scoring (``reproduce wikibio -o`` holding the
    default methods, of which the passages 0-118 it holds are used, found by id; ``score SAC3_FILE --samples N -o``
    on SAC3's records, which ``score`` reads as they are), one per sample count.
    Scoring a record at a smaller count re-reads the NLI pairs and embeddings of the larger from the shared caches.
    Returns the content for :func:`save`."""
    from .evaluation.wikibio import load_wikibio, passages_by_id
    from .io import read_results
    from .pipeline import Detector

    counts = sorted(set(samples), reverse=True)
    if not counts or counts[-1] < 1:
        raise ValueError(f"samples: the sample counts to fit at must be positive, got {list(samples)}")
    det = Detector(methods=list(DEFAULT_COMPONENTS))
    recs = load_wikibio(data, list(range(119)))
    if wikibio:
        dev = [read_results(f) for f in wikibio]
        for r, f in zip(dev, wikibio):
            r.items = passages_by_id(r.items, recs, str(f), "0-118", partial=True)
    else:
        dev = [det.score(_first(recs, n), progress=progress) for n in counts]
    recs, wrong = graded_records(data)
    if graded:
        res = [read_results(f) for f in graded]
    else:
        most = max(len(r.samples) for r in recs)
        res = [det.score(_first(recs, n), progress=progress) for n in sorted({min(n, most) for n in counts})[::-1]]
    missing = [m for m in DEFAULT_COMPONENTS if dev[0].items and m not in dev[0].items[0].sentence_scores]
    if missing:
        raise ValueError(f"the WikiBio results lack the default methods {missing}")
    return fit(dev, res, wrong)


def _first(records: list, n: int) -> list:
    return [dataclasses.replace(r, samples=list(r.samples[:n])) for r in records]


def report(results: Results, wrong: dict[str, bool] | None = None, bins: int = 10) -> dict:
    """ECE, Brier score and reliability points of the default probability: sentences against their labels (positive:
    label > 0.499) and, with ``wrong`` (id -> answer is wrong), answers against their grades."""
    from .evaluation.metrics import calibration as calib

    out = {}
    lab = [it for it in results.items if it.labels is not None and NAME in it.sentence_scores]
    if lab:
        p = np.concatenate([it.sentence_scores[NAME] for it in lab])
        y = np.concatenate([np.asarray(it.labels, float) for it in lab]) > 0.499
        out["sentences"] = calib(p, y, bins)
    if wrong:
        got = [it for it in results.items if it.id in wrong and NAME in it.passage_scores]
        out["answers"] = calib(np.array([it.passage_scores[NAME] for it in got]),
                               np.array([wrong[it.id] for it in got]), bins)
    return out


def _refit(platt: Platt, z: np.ndarray, y: np.ndarray, n: np.ndarray, fitted_on: str = "") -> Platt:
    """A copy of ``platt`` with a and b refitted on (z, y), sample counts n (:meth:`Platt.refit`)."""
    return dataclasses.replace(platt, fitted_on=fitted_on or platt.fitted_on).refit(z, y, n)


def _cv_platt(platt: Platt, z: np.ndarray, y: np.ndarray, n: np.ndarray, folds: int) -> np.ndarray:
    """Out-of-fold probabilities of a refit of ``platt`` on ``z`` (stratified K-fold, seed 0)."""
    from sklearn.model_selection import StratifiedKFold

    out = np.empty(len(z))
    k = max(2, min(folds, int(min(y.sum(), len(y) - y.sum()))))
    for tr, te in StratifiedKFold(k, shuffle=True, random_state=0).split(z.reshape(-1, 1), y):
        out[te] = _refit(platt, z[tr], y[tr], n[tr]).predict_proba(z[te], n[te])
    return out


def _before_after(platt: Platt, z: np.ndarray, y: np.ndarray, n: np.ndarray, folds: int) -> dict:
    from sklearn.metrics import roc_auc_score

    from .evaluation.metrics import calibration as calib

    before, after = platt.predict_proba(z, n), _cv_platt(platt, z, y, n, folds)
    row = {}
    for name, p in (("before", before), ("after_cv", after)):
        c = calib(p, y)
        row[name] = {"n": c["n"], "ece": c["ece"], "brier": c["brier"], "auroc": float(roc_auc_score(y, p))}
    return row


def refit_from_reviews(db: str | None = None, base: str | Path | None = None, folds: int = 5,
                       min_reviews: int = 20, ensemble_components=None) -> tuple[dict, dict]:
    """Refit the Platt scalings of the default probability, and the tuned response ensemble, from the service's
    reviews (``calibrate --from-db``): :func:`refit` on the reviewed sentences (label: the latest review;
    inaccurate = hallucinated) and the answers reviewed as a whole. With at least 20 answers reviewed as a whole (2
    of each label), the ensemble's weights and threshold are tuned on them too and written under ``ensemble``
    (:mod:`halluscope.serve.ensemble`; components: ``ensemble_components``, else those of the base file's ensemble,
    else the model-free defaults); report ``ensemble``.
    """
    from .serve import ensemble as serve_ensemble
    from .serve.db import make_engine
    from .serve.store import reviewed_items

    engine = make_engine(db)
    sentences, answers = reviewed_items(engine)
    content, report = refit(sentences, answers, base, folds, min_reviews, "reviews (halluscope serve)",
                            require=False)
    base_ens = serve_ensemble.load(base or packaged_path())
    ens, report["ensemble"] = serve_ensemble.refit(engine, base_ens, ensemble_components, folds)
    engine.dispose()
    if ens is not None:
        content[serve_ensemble.ENTRY] = dataclasses.asdict(ens)
    _check_refitted(report, min_reviews)
    return content, report


def refit_from_results(paths, base: str | Path | None = None, folds: int = 5, min_reviews: int = 20
                       ) -> tuple[dict, dict]:
    """Refit the Platt scalings of the default probability on your own labelled results (``calibrate --labelled``):
    results files of ``score`` / ``evaluate -o`` holding the default probability's components, whose records carry
    sentence ``labels`` (1 hallucinated, 0 accurate; 0.5, WikiBio's minor inaccuracy, counts as hallucinated, as
    in NonFact) and/or a whole answer's grade ``correct``. :func:`refit`."""
    from .io import read_results

    sentences, answers, names = [], [], []
    for path in paths:
        res = read_results(path)
        names.append(Path(path).name)
        sentences += [(it, [None if x != x else float(x >= 0.5) for x in it.labels]) for it in res.items
                      if it.labels is not None]  # hallucinated: 1, or WikiBio's minor inaccuracy (0.5), as NonFact
        answers += [(it, not it.correct) for it in res.items if it.correct is not None]
    if not sentences and not answers:
        raise ValueError(f"{', '.join(names)}: no record carries sentence labels ('labels') or a grade ('correct'): "
                         "score labelled records (`halluscope evaluate RECORDS -o RESULTS.jsonl`) and give those")
    content, report = refit(sentences, answers, base, folds, min_reviews, ", ".join(names))
    _check_refitted(report, min_reviews)
    return content, report


def refit(sentences, answers, base: str | Path | None = None, folds: int = 5, min_reviews: int = 20,
          source: str = "", require: bool = True) -> tuple[dict, dict]:
    """The Platt scalings of ``base`` (default: the packaged calibration) refitted on labelled sentences
    (``[(ItemResult, [label or None per sentence])]``, 1 = hallucinated) and answers (``[(ItemResult, wrong)]``);
    the z statistics stay the base's. A level is refitted only with at least ``min_reviews`` labels of it, of both
    kinds (else it is kept, and the report says why: ``{level}_kept``). The report gives, per level refitted, ECE,
    Brier and AUROC before (the base map as it is) and after (out-of-fold predictions of a K-fold cross-validation
    of the refit), and ``worse`` where the refit's cross-validated Brier score is not lower than the base map's: a
    fit on a handful of labels that does worse is written, but said (:func:`describe_refit`)."""
    base_path = base or packaged_path()
    content = _wrapped(json.loads(Path(base_path).read_text()), base_path)
    cal = from_dict(content["probability"])
    missing = sorted({m for it, _ in [*sentences, *answers] for m in cal.components if m not in it.sentence_scores})
    if missing:
        raise ValueError(f"the labelled results lack {', '.join(missing)}, components of the default probability: "
                         f"score them with the default methods ({', '.join(cal.components)})")
    def z_of(it: ItemResult) -> np.ndarray:  # a result's combination z per sentence, as the default probability's
        return cal.base.transform(np.column_stack([it.sentence_scores[m] for m in cal.components]))

    z, y, n = [], [], []
    for it, labels in sentences:
        zs = z_of(it)
        z += [zs[i] for i, lab in enumerate(labels) if lab is not None]
        y += [lab for lab in labels if lab is not None]
        n += [it.num_samples for lab in labels if lab is not None]
    za = [z_of(it).mean() for it, _ in answers]
    report: dict = {"sentences_reviewed": len(y), "answers_reviewed": len(answers)}
    for level, attr, zz, yy, nn in (
            ("sentence", "sentence", z, y, n),
            ("answer", "response", za, [int(w) for _, w in answers], [it.num_samples for it, _ in answers])):
        zz, yy, nn = np.asarray(zz, float), np.asarray(yy, int), np.asarray(nn, float)
        if len(yy) < min_reviews or not 0 < yy.sum() < len(yy):
            report[f"{level}_kept"] = (f"{len(yy)} labelled, {int(yy.sum())} of them hallucinated: at least "
                                       f"{min_reviews} of both kinds are needed")
            continue
        report[level] = row = _before_after(getattr(cal, attr), zz, yy, nn, folds)
        row["worse"] = row["after_cv"]["brier"] >= row["before"]["brier"]
        setattr(cal, attr, _refit(getattr(cal, attr), zz, yy, nn, f"{len(yy)} labelled {level}s ({source})"))
    if require:
        _check_refitted(report, min_reviews)
    if "sentence" in report or "answer" in report:
        cal.fitted_on = f"{cal.fitted_on}; refitted from {source}"
    content["probability"] = cal.to_dict()
    content.pop("fit_report", None)  # it described the maps before the refit; the refit's report is returned
    return content, report


def _check_refitted(report: dict, min_reviews: int) -> None:
    """Nothing to write where no level could be measured (too few labels): an error saying how many there are."""
    if "sentence" not in report and "answer" not in report:
        raise ValueError(f"too few labels to refit: {report['sentences_reviewed']} sentences and "
                         f"{report['answers_reviewed']} answers; at least {min_reviews} of one level, with both "
                         "labels, are needed")


def describe_refit(report: dict) -> list[str]:
    """The lines ``calibrate --from-db`` / ``--labelled`` print: per level, ECE / Brier / AUROC before and after (CV),
    and whether it was refitted or kept (and why)."""
    lines = []
    for level in ("sentence", "answer"):
        kept = report.get(f"{level}_kept")
        if level in report:
            b, a = report[level]["before"], report[level]["after_cv"]
            lines.append(f"{level}s ({b['n']} labelled): ECE {b['ece']:.3f} -> {a['ece']:.3f}, Brier {b['brier']:.3f}"
                         f" -> {a['brier']:.3f}, AUROC {b['auroc']:.3f} -> {a['auroc']:.3f} (after: cross-validation); "
                         + ("refitted, but WORSE by cross-validation than the map it replaces: keep the base "
                            "calibration until there are more labels" if report[level]["worse"] else "refitted"))
        elif kept:
            lines.append(f"{level}s: kept as it was: {kept}")
    ens = report.get("ensemble") or {}
    if "skipped" in ens:
        lines.append(f"ensemble not refitted: {ens['skipped']}")
    elif ens:
        f = lambda d, k: f"{d[k]:.3f}" if k in d else "-"  # noqa: E731
        b, a = ens["before"], ens["after_cv"]
        was = f"probability {f(b['probability'], 'auroc')}" + (
            f", previous ensemble {f(b['ensemble'], 'auroc')}" if "ensemble" in b else "")
        w = ", ".join(f"{c} {x:.2f}" for c, x in ens["weights"].items())
        lines.append(f"ensemble ({ens['answers_reviewed']} answers): AUROC {was} -> {f(a, 'auroc')}, ECE "
                     f"{f(b['probability'], 'ece')} -> {f(a, 'ece')} (after: {ens['folds']}-fold cross-validation); "
                     f"weights {w}, flagged below {ens['threshold']:.3f}")
    return lines
