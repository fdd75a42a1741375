"""Does graded data support an answer-level "consensus" rule? A check of one design, on answers of two sources.

Issue 14's clear short answers ("Sydney is the capital of Australia." against ten samples that name Canberra) ask
the default answer probability for >= 0.8 when every sample contradicts the answer, and <= 0.2 when every sample
supports it. The default gives 0.74-0.77 and 0.18-0.29 (EVALUATION.md, issue 14). One argument would reach the
targets without a fit: where the samples agree on one answer, that answer is right with some probability q, and an
answer that contradicts it cannot be right with it. This script measures that argument on graded answers:

- samples agree: the largest group of samples, by ``mutual`` entailment (P(entail) > 0.5 both ways: the
  clustering of semantic entropy) or by ``agree`` (mean contradiction of the two directions < 0.5: the pairwise
  non-contradiction of uqlm, Eq. 5-6), built greedily (``scorers.graph.semantic_sets``); a consensus when it holds
  more than half of the N samples (k > N / 2);
- the answer's relation to it: (e, n, c), the mean over the group of the 3-way NLI with the sample as premise and the
  answer as hypothesis (the direction of ``nli_support``);
- the rule: P = e (1 - q) + c (q + (1 - q) p0) + n p0, q = (k + 1) / (N + 2) (Laplace's rule of succession), p0 the
  packaged probability; no consensus: P = p0. ``contradiction only`` keeps the c term and leaves e to p0.

Printed per set: the packaged probability's AUROC / ECE / Brier against the grades, the same for both rules and both
groupings, and the answers a consensus entails (e > 0.5) or contradicts (c > 0.5), unanimous ones (k = N, e or c >
0.8) apart, with their share wrong and mean p0. Sets: SAC3 NQ-Open (gpt-3.5, 250 answers, 10 samples), the
QA-local answers of ``reports/qa_local`` (Gemma-3-270M, 50 per benchmark, 5 samples) and the issue-14 answers.

    .venv/bin/python benchmarks/consensus_check.py [--data ../shared/data] [--limit N] [-o results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GROUPINGS = ("mutual", "agree")


def _sets(data: str | None, limit: int | None):
    """(name, records, wrong by id) for every set."""
    from halluscope.calibration import graded_records
    from halluscope.types import Record

    sys.path.insert(0, str(ROOT / "tests"))
    from test_engine import CLEAR

    clear, w = [], {}
    for i, (bad, good, samples) in enumerate(CLEAR):
        clear += [Record(response=bad, samples=samples * 2, id=f"wrong{i}"),
                  Record(response=good, samples=samples * 2, id=f"right{i}")]
        w[f"wrong{i}"], w[f"right{i}"] = True, False
    yield "issue 14 clear answers", clear, w
    recs, wrong = graded_records(data, limit)
    yield "SAC3 NQ-Open", recs, wrong
    for b in ("popqa", "nq_open", "arc", "csqa"):
        items = [json.loads(x) for x in (ROOT / f"reports/qa_local/items_{b}.jsonl").open()][:limit]
        recs = [Record(response=d.get("response", d.get("answer")) or "(empty)", samples=[s for s in d["samples"] if s.strip()] or
                       ["(empty)"], id=f"{b}{i}", prompt=d["question"]) for i, d in enumerate(items)]
        yield f"QA-local {b}", recs, {r.id: not d["correct"] for r, d in zip(recs, items)}


def relations(nli, answer: str, samples: list[str]) -> dict:
    """The NLI the rule reads: every ordered pair of samples, and each sample against the answer (one batch)."""
    u = list(dict.fromkeys(samples))
    nli.probs([(a, b) for a in u for b in u if a != b] + [(s, answer) for s in u if s != answer])
    p = lambda a, b: [1.0, 0.0, 0.0] if a == b else nli.probs([(a, b)])[0].tolist()  # noqa: E731
    return {"SS": [[p(a, b) for b in samples] for a in samples], "SY": [p(s, answer) for s in samples]}


def consensus(rel: dict, grouping: str):
    """(k, N, e, n, c) of the majority group, or None when no group holds more than half the samples."""
    from halluscope.scorers.graph import semantic_sets

    SS = np.array(rel["SS"])
    if grouping == "mutual":
        same = lambda i, r: SS[i, r, 0] > 0.5 and SS[r, i, 0] > 0.5  # noqa: E731
    else:
        same = lambda i, r: SS[i, r, 2] + SS[r, i, 2] < 1.0  # noqa: E731
    labels = np.array(semantic_sets(len(SS), same))
    group = labels == np.bincount(labels).argmax()
    k, N = int(group.sum()), len(SS)
    if 2 * k <= N:
        return None
    e, n, c = np.array(rel["SY"])[group].mean(axis=0)
    return k, N, float(e), float(n), float(c)


def rule(p0: float, cons, contradiction_only: bool = False) -> float:
    if cons is None:
        return p0
    k, N, e, n, c = cons
    q = (k + 1) / (N + 2)
    if contradiction_only:
        return c * (q + (1 - q) * p0) + (1 - c) * p0
    return e * (1 - q) + c * (q + (1 - q) * p0) + n * p0


def _figures(p, y) -> dict:
    from sklearn.metrics import roc_auc_score

    from halluscope.evaluation.metrics import calibration

    cal = calibration(np.asarray(p), np.asarray(y))
    auc = float(roc_auc_score(y, p)) if 0 < sum(y) < len(y) else float("nan")
    return {"auroc": auc, "ece": cal["ece"], "brier": cal["brier"]}


def _cases(rows, cons) -> dict:
    out = {}
    tests = {"entailed": lambda t: t[2] > 0.5, "contradicted": lambda t: t[4] > 0.5,
             "unanimous, entailed > 0.8": lambda t: t[0] == t[1] and t[2] > 0.8,
             "unanimous, contradicted > 0.8": lambda t: t[0] == t[1] and t[4] > 0.8}
    for name, f in tests.items():
        s = [(r["wrong"], r["p0"]) for r, t in zip(rows, cons) if t is not None and f(t)]
        out[name] = {"n": len(s), "wrong": float(np.mean([w for w, _ in s])) if s else None,
                     "p0": float(np.mean([p for _, p in s])) if s else None}
    return out


def check(name: str, records, wrong, det) -> dict:
    res = det.score(records)
    nli = det.nli_model()
    rows = [{"id": r.id, "wrong": bool(wrong[r.id]), "p0": it.passage_scores["probability"],
             **relations(nli, r.response, list(r.samples))} for it, r in zip(res.items, records)]
    y = [int(r["wrong"]) for r in rows]
    out = {"set": name, "n": len(rows), "wrong": float(np.mean(y)),
           "packaged": _figures([r["p0"] for r in rows], y)}
    for g in GROUPINGS:
        cons = [consensus(r, g) for r in rows]
        out[g] = {"consensus": sum(c is not None for c in cons),
                  "rule": _figures([rule(r["p0"], c) for r, c in zip(rows, cons)], y),
                  "contradiction only": _figures([rule(r["p0"], c, True) for r, c in zip(rows, cons)], y),
                  "cases": _cases(rows, cons)}
        if name.startswith("issue 14"):
            out[g]["probabilities"] = {r["id"]: [round(r["p0"], 3), round(rule(r["p0"], c), 3)]
                                       for r, c in zip(rows, cons)}
    return out


def _print(o: dict) -> None:
    f = lambda d: f"AUROC {d['auroc']:.3f}  ECE {d['ece']:.3f}  Brier {d['brier']:.4f}"  # noqa: E731
    print(f"\n{o['set']}: {o['n']} answers, {o['wrong']:.0%} wrong\n  packaged probability      {f(o['packaged'])}")
    for g in GROUPINGS:
        d = o[g]
        print(f"  {g:6s} rule               {f(d['rule'])}   ({d['consensus']} with a consensus)")
        print(f"  {g:6s} contradiction only {f(d['contradiction only'])}")
        for case, c in d["cases"].items():
            if c["n"]:
                print(f"    {case:32s} n {c['n']:3d}  wrong {c['wrong']:.2f}  mean packaged p {c['p0']:.2f}")
        if "probabilities" in d:
            print("    packaged -> rule: " + ", ".join(f"{k} {a:.2f} -> {b:.2f}" for k, (a, b) in
                                                 d["probabilities"].items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None, help="the shared data folder (default ../shared/data)")
    ap.add_argument("--limit", type=int, default=None, help="answers per set (default: all)")
    ap.add_argument("-o", "--output", default=str(ROOT / "benchmarks/results/consensus_check.json"))
    args = ap.parse_args()
    from halluscope.pipeline import Detector

    det = Detector(methods=["ngram1_max_rel", "bertscore", "nli_support", "entity", "probability"])
    out = []
    for name, records, wrong in _sets(args.data, args.limit):
        out.append(check(name, records, wrong, det))
        _print(out[-1])
        Path(args.output).write_text(json.dumps(out, indent=1) + "\n")  # written as it goes
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
