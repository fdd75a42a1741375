"""The ``halluscope`` command line.

    halluscope score                      # the bundled examples, default methods, a coloured view
    halluscope score answers.jsonl -o results.jsonl --resume
    halluscope evaluate labelled.jsonl --methods ngram1_max,bertscore
    halluscope reproduce wikibio --methods ngram --json
    halluscope reproduce samples --methods ngram1_max,bertscore     # Figure 7
    halluscope reproduce reference --methods ngram1_max,bertscore   # Table 4
    halluscope methods
"""

from __future__ import annotations

import json
import math
import sys
from importlib import resources
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .evaluation.metrics import COLUMNS
from .types import RecordError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="Zero-resource, black-box hallucination detection: score each sentence of an LLM answer by its "
    "consistency with stochastic samples of the same prompt (SelfCheckGPT). Higher score = more likely hallucinated.",
)
reproduce_app = typer.Typer(help="The SelfCheckGPT paper's experiments on WikiBio GPT-3, beside the paper's figures.")
app.add_typer(reproduce_app, name="reproduce")
console = Console()
err = Console(stderr=True)

MethodsOpt = typer.Option(None, "--methods", "-m", help="Comma-separated method names ('ngram' = every n-gram "
                          "variant, 'all' = everything); see `halluscope methods`.")
EncoderOpt = typer.Option(None, "--encoder", help="BERTScore encoder: Hugging Face id, local path, or 'minilm'.")
LayerOpt = typer.Option(None, "--layer", help="Encoder layer for BERTScore (default: the last).")
NliOpt = typer.Option(None, "--nli", help="NLI model: 'aegis' (offline default) or a Hugging Face id / local path.")
DataOpt = typer.Option(None, "--data", help="Data folder holding wikibio/ (default: $HALLUSCOPE_DATA or ../shared/data).")


def example_path() -> Path:
    return Path(str(resources.files("halluscope") / "data" / "examples.jsonl"))


def _detector(methods, encoder, layer, nli, baseline=None, combine=None):
    from .pipeline import Detector

    try:
        return Detector(methods=methods, encoder=encoder, layer=layer, nli=nli, bertscore_baseline=baseline,
                        combine=combine)
    except ValueError as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)


def _shade(score: float, bounded: bool) -> str:
    if not math.isfinite(score):
        return "bold white on red"
    x = score if bounded else 1.0 / (1.0 + math.exp(-score))
    x = min(max(x, 0.0), 1.0)
    r, g = int(255 * min(1.0, 2 * x)), int(255 * min(1.0, 2 * (1 - x)))
    return f"black on rgb({r},{g},90)"


def show_results(results, primary: str | None = None) -> None:
    """A compact coloured view: each sentence shaded by its score (green = consistent, red = likely hallucinated)."""
    infos = results.settings.get("methods", {})
    primary = primary or ("combination" if "combination" in results.methods else results.methods[0])
    bounded = bool(infos.get(primary, {}).get("bounded", True))
    for it in results.items:
        head = Text(f"{it.id}", style="bold")
        head.append("  passage: " + "  ".join(f"{m}={v:.3f}" for m, v in it.passage_scores.items()), style="dim")
        console.print(head)
        body = Text()
        for i, s in enumerate(it.sentences):
            sc = it.sentence_scores[primary][i]
            body.append(s, style=_shade(sc, bounded))
            body.append(f" [{sc:.2f}]", style="dim")
            if it.labels is not None:
                body.append(f"{{label {it.labels[i]:g}}}", style="dim")
            body.append(" ")
        console.print(body)
        console.print()
    console.print(f"[dim]shading: {primary} ({'bounded [0,1]' if bounded else 'z-score, logistic'}); "
                  f"{len(results.items)} records scored in {results.settings.get('seconds', 0):.1f}s[/]")


def _read_records_or_exit(path: Path):
    """Read records; an unreadable file ends the command (exit 2), bad records are reported and skipped."""
    from .io import read_records

    try:
        recs, errors = read_records(path)
    except RecordError as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    for e in errors:
        err.print(f"[yellow]skipped[/] {e}")
    return recs, errors


