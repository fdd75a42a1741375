"""WikiBio GPT-3 (SelfCheckGPT's benchmark): loading, evaluation of results, and the paper's experiments.

- :func:`evaluate_results`: the paper's five figures for every method of a result set with labels.
- :func:`reproduce`: score the 238 passages with chosen methods; our figures beside Tables 3 and 6.
- :func:`ablation_samples`: Figure 7, passage Spearman (and Figure 8, NonFact* AUC-PR) against the number of samples.
- :func:`ablation_reference`: Table 4, the WikiBio reference passage in place of the samples.
- :func:`sweep_layers`: BERTScore with every layer of an encoder from one forward pass (to choose the layer).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..io import pick, read_records
from ..pipeline import Detector
from ..types import Record, Results
from .metrics import LabelledScores, evaluate_scores, evaluate_scores_random_ties, random_baseline

WIKIBIO_FILE = "wikibio/wiki_bio_gpt3_hallucination.json"


def default_data_dir() -> Path:
    """``$HALLUSCOPE_DATA``, else ``../shared/data`` beside the working directory or beside this checkout."""
    env = os.environ.get("HALLUSCOPE_DATA")
    if env:
        return Path(env)
    for base in (Path.cwd(), Path(__file__).resolve().parents[3]):
        cand = (base / ".." / "shared" / "data").resolve()
        if cand.is_dir():
            return cand
    return (Path.cwd() / ".." / "shared" / "data").resolve()


def load_wikibio(data_dir: str | Path | None = None, passages: Sequence[int] | None = None) -> list[Record]:
    """The 238 WikiBio records (file order), optionally a subset by position. Prompts are attached when
    ``wikibio/prompts.jsonl`` is present."""
    d = Path(data_dir) if data_dir else default_data_dir()
    path = d / WIKIBIO_FILE
    if not path.is_file():
        raise FileNotFoundError(f"WikiBio data not found at {path} (set --data or HALLUSCOPE_DATA)")
    recs, errs = read_records(path)
    if errs:
        raise ValueError(f"WikiBio file has invalid records: {errs[0]}")
    prompts = d / "wikibio" / "prompts.jsonl"
    if prompts.is_file():
        import json

        by_id = {}
        for line in prompts.read_text().splitlines():
            if line.strip():
                o = json.loads(line)
                by_id[str(o["wiki_bio_test_idx"])] = o["prompt"]
        for r in recs:
            r.prompt = by_id.get(r.id, r.prompt)
    if passages is not None:
        recs = pick(recs, passages, "the WikiBio passages")
    return recs


def passages_by_id(items: list, passages: list[Record], what: str = "the results", asked: str = "",
                   partial: bool = False) -> list:
    """The results of the WikiBio ``passages`` (e.g. :func:`load_wikibio` of 0-118, the development half), found by
    their ids, not by their place in a results file that may hold other passages, so a fit never says "passages
    0-118" of other data. An error if any is missing (``partial``: only if all are)."""
    ids = [r.id for r in passages]
    by_id = {it.id: it for it in items}
    got = [by_id[i] for i in ids if i in by_id]
    if len(got) < len(ids) and not (partial and got):
        raise ValueError(f"{what} holds {len(got)} of the {len(ids)} WikiBio passages {asked or 'asked for'} (found "
                         "by id): score them first (`halluscope reproduce wikibio --passages ... -o FILE`), or ask "
                         "for the passages the file holds" + ("; your own labelled answers, not WikiBio's, refit the "
                                                              "default probability with `halluscope calibrate "
                                                              "--labelled FILE`" if not got else ""))
    return got


def labelled_scores(results: Results, method: str) -> LabelledScores:
    items = [it for it in results.items if it.labels is not None]
    if not items:
        raise ValueError("these results carry no labels: evaluation needs labelled records")
    for where in ("sentence_scores", "passage_scores"):  # in every record or none (a response method: no sentences)
        lacking = [it.id for it in items if method not in getattr(it, where)]
        if lacking and len(lacking) < len(items):
            raise ValueError(f"{method}: no {where.split('_')[0]} scores in {len(lacking)} of the {len(items)} "
                             f"labelled records (e.g. {', '.join(map(str, lacking[:3]))}): score them, or merge "
                             "results of the same records")
    labels = np.concatenate([np.asarray(it.labels, float) for it in items])
    scores = np.concatenate([np.asarray(it.sentence_scores.get(method, [np.nan] * len(it.labels)), float)
                             for it in items])
    passage = np.concatenate([[k] * len(it.labels) for k, it in enumerate(items)]).astype(int)
    pl = np.array([np.mean(it.labels) for it in items])
    ps = np.array([it.passage_scores.get(method, np.nan) for it in items], float)
    return LabelledScores(labels, scores, passage, pl, ps)


