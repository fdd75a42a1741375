"""The SelfCheckGPT paper's experiments: reproduce wikibio / samples / reference / layers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text
from rich.table import Table

from ..io import json_safe
from .common import (
    fails,
    reproduce_app,
    console,
    err,
    MethodsOpt,
    EncoderOpt,
    LayerOpt,
    PrecisionOpt,
    SplitOpt,
    NliOpt,
    NliPrecisionOpt,
    NliEvidenceOpt,
    DataOpt,
    FirstSamplesOpt,
    _detector,
    _bar,
    _sampler,
    _parse_range,
)
from .render import _table


@reproduce_app.command("wikibio")
@fails
def reproduce_wikibio(
    methods: Optional[str] = MethodsOpt,
    data: Optional[Path] = DataOpt,
    passages: Optional[str] = typer.Option(None, "--passages", help="Subset by position, e.g. '0-118' or '0,5,9'."),
    as_json: bool = typer.Option(False, "--json", help="Print our figures as JSON keyed by method name."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Results: a .jsonl is written as the run "
                                          "goes; .json, .csv, .parquet at the end."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run from --output."),
    encoder: Optional[str] = EncoderOpt,
    layer: Optional[int] = LayerOpt,
    precision: str = PrecisionOpt,
    split: str = SplitOpt,
    nli: Optional[str] = NliOpt,
    nli_evidence: str = NliEvidenceOpt,
    nli_precision: str = NliPrecisionOpt,
    combine: Optional[str] = typer.Option(None, "--combine", help="Methods averaged by 'combination' "
                                          "(default: every other chosen method)."),
    samples: Optional[int] = FirstSamplesOpt,
    llm_model: Optional[str] = typer.Option(None, "--llm-model", help="LLM for 'prompt' and 'qa' (GGUF path, or "
                                            "the server's model name with --base-url; default the packaged Gemma)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible server for the LLM methods."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Generation cache for LLM methods (default: "
                                         "as score's --cache)."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Parallel requests (default "
                                              "$HALLUSCOPE_CONCURRENCY, else 4).", show_default=False),
):
    """Score the 238 WikiBio GPT-3 passages and print our figures beside the paper's Tables 3 and 6."""
    from ..evaluation.paper import paper_rows
    from ..evaluation.wikibio import reproduce

    det = _detector(methods or "ngram1_max,bertscore,nli,combination", encoder, layer, nli, combine=combine,
                    precision=precision, split=split, nli_evidence=nli_evidence, nli_precision=nli_precision)
    det.combination_stats = "run"  # the paper normalizes each variant over its dataset (§5.4)
    if any(m == "prompt" or m.startswith("qa_") for m in det.methods):
        det.llm = _sampler(llm_model, base_url, "auto", False, "OPENAI_API_KEY", cache, concurrency)
    figures, res = reproduce(detector=det, data_dir=data, passages=_parse_range(passages), output=output,
                             resume=resume, progress=True,
                             evidence=(lambda r: r.samples[:samples]) if samples else None)
    per = ", ".join(f"{k} {v:.1f}s" for k, v in res.settings.get("scorer_seconds", {}).items())
    n = f"{len(res)} passage{'' if len(res) == 1 else 's'}"
    err.print(Text(f"{n} in {res.settings.get('seconds', 0):.1f}s; per scorer: {per}", style="dim"),
              soft_wrap=True)  # not folded mid-name: a log line to read or grep
    if as_json:
        print(json.dumps(json_safe({m: v for m, v in figures.items()}), indent=1))
        return
    paper = paper_rows(figures, det.combine)
    sentences = figures.get("random", {}).get("sentences", "?")
    console.print(_table(figures, paper, title=f"WikiBio GPT-3, {n} ({sentences} sentences): ours (paper below: all "
                         "238 passages, 1908 sentences)"))
    console.print(f"[dim]AUC-PR = trapezoidal area under the PR curve (sklearn auc(recall, precision)); "
                  f"{res.settings.get('seconds', 0):.1f}s[/]")