@app.command()
def score(
    path: Optional[Path] = typer.Argument(None, help="Records (.jsonl, .json, .csv); default: the bundled examples."),
    methods: Optional[str] = MethodsOpt,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write results (.jsonl/.json/.csv/.parquet)."
                                          " A .jsonl output is written record by record as the run goes."),
    resume: bool = typer.Option(False, "--resume", help="Skip records already in the .jsonl --output."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of the coloured view."),
    encoder: Optional[str] = EncoderOpt,
    layer: Optional[int] = LayerOpt,
    nli: Optional[str] = NliOpt,
    baseline: Optional[Path] = typer.Option(None, "--bertscore-baseline", help="bert_score baseline file (rescaling)."),
    combine: Optional[str] = typer.Option(None, "--combine", help="Methods averaged by 'combination'."),
):
    """Score every sentence of each record's response against its samples, and each passage as a whole."""
    from .io import write_results

    recs, errors = _read_records_or_exit(path or example_path())
    det = _detector(methods, encoder, layer, nli, str(baseline) if baseline else None, combine)
    stream = output if output is not None and output.suffix.lower() == ".jsonl" else None
    res = det.score(recs, output=stream, resume=resume, progress=sys.stderr.isatty())
    res.errors = errors + res.errors
    if output is not None and stream is None:
        write_results(res, output)
    if as_json:
        print(json.dumps(res.to_dict(), indent=1))
    else:
        show_results(res)
    if output is not None:
        err.print(f"results written to {output}")
    if not res.items:
        raise typer.Exit(1)


def _table(rows: dict[str, dict[str, float]], paper: dict[str, dict[str, float]] | None = None, title: str = ""):
    t = Table(title=title, show_lines=False)
    t.add_column("method")
    for c in COLUMNS:
        t.add_column(c, justify="right")
    for m, r in rows.items():
        t.add_row(m, *(_fmt(r.get(c)) for c in COLUMNS))
        if paper and paper.get(m):
            p = paper[m]
            t.add_row(Text("  paper", style="dim"), *(Text(_fmt(p.get(c)), style="dim") for c in COLUMNS))
    return t