def evaluate_results(
    results: Results, methods: Sequence[str] | None = None, ties: str = "as-is"
) -> dict[str, dict[str, float]]:
    """Figures (percent) for each method, plus the ``random`` baseline row; a response-level method gets its passage
    figures (it has no sentence scores), and each row counts the sentences and passages it was computed over (a
    NaN score is left out). ``ties="random"``: sentence AUC-PR with tied scores in random order (mean of 20 draws),
    see :func:`evaluate_scores_random_ties`."""
    if ties not in ("as-is", "random"):
        raise ValueError("ties must be 'as-is' or 'random'")
    methods = list(methods or results.methods or (results.items[0].sentence_scores if results.items else []))
    first = next((it for it in results.items if it.labels is not None), None)
    methods = [m for m in methods if first is None or m in first.sentence_scores or m in first.passage_scores]
    out: dict[str, dict[str, float]] = {}
    for m in methods:
        ls = labelled_scores(results, m)
        out[m] = evaluate_scores(ls) if ties == "as-is" else evaluate_scores_random_ties(ls)
        if first is not None and m not in first.sentence_scores:
            out[m]["level"] = "response"  # passage figures only
    if methods:
        out["random"] = random_baseline(labelled_scores(results, methods[0]))
    return out


def tie_effects(results: Results, figures: dict[str, dict], points: float = 1.0) -> dict[str, dict]:
    """The methods of ``figures`` (:func:`evaluate_results`' rows, as-is ties) whose sentence AUC-PR is ``points``
    or more higher as it is than with their tied scores in random order (the paper's trapezoidal AUC-PR flatters a
    score with few distinct values, e.g. a share of the samples): per method, its number of distinct sentence
    scores and the three figures with random ties."""
    from .metrics import evaluate_scores_random_ties

    out = {}
    for m, as_is in figures.items():
        if m == "random":
            continue
        ls = labelled_scores(results, m)
        s = ls.sent_scores[~np.isnan(ls.sent_scores)]
        distinct = len(np.unique(s))
        if distinct == len(s):
            continue
        rand = evaluate_scores_random_ties(ls)
        cols = ("nonfact", "nonfact_star", "factual")
        if any(as_is[c] - rand[c] >= points for c in cols if np.isfinite(as_is[c])):
            out[m] = {"distinct": distinct, "sentences": int(len(s)), **{c: rand[c] for c in cols}}
    return out


def evaluate_all(results: Results, methods: Sequence[str] | None = None, ties: str = "as-is") -> dict:
    """Every figure ``halluscope evaluate`` shows: :func:`evaluate_results` over the records with sentence labels,
    with ``calibration`` (ECE, Brier of the default probability against them) when it was scored, and ``answers``
    (:func:`~halluscope.evaluation.response_metrics.answer_figures`) over the records graded as a whole."""
    from ..calibration import NAME, report
    from .response_metrics import answer_figures

    labelled = any(it.labels is not None for it in results.items)
    if not labelled and not any(it.correct is not None for it in results.items):
        raise ValueError("these results carry neither sentence labels nor answer grades ('correct'): evaluation "
                         "needs one of them")
    out: dict = evaluate_results(results, methods, ties) if labelled else {}
    if labelled and ties == "as-is":
        flattered = tie_effects(results, out)
        if flattered:
            out["ties"] = flattered
    if labelled and NAME in results.items[0].sentence_scores:
        rep = report(results).get("sentences")
        if rep:
            out["calibration"] = {k: rep[k] for k in ("n", "ece", "brier", "bins")}
    names = list(methods or results.methods or (results.items[0].passage_scores if results.items else []))
    answers = answer_figures(results, names)
    if answers:
        out["answers"] = answers
    return out


def reproduce(
    methods: Sequence[str] | str | None = None,
    data_dir: str | Path | None = None,
    passages: Sequence[int] | None = None,
    detector: Detector | None = None,
    output: str | Path | None = None,
    resume: bool = False,
    progress: bool = False,
    evidence: Callable[[Record], Sequence[str]] | None = None,
) -> tuple[dict[str, dict[str, float]], Results]:
    """Score WikiBio with the chosen methods and evaluate (``evidence``: e.g. only the first k samples)."""
    det = detector or Detector(methods=methods)
    recs = load_wikibio(data_dir, passages)
    res = det.score(recs, output=output, resume=resume, progress=progress, evidence=evidence)
    return evaluate_results(res, det.methods), res


def ablation_samples(
    methods: Sequence[str] | str,
    ks: Sequence[int] = tuple(range(1, 21)),
    data_dir: str | Path | None = None,
    passages: Sequence[int] | None = None,
    detector: Detector | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, dict[int, dict[str, float]]]:
    """Figures 7 and 8: each method scored with the first k samples, for each k. Models are shared across k, so an
    embedding or NLI pair is computed once however many k use it."""
    det = detector or Detector(methods=methods)
    recs = load_wikibio(data_dir, passages)
    most = min(len(r.samples) for r in recs)
    if any(k < 1 or k > most for k in ks):
        raise ValueError(f"numbers of samples: each from 1 to {most} (the passages' samples), got {list(ks)}")
    out: dict[str, dict[int, dict[str, float]]] = {m: {} for m in det.methods}
    for k in ks:
        res = det.score(recs, evidence=lambda r, k=k: r.samples[:k])
        ev = evaluate_results(res, det.methods)
        for m in det.methods:
            out[m][k] = ev[m]
        if progress:
            progress(k)
    return out