@reproduce_app.command("samples")
@fails
def reproduce_samples(
    methods: Optional[str] = MethodsOpt,
    data: Optional[Path] = DataOpt,
    passages: Optional[str] = typer.Option(None, "--passages", help="Subset by position, e.g. '0-118'."),
    ks: str = typer.Option("1-20", "--ks", help="Numbers of samples, e.g. '1-20' or '1,2,4,8,16,20'."),
    as_json: bool = typer.Option(False, "--json"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Save Figure 7 (Spearman vs N) as a PNG."),
    encoder: Optional[str] = EncoderOpt,
    layer: Optional[int] = LayerOpt,
    precision: str = PrecisionOpt,
    split: str = SplitOpt,
    nli: Optional[str] = NliOpt,
):
    """Figure 7 (passage Spearman) and Figure 8 (NonFact* AUC-PR) against the number of samples."""
    from ..evaluation.wikibio import ablation_samples

    det = _detector(methods or "ngram1_max,bertscore", encoder, layer, nli, precision=precision, split=split)
    kk = _parse_range(ks, "--ks") or list(range(1, 21))
    bar = _bar("sample counts N", len(kk))
    out = ablation_samples(det.methods, ks=kk, data_dir=data, passages=_parse_range(passages), detector=det,
                           progress=lambda k: bar(1))
    bar(None)
    if plot:
        from ..report.plots import plot_samples

        plot_samples(out, plot)
        err.print(f"figure written to {plot}")
    if as_json:
        print(json.dumps(json_safe(out), indent=1))
        return
    t = Table(title="Spearman (%) by number of samples N [NonFact* AUC-PR in brackets]")
    t.add_column("N", justify="right")
    for m in out:
        t.add_column(m, justify="right")
    for k in kk:
        t.add_row(str(k), *(f"{out[m][k]['spearman']:.2f} [{out[m][k]['nonfact_star']:.2f}]" for m in out))
    console.print(t)


@reproduce_app.command("reference")
@fails
def reproduce_reference(
    methods: Optional[str] = MethodsOpt,
    data: Optional[Path] = DataOpt,
    passages: Optional[str] = typer.Option(None, "--passages", help="Subset by position, e.g. '0-118'."),
    as_json: bool = typer.Option(False, "--json"),
    encoder: Optional[str] = EncoderOpt,
    layer: Optional[int] = LayerOpt,
    precision: str = PrecisionOpt,
    split: str = SplitOpt,
    nli: Optional[str] = NliOpt,
):
    """Table 4: SelfCheck samples versus the WikiBio reference passage as the evidence."""
    from ..evaluation.paper import TABLE4
    from ..evaluation.wikibio import ablation_reference

    det = _detector(methods or "ngram1_max,bertscore", encoder, layer, nli, precision=precision, split=split)
    out = ablation_reference(det.methods, data_dir=data, passages=_parse_range(passages), detector=det,
                             progress=True)
    if as_json:
        print(json.dumps(json_safe(out), indent=1))
        return
    rows, paper = {}, {}
    for m, v in out.items():
        rows[f"{m} (samples)"] = v["samples"]
        rows[f"{m} (WikiBio ref)"] = v["reference"]
        if m in TABLE4:
            paper[f"{m} (samples)"] = TABLE4[m]["samples"]
            paper[f"{m} (WikiBio ref)"] = TABLE4[m]["reference"]
    console.print(_table(rows, paper, title="Table 4: samples vs the WikiBio reference passage (paper below)"))


@reproduce_app.command("layers")
@fails
def reproduce_layers(
    data: Optional[Path] = DataOpt,
    passages: Optional[str] = typer.Option("0-118", "--passages", help="Subset by position; default the "
                                           "development half 0-118 (choose on it, report on the rest)."),
    encoder: Optional[str] = EncoderOpt,
    precision: str = PrecisionOpt,
    as_json: bool = typer.Option(False, "--json"),
):
    """BERTScore with every layer of the encoder (one forward pass per sentence), to choose the layer."""
    from ..evaluation.wikibio import sweep_layers

    state = {}

    def progress(i, n):  # a bar with ETA on a terminal, plain lines otherwise (rich_bar decides)
        if "bar" not in state:
            state["bar"], state["done"] = _bar("passages", n), 0
        state["bar"](i - state["done"])  # i counts the passages done so far
        state["done"] = i
        if i >= n:
            state["bar"](None)

    out = sweep_layers(encoder, precision=precision, data_dir=data, passages=_parse_range(passages),
                       progress=progress)
    if as_json:
        print(json.dumps(json_safe(out), indent=1))
        return
    console.print(_table(out, title=f"BERTScore by encoder layer ({encoder or 'minilm'}, {precision}), "
                         f"passages {passages or 'all'}", first="layer"))


@reproduce_app.command("claims")
@fails
def reproduce_claims_cmd(
    methods: Optional[str] = typer.Option("ngram1_max_rel,bertscore,nli_support,entity,luq,combination,probability",
                                          "--methods", "-m", help="Sentence methods (scored on sentences and on "
                                          "claims) and response-level methods such as luq."),
    claims: str = typer.Option("rule", "--claims", help="Claim splitter: 'rule' (offline parse) or 'llm'."),
    data: Optional[Path] = DataOpt,
    passages: Optional[str] = typer.Option(None, "--passages", help="Subset by position, e.g. '0-118' or '0,4,8'."),
    samples: Optional[int] = FirstSamplesOpt,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Results: a .jsonl is written as the run "
                                          "goes; .json, .csv, .parquet at the end."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run from --output (a finished "
                                "file is evaluated again without rescoring)."),
    nli_evidence: str = NliEvidenceOpt,
    llm_model: Optional[str] = typer.Option(None, "--llm-model", help="LLM of --claims llm and 'prompt'."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible server for the LLM."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON keyed by row."),
):
    """Claims and LUQ on WikiBio GPT-3: sentence AUC-PR with each sentence scored by the max or the mean of its
    claims, passage Pearson/Spearman of the mean over the claims and of response-level methods (issue 17)."""
    from ..evaluation.claims import reproduce_claims
    from ..evaluation.paper import paper_rows

    det = _detector(methods, None, None, None, nli_evidence=nli_evidence, claims=claims)
    if claims == "llm" or "prompt" in det.methods:
        det.llm = _sampler(llm_model, base_url, "auto", False, "OPENAI_API_KEY", None)
    figures, res = reproduce_claims(det, data, _parse_range(passages), samples, output, resume, progress=True)
    if as_json:
        print(json.dumps(json_safe(figures), indent=1))
        return
    paper = paper_rows(figures, det.combine)
    n_claims = sum(len(it.claims or []) for it in res.items)
    console.print(_table(figures, paper, title=f"WikiBio GPT-3, {len(res)} passages, {n_claims} claims: ours "
                         "(SelfCheckGPT's Table 3 below where the method is in the paper)"))