def _fmt(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"


def _clean_json(d):
    if isinstance(d, dict):
        return {str(k): _clean_json(v) for k, v in d.items()}
    if isinstance(d, float) and math.isnan(d):
        return None
    return d


@app.command()
def evaluate(
    path: Path = typer.Argument(..., help="Labelled records (response, samples, sentences, labels), or a results file "
                                "(.json/.jsonl written by `score`) whose records carry labels."),
    methods: Optional[str] = MethodsOpt,
    encoder: Optional[str] = EncoderOpt,
    layer: Optional[int] = LayerOpt,
    nli: Optional[str] = NliOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON keyed by method."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the scored results here."),
):
    """Sentence AUC-PR (NonFact, NonFact*, Factual) and passage Pearson/Spearman against human labels, in percent."""
    from .evaluation.wikibio import evaluate_results
    from .io import read_results, write_results

    res = None
    try:
        head = path.read_text(encoding="utf-8")[:4000]
    except OSError as e:
        err.print(f"[red]error:[/] cannot read {path}: {e}")
        raise typer.Exit(2)
    if '"sentence_scores"' in head:
        res = read_results(path)
    else:
        recs, _ = _read_records_or_exit(path)
        unlabelled = [r.id for r in recs if r.labels is None]
        if unlabelled:
            err.print(f"[yellow]warning:[/] {len(unlabelled)} records have no labels and are left out of the figures")
        det = _detector(methods, encoder, layer, nli)
        res = det.score(recs, progress=sys.stderr.isatty())
        if output:
            write_results(res, output)
    try:
        figures = evaluate_results(res, None if methods is None or '"sentence_scores"' not in head
                                   else [m.strip() for m in methods.split(",")])
    except (ValueError, KeyError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    if as_json:
        print(json.dumps(_clean_json(figures), indent=1))
    else:
        console.print(_table(figures, title=f"{path.name}: AUC-PR (%) and passage correlation (%)"))


@app.command("methods")
def list_methods():
    """List every method with its formula in one line."""
    from .pipeline import available_methods

    rows = {
        "ngram{n}_{avg|max}": "n-gram model (n=1..5) trained on samples + response; mean or max of -log p (raw)",
        "bertscore": "1 - mean over samples of max BERTScore F1 against the sample's sentences (Eq. 6), [0,1]",
        "nli": "mean over samples of P(contradiction)/(P(entail)+P(contradiction)), [0,1]",
        "combination": "mean of z-normalized scores of the other chosen methods (SelfCheckGPT §5.4), raw",
    }
    t = Table("method", "score")
    for k, v in rows.items():
        t.add_row(k, v)
    console.print(t)
    console.print("names: " + ", ".join(available_methods()))


@reproduce_app.command("wikibio")
def reproduce_wikibio(
    methods: Optional[str] = MethodsOpt,
    data: Optional[Path] = DataOpt,
    passages: Optional[str] = typer.Option(None, "--passages", help="Subset by position, e.g. '0-118' or '0,5,9'."),
    as_json: bool = typer.Option(False, "--json", help="Print our figures as JSON keyed by method name."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Results .jsonl, written as the run goes."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run from --output."),
    encoder: Optional[str] = EncoderOpt,
    layer: Optional[int] = LayerOpt,
    nli: Optional[str] = NliOpt,
    combine: Optional[str] = typer.Option(None, "--combine", help="Methods averaged by 'combination' "
                                          "(default: every other chosen method)."),
):
    """Score the 238 WikiBio GPT-3 passages and print our figures beside the paper's Tables 3 and 6."""
    from .evaluation.paper import paper_row
    from .evaluation.wikibio import reproduce

    det = _detector(methods or "ngram1_max,bertscore,nli,combination", encoder, layer, nli, combine=combine)
    figures, res = reproduce(detector=det, data_dir=data, passages=_parse_range(passages), output=output,
                             resume=resume, progress=sys.stderr.isatty() and not as_json)
    err.print(f"[dim]{len(res)} passages in {res.settings.get('seconds', 0):.1f}s; per scorer: "
              f"{json.dumps(res.settings.get('scorer_seconds', {}))}[/]")
    if as_json:
        print(json.dumps(_clean_json({m: v for m, v in figures.items()}), indent=1))
        return
    paper = {m: paper_row(m) for m in figures}
    console.print(_table(figures, paper, title=f"WikiBio GPT-3, {len(res)} passages: ours (paper below)"))
    console.print(f"[dim]AUC-PR = trapezoidal area under the PR curve (sklearn auc(recall, precision)); "
                  f"{res.settings.get('seconds', 0):.1f}s[/]")


@reproduce_app.command("samples")
def reproduce_samples(
    methods: Optional[str] = MethodsOpt,
    data: Optional[Path] = DataOpt,
    passages: Optional[str] = typer.Option(None, "--passages", help="Subset by position, e.g. '0-118'."),
    ks: str = typer.Option("1-20", "--ks", help="Numbers of samples, e.g. '1-20' or '1,2,4,8,16,20'."),
    as_json: bool = typer.Option(False, "--json"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Save Figure 7 (Spearman vs N) as a PNG."),
    encoder: Optional[str] = EncoderOpt,
    layer: Optional[int] = LayerOpt,
    nli: Optional[str] = NliOpt,
):
    """Figure 7 (passage Spearman) and Figure 8 (NonFact* AUC-PR) against the number of samples."""
    from .evaluation.wikibio import ablation_samples

    det = _detector(methods or "ngram1_max,bertscore", encoder, layer, nli)
    kk = _parse_range(ks) or list(range(1, 21))
    out = ablation_samples(det.methods, ks=kk, data_dir=data, passages=_parse_range(passages), detector=det,
                           progress=lambda k: err.print(f"[dim]N={k} done[/]"))
    if plot:
        from .report.plots import plot_samples

        plot_samples(out, plot)
        err.print(f"figure written to {plot}")
    if as_json:
        print(json.dumps(_clean_json(out), indent=1))
        return
    t = Table(title="Spearman (%) by number of samples N [NonFact* AUC-PR in brackets]")
    t.add_column("N", justify="right")
    for m in out:
        t.add_column(m, justify="right")
    for k in kk:
        t.add_row(str(k), *(f"{out[m][k]['spearman']:.2f} [{out[m][k]['nonfact_star']:.2f}]" for m in out))
    console.print(t)


@reproduce_app.command("reference")
def reproduce_reference(
    methods: Optional[str] = MethodsOpt,
    data: Optional[Path] = DataOpt,
    passages: Optional[str] = typer.Option(None, "--passages"),
    as_json: bool = typer.Option(False, "--json"),
    encoder: Optional[str] = EncoderOpt,
    layer: Optional[int] = LayerOpt,
    nli: Optional[str] = NliOpt,
):
    """Table 4: SelfCheck samples versus the WikiBio reference passage as the evidence."""
    from .evaluation.paper import TABLE4
    from .evaluation.wikibio import ablation_reference

    det = _detector(methods or "ngram1_max,bertscore", encoder, layer, nli)
    out = ablation_reference(det.methods, data_dir=data, passages=_parse_range(passages), detector=det)
    if as_json:
        print(json.dumps(_clean_json(out), indent=1))
        return
    rows, paper = {}, {}
    for m, v in out.items():
        rows[f"{m} (samples)"] = v["samples"]
        rows[f"{m} (WikiBio ref)"] = v["reference"]
        if m in TABLE4:
            paper[f"{m} (samples)"] = TABLE4[m]["samples"]
            paper[f"{m} (WikiBio ref)"] = TABLE4[m]["reference"]
    console.print(_table(rows, paper, title="Table 4: samples vs the WikiBio reference passage (paper below)"))


def _parse_range(s: Optional[str]) -> Optional[list[int]]:
    if not s:
        return None
    out: list[int] = []
    for part in s.split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
