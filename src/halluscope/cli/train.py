"""Training commands: train-learned, train-nli, evaluate-nli."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..evaluation.nli_bench import SETS as NLI_SETS
from ..io import json_safe
from .common import (
    fails,
    app,
    console,
    err,
    PrecisionOpt,
    NliOpt,
    NliPrecisionOpt,
    DataOpt,
    _detector,
    _bar,
    _parse_range,
    say,
)
from .render import _table


@app.command("train-learned")
@fails
def train_learned(
    results: Optional[list[Path]] = typer.Argument(None, help="Scored WikiBio results (.jsonl/.json from "
                                                   "`reproduce wikibio -o`) holding the components, merged by record "
                                                   "id when several; default: score the passages now."),
    components: str = typer.Option("ngram1_max,bertscore,nli", "--components", help="Component methods (the "
                                   "default is the packaged file's)."),
    passages: str = typer.Option("0-118", "--passages", help="Training passages: positions in the WikiBio file, "
                                 "found in the results by id in the WikiBio data (default: the development half; "
                                 "never train on what you report)."),
    c: float = typer.Option(1.0, "--C", help="Inverse L2 regularization strength of the logistic regression."),
    folds: int = typer.Option(5, "--folds", help="Cross-validation folds (grouped by passage) for the printed check."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the JSON (use it with --learned; the "
                                "packaged file is src/halluscope/data/learned.json in a checkout)."),
    data: Optional[Path] = DataOpt,
    precision: str = PrecisionOpt,
    nli: Optional[str] = NliOpt,
    as_json: bool = typer.Option(False, "--json"),
):
    """Train the `learned` logistic combination on labelled WikiBio passages; print cross-validated figures."""
    from ..evaluation.wikibio import evaluate_results, load_wikibio, passages_by_id
    from ..io import merge_results, read_results
    from ..scorers.learned import LearnedCombination, cross_validate

    comps = [m.strip() for m in components.split(",") if m.strip()]
    positions = _parse_range(passages)
    if results:
        res = merge_results([read_results(p) for p in results])
        res.items = passages_by_id(res.items, load_wikibio(data, positions or list(range(119))),
                                   ", ".join(map(str, results)), passages)
    else:
        res = _detector(",".join(comps), None, None, nli, precision=precision).score(load_wikibio(data, positions),
                                                                                    progress=True)
    model = LearnedCombination.fit(res, comps, C=c, trained_on=f"WikiBio GPT-3 passages {passages}")
    figures = evaluate_results(cross_validate(res, comps, c, folds), comps + ["learned"])
    model.save(output)
    out = output
    if as_json:
        print(json.dumps(json_safe({"weights": dict(zip(comps, model.weights)), "bias": model.bias,
                                      "cross_validated": figures}), indent=1))
    else:
        console.print("weights (standardized): " + ", ".join(f"{m}={w:+.3f}" for m, w in zip(comps, model.weights))
                      + f", bias={model.bias:+.3f}")
        console.print(_table(figures, title=f"{folds}-fold cross-validation on passages {passages} (learned = "
                             f"out-of-fold predictions)"))
    err.print(f"written to {out}")


@app.command("evaluate-nli")
@fails
def evaluate_nli_cmd(
    nli: Optional[str] = NliOpt,
    data: Optional[Path] = DataOpt,
    limit: Optional[int] = typer.Option(1000, "--limit", help="Pairs per set, evenly spread (0 = all)."),
    nli_precision: str = NliPrecisionOpt,
    sets: Optional[str] = typer.Option(None, "--sets", help="Comma-separated subset of the sets: "
                                       f"{', '.join(NLI_SETS)} (default: all)."),
    as_json: bool = typer.Option(False, "--json"),
):
    """Accuracy of an NLI model on MNLI dev-matched, ANLI R1-R3 test, XNLI-en test and SNLI test: 3-way where it is
    3-way, and contradiction-vs-not for every model (the decision non-contradiction and SelfCheck-NLI rest on)."""
    from ..evaluation.nli_bench import SETS, evaluate_nli
    from ..models.nli import load_nli

    model = load_nli(nli, **({} if nli_precision == "auto" else {"precision": nli_precision}))
    model.progress = _bar
    chosen = tuple(x.strip() for x in sets.split(",")) if sets else tuple(SETS)
    unknown = [x for x in chosen if x not in SETS]
    if unknown:
        raise ValueError(f"unknown sets {unknown}; choose from {', '.join(SETS)}")
    out = evaluate_nli(model, sets=chosen, data_dir=data, limit=limit or None)
    if as_json:
        print(json.dumps(out, indent=1))
        return
    t = Table(title=f"NLI model {model.name}: accuracy (%)")
    for c in ("set", "n", "3-way", "contradiction vs not", "macro-F1", "majority class"):
        t.add_column(c)
    for name, r in out.items():
        t.add_row(name, str(r["n"]), f"{100 * r['accuracy_3way']:.1f}" if "accuracy_3way" in r else "-",
                  f"{100 * r['accuracy_contradiction_vs_not']:.1f}", f"{100 * r['macro_f1_contradiction_vs_not']:.1f}",
                  f"{100 * r['majority_contradiction_vs_not']:.1f}")
    console.print(t)


def _package_nli(model: Path, out: Optional[Path], evaluation: Optional[Path]) -> None:
    """``train-nli --package``: the model and its card to ``out``, else into the installed package."""
    from ..models.nli_train import package_model

    dest = package_model(model, out, evaluation=json.loads(evaluation.read_text()) if evaluation else None)
    print(dest)  # stdout: for a script
    say(f"{dest} (the model and its card{'' if out else '; the default NLI model of this installation now'})",
        "written:", "green")


@app.command("train-nli")
@fails
def train_nli_cmd(
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output folder: mixture, checkpoints, and model/ at "
                                       "the end; with --package, the folder the model and its card go to."),
    data: Optional[Path] = typer.Option(None, "--data", help="The NLI data folder (default: nli/ in "
                                      "$HALLUSCOPE_DATA or ../shared/data)."),
    base: str = typer.Option("minilm", "--base", help="Base encoder: 'minilm' or a Hugging Face id / local path."),
    seed: int = typer.Option(0, "--seed"),
    epochs: float = typer.Option(2.0, "--epochs"),
    batch_size: int = typer.Option(32, "--batch-size"),
    lr: float = typer.Option(6e-5, "--lr"),
    max_length: int = typer.Option(128, "--max-length"),
    synthetic: int = typer.Option(15_000, "--synthetic", help="Synthetic sentence-vs-evidence pairs."),
    scale: float = typer.Option(1.0, "--scale", help="Shrink every source (e.g. 0.01 for a smoke test)."),
    eval_limit: int = typer.Option(1000, "--eval-limit", help="MNLI dev-matched pairs scored at the end (0 = none)."),
    stop_after: Optional[float] = typer.Option(None, "--stop-after-minutes", help="Checkpoint and stop (resumable)."),
    train_embeddings: bool = typer.Option(False, "--train-embeddings", help="Train the word embeddings too "
                                          "(frozen by default: faster on a CPU)."),
    paired: bool = typer.Option(False, "--paired", help="Each synthetic contradiction with its minimal pair: the "
                                "same evidence and the unchanged sentence as entailment."),
    hard_swaps: bool = typer.Option(False, "--hard-swaps", help="Half of the synthetic entity swaps take a near "
                                    "entity of the same type (Canberra -> Sydney) instead of a random one."),
    claims: int = typer.Option(0, "--claims", help="Short-claim pairs built from FEVER's claims (a claim, and it "
                               "with one fact changed, against 1-3 claims holding it)."),
    claim_twins: bool = typer.Option(False, "--claim-twins", help="With --claims: each minimal pair also with the "
                                     "claim less detailed (date -> year, full name -> surname) as entailment."),
    claim_objects: bool = typer.Option(False, "--claim-objects", help="With --claims: never swap the entity that "
                                       "opens a claim (its subject) or one inside a title: 'X is a producer' -> "
                                       "'Y is a producer' is no contradiction."),
    details: int = typer.Option(0, "--details", help="Added-detail pairs: a sentence against itself plus the next "
                                "one, or cut before its last clause, as neutral; the reverse as entailment."),
    variants: int = typer.Option(0, "--variants", help="Surface-variant pairs: the same fact written another way "
                                 "(Bob / Robert, in 1937 / in the 1930s, Jan. / January, 4,500 / 4500) as entailment, "
                                 "each with a changed fact at the same place as contradiction."),
    mixture: Optional[Path] = typer.Option(None, "--mixture", help="Train on this pairs file (another run's "
                                           "OUT/mixture.jsonl, or it gzipped or as xz, to carry to a GPU machine) instead of "
                                           "building the mixture from --data; --data then only serves the evaluation."),
    device: str = typer.Option("auto", "--device", help="auto (a CUDA GPU where torch sees one, else the CPU), cpu "
                               "or cuda."),
    part_mb: float = typer.Option(0, "--part-mb", help="Also write OUT/model_parts: the weights in files of at "
                                  "most this many MB, to move them off a leased machine; --package joins them."),
    package: Optional[Path] = typer.Option(None, "--package", help="Instead of training: copy this exported model "
                                           "folder (parts joined) and write its model card, to --out; without --out "
                                           "into the installed package, replacing its default NLI model."),
    evaluation: Optional[Path] = typer.Option(None, "--evaluation", help="With --package: the JSON of "
                                              "`halluscope evaluate-nli --json` for the card's metrics table."),
):
    """Train halluscope's own 3-way NLI cross-encoder (entailment / neutral / contradiction) on data/nli plus synthetic
    sentence-vs-evidence pairs, evaluate it and export it to OUT/model (a stopped run goes on with the same --out)."""
    opts = {k: v for k, v in locals().items() if k not in ("out", "data", "package", "evaluation", "stop_after")}
    from ..evaluation.wikibio import default_data_dir
    from ..models.nli_train import train_nli

    if package:
        return _package_nli(package, out, evaluation)
    if out is None:
        say("--out is required (the folder the training writes to)")
        raise typer.Exit(2)
    rec = train_nli(data or Path(default_data_dir()) / "nli", out, stop_after_minutes=stop_after,
                    log=lambda m: err.print(m, highlight=False), **opts)  # the other options under their own names
    print(json.dumps(rec.get("metrics", rec), indent=1))