def ablation_reference(
    methods: Sequence[str] | str,
    data_dir: str | Path | None = None,
    passages: Sequence[int] | None = None,
    detector: Detector | None = None,
    progress: bool = False,
) -> dict[str, dict[str, dict[str, float]]]:
    """Table 4: each method with the samples, and with the WikiBio reference passage as the only evidence
    (``progress``: the detector's bar for each of the two passes)."""
    det = detector or Detector(methods=methods)
    recs = load_wikibio(data_dir, passages)
    with_samples = evaluate_results(det.score(recs, progress=progress), det.methods)
    with_ref = evaluate_results(det.score(recs, evidence=lambda r: [r.reference] if r.reference else [],
                                          progress=progress), det.methods)
    return {m: {"samples": with_samples[m], "reference": with_ref[m]} for m in det.methods}


def sweep_layers(
    encoder: str | None = None,
    precision: str = "auto",
    data_dir: str | Path | None = None,
    passages: Sequence[int] | None = None,
    chunk_size: int = 16,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, dict[str, float]]:
    """BERTScore figures for every layer of ``encoder``, keyed ``layer{k}``. All layers come from the same forward
    pass of each sentence, so the sweep costs one BERTScore run (plus the cheap similarity products per layer)."""
    from ..models.encoder import Encoder
    from ..scorers.base import PreparedItem
    from ..scorers.bertscore import BERTScoreScorer
    from ..types import ItemResult

    enc = Encoder(encoder, precision=precision, extra_layers="all")
    scorers = [BERTScoreScorer(enc, layer=k, name=f"layer{k}") for k in range(1, enc.num_layers + 1)]
    recs = load_wikibio(data_dir, passages)
    items: list[ItemResult] = []
    if progress:  # the start: a rate and an ETA are measured from here
        progress(0, len(recs))
    for start in range(0, len(recs), chunk_size):
        chunk = [PreparedItem.from_record(r) for r in recs[start : start + chunk_size]]
        table = {}
        for sc in scorers:
            table.update(sc.score(chunk))
        for k, it in enumerate(chunk):
            res = ItemResult(id=it.id, sentences=list(it.sentences), labels=it.record.labels,
                             response=it.record.response, num_samples=len(it.evidence))
            for name, scores in table.items():
                res.sentence_scores[name] = [float(x) for x in scores[k].sentence]
                res.passage_scores[name] = float(scores[k].passage)
            items.append(res)
        enc.clear_cache()  # sentences are not shared across passages; keep memory flat
        if progress:
            progress(len(items), len(recs))
    names = [sc.name for sc in scorers]
    return evaluate_results(Results(items=items, methods=names), names)


def load_results(path, with_=None, combine: str | None = None, positions=None, methods=None, learned=None,
                 calibration_file=None):
    """A results file ready for :func:`evaluate_results` (``(results, False)``), or ``(None, True)`` when ``path``
    holds records to score: merged with the ``with_`` files by id, the combination recomputed from ``combine``
    (normalized over these records, as the paper does), restricted to ``positions``, ``learned`` applied when asked
    for and absent, the default probability recomputed with ``calibration_file`` when given, and only ``methods``
    kept when given."""
    from ..io import keep_methods, merge_results, read_results
    from ..scorers import combination

    p = Path(path)
    if not p.is_file() or p.suffix.lower() not in (".json", ".jsonl"):  # a folder, a glob, a CSV or Parquet file
        return None, True
    head = p.read_bytes()[:4000].decode("utf-8", "replace")
    if '"sentence_scores"' not in head:
        return None, True
    res = merge_results([read_results(path), *(read_results(p) for p in with_ or [])])
    if combine:
        comps = [m.strip() for m in combine.split(",") if m.strip()]
        missing = [m for m in comps if res.items and m not in res.items[0].sentence_scores]
        if missing:
            raise ValueError(f"--combine: no scores for {missing} in these results")
        combination.apply(res.items, comps, "run")
        res.methods = list(dict.fromkeys([*res.methods, "combination"]))
    if positions is not None:
        res.items = pick(res.items, positions, str(path))
    if methods and "learned" in methods and res.items and "learned" not in res.items[0].sentence_scores:
        from ..scorers.learned import LearnedCombination

        LearnedCombination.load(learned).apply(res.items)
    if calibration_file:  # before the methods are picked: "probability" may be asked for and recomputed here
        from .. import calibration

        cal = calibration.load(calibration_file)
        calibration.apply(res.items, cal)
        res.methods = list(dict.fromkeys([*res.methods, calibration.NAME]))
        res.settings["probability"] = cal.to_dict()  # which calibration the figures are of: said in the output
    if methods:
        keep_methods(res, methods)
    return res, False
