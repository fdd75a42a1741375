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
from .io import json_safe
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
PrecisionOpt = typer.Option("auto", "--precision", help="Encoder precision: auto (bf16 where the CPU/GPU runs it "
                             "natively), bf16 or fp32.")
SplitOpt = typer.Option("rule", "--sentence-split", help="n-gram (n>1) sentence edges in samples: 'rule' "
                         "(punctuation rule) or 'parser' (spaCy's parser, as the reference; ~20x slower).")
NliOpt = typer.Option(None, "--nli", help="NLI model: 'halluscope-nli' (our packaged model, the default), 'aegis', "
                      "or a Hugging Face id / local path.")
NliPrecisionOpt = typer.Option("auto", "--nli-precision", help="NLI precision: auto (fp32 for halluscope-nli: the "
                               "same on every CPU), fp32, int8 (faster; within 0.02 of fp32), bf16 where native.")
NliEvidenceOpt = typer.Option("3", "--nli-evidence", help="SelfCheck-NLI premise: the K sample sentences closest to "
                              "the sentence (an integer) or 'sample' (the whole sample).")
DataOpt = typer.Option(None, "--data", help="Data folder holding wikibio/ (default: $HALLUSCOPE_DATA or ../shared/data).")


def example_path() -> Path:
    return Path(str(resources.files("halluscope") / "data" / "examples.jsonl"))


def _detector(methods, encoder, layer, nli, baseline=None, combine=None, precision="auto", split="rule",
              learned=None, nli_evidence="3", nli_precision="auto"):
    from .pipeline import Detector

    try:
        ev = nli_evidence if nli_evidence == "sample" else int(nli_evidence)
        return Detector(methods=methods, encoder=encoder, layer=layer, nli=nli, bertscore_baseline=baseline,
                        combine=combine, precision=precision, sentence_split=split, learned=learned,
                        nli_evidence=ev, nli_precision=nli_precision)
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
    primary = primary or next((m for m in ("learned", "combination") if m in results.methods), results.methods[0])
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
    precision: str = PrecisionOpt,
    split: str = SplitOpt,
    nli: Optional[str] = NliOpt,
    nli_evidence: str = NliEvidenceOpt,
    nli_precision: str = NliPrecisionOpt,
    baseline: Optional[Path] = typer.Option(None, "--bertscore-baseline", help="bert_score baseline file (rescaling)."),
    combine: Optional[str] = typer.Option(None, "--combine", help="Methods averaged by 'combination'."),
    qa_stage: Optional[list[str]] = typer.Option(None, "--qa-stage", help="STAGE=ID_OR_PATH: the MQAG stages (g1, "
                                                 "g2, a, u) as Hugging Face models; with all four, the qa_* methods "
                                                 "run with no LLM ('paper' = the original MQAG models)."),
):
    """Score every sentence of each record's response against its samples, and each passage as a whole."""
    from .io import write_results

    recs, errors = _read_records_or_exit(path or example_path())
    det = _detector(methods, encoder, layer, nli, str(baseline) if baseline else None, combine, precision, split,
                    nli_evidence=nli_evidence, nli_precision=nli_precision)
    det.qa_stages = _qa_stages(qa_stage)
    stream = output if output is not None and output.suffix.lower() == ".jsonl" else None
    try:
        res = det.score(recs, output=stream, resume=resume, progress=True)
    except ValueError as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    res.errors = errors + res.errors
    if output is not None and stream is None:
        write_results(res, output)
    if as_json:
        print(json.dumps(res.to_dict(), indent=1))
    else:
        show_results(res)
    if output is not None:
        err.print(f"results written to {output}")
    _exit_for_skipped(res, output)


def _exit_for_skipped(res, output: Optional[Path]) -> None:
    """Skipped records go to OUTPUT.errors.jsonl beside the results (a pipeline reads them there); the exit code
    says what happened: 0 all scored, 1 none scored, 3 some records skipped."""
    from .io import write_errors

    if res.errors:
        if output is not None:
            side = write_errors(res.errors, output.with_name(output.name + ".errors.jsonl"))
            err.print(f"[yellow]{len(res.errors)} records skipped[/] (listed in {side})")
        else:
            err.print(f"[yellow]{len(res.errors)} records skipped[/] (listed above)")
    if not res.items:
        raise typer.Exit(1)
    if res.errors:
        raise typer.Exit(3)


@app.command()
def check(
    prompts: Optional[list[str]] = typer.Argument(None, help="Prompts (questions) to answer and check."),
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="A file of prompts, one per line (or JSONL with "
                                        "a 'prompt' field)."),
    n: int = typer.Option(20, "--samples", "-n", help="Stochastic samples per prompt."),
    methods: Optional[str] = typer.Option("learned", "--methods", "-m",
                                          help="Scoring methods; default 'learned' (unigram, BERTScore and NLI "
                                          "combined with fixed weights, so one answer alone gets a calibrated "
                                          "score); add 'prompt', 'greybox', 'qa', ..."),
    model: Optional[str] = typer.Option(None, "--model", help="Model: a GGUF path (local, default: the packaged "
                                        "Gemma-3-270M), a Hugging Face id (--backend transformers), or the server's "
                                        "model name (with --base-url). Env: HALLUSCOPE_MODEL."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="An OpenAI-compatible server, e.g. "
                                           "http://127.0.0.1:8080/v1 (env HALLUSCOPE_BASE_URL)."),
    backend: str = typer.Option("auto", "--backend", help="auto | transformers (auto: HTTP with --base-url, else "
                                "the local GGUF)."),
    chat: bool = typer.Option(False, "--chat", help="Use /chat/completions instead of /completions."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Environment variable holding the "
                                    "API key (never logged or stored)."),
    template: Optional[str] = typer.Option(None, "--template", help="How a prompt is put to the model; default "
                                           "'Question: {prompt}\\nAnswer:' for completions, '{prompt}' for chat."),
    temperature: float = typer.Option(1.0, "--temperature", help="Temperature of the samples (main: 0)."),
    max_tokens: int = typer.Option(96, "--max-tokens"),
    seed: int = typer.Option(0, "--seed", help="Seed of the main response; sample i uses seed + i."),
    concurrency: int = typer.Option(4, "--concurrency", help="Parallel requests."),
    rpm: Optional[float] = typer.Option(None, "--rpm", help="Requests-per-minute limit."),
    tpm: Optional[float] = typer.Option(None, "--tpm", help="Tokens-per-minute limit."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="On-disk generation cache (SQLite; default: "
                                         "$HALLUSCOPE_CACHE or ~/.cache/halluscope): a re-run costs nothing."),
    top_logprobs: int = typer.Option(5, "--top-logprobs", help="Top-k log-probs of the main response (grey-box)."),
    qa_stage: Optional[list[str]] = typer.Option(None, "--qa-stage", help="An MQAG stage as a Hugging Face model: "
                                                 "STAGE=ID_OR_PATH with STAGE g1, g2, a or u ('paper' = the original "
                                                 "MQAG model); repeat per stage. Others are prompts on the LLM."),
    as_json: bool = typer.Option(False, "--json"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the results (.json/.jsonl/.csv)."),
):
    """Answer each prompt with an LLM (main response at temperature 0, N samples at --temperature) and score every
    sentence of the answer. Runs with no network and no key on the packaged local model."""
    from .llm import DEFAULT_TEMPLATE_COMPLETIONS
    from .io import write_results
    from .types import Record

    items = list(prompts or [])
    if file:
        try:
            for line in file.read_text(encoding="utf-8").splitlines():
                line = line.strip()
                if line:
                    items.append(json.loads(line)["prompt"] if line.startswith("{") else line)
        except (OSError, ValueError, KeyError) as e:
            err.print(f"[red]error:[/] cannot read prompts from {file}: {e}")
            raise typer.Exit(2)
    if not items:
        err.print("[red]error:[/] give prompts as arguments or with --file")
        raise typer.Exit(2)
    sampler = _sampler(model, base_url, backend, chat, api_key_env, cache, concurrency, rpm, tpm)
    be = sampler.backend
    tmpl = template or ("{prompt}" if chat else DEFAULT_TEMPLATE_COMPLETIONS)
    texts = [tmpl.replace("{prompt}", p) for p in items]
    stop = () if chat else ("\nQuestion:", "\n\n")
    total = len(items) * (n + 1)
    bar = _bar("sampling", total)
    from .llm.base import UnreachableError

    try:
        draws = sampler.draw(texts, n=n, temperature=temperature, max_tokens=max_tokens, seed=seed,
                             top_logprobs=top_logprobs, stop=stop, progress=(lambda k: bar(k)) if bar else None)
    except UnreachableError as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    if bar:
        bar(None)
    records, problems = [], []
    for i, (p, d) in enumerate(zip(items, draws)):
        if not d.ok:
            problems.append({"record": str(i), "field": "samples", "error": "; ".join(d.errors)})
            continue
        text = d.main.text
        lead = len(text) - len(text.lstrip())
        toks = [dict(vars(t), offset=t.offset - lead) for t in (d.main.tokens or [])]
        samples = [s.text.strip() for s in d.samples]
        used = [x for x in samples if x]  # an empty sample says nothing: left out, and the result counts it
        rec = {"id": str(i), "prompt": p, "response": text.strip(), "samples": used}
        try:
            r = Record.from_dict(rec, i)
        except RecordError as e:
            problems.append(e.to_dict())
            continue
        r.meta = {"tokens": toks, "usage": d.usage(), "backend": be.cache_id(), "samples_used": len(used),
                  "samples_empty": len(samples) - len(used)}
        records.append(r)
    for pr in problems:
        err.print(f"[yellow]skipped[/] record {pr['record']}: {pr['field']}: {pr['error']}")
    det = _detector(methods, None, None, None)
    det.llm = sampler
    det.qa_stages = _qa_stages(qa_stage)
    try:
        res = det.score(records, progress=True)
    except (ValueError, RuntimeError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    usage = [r.meta["usage"] for r in records]
    res.settings["llm"] = {"backend": be.cache_id(), "samples": n, "temperature": temperature, "seed": seed,
                           "prompt_tokens": sum(u["prompt_tokens"] for u in usage),
                           "completion_tokens": sum(u["completion_tokens"] for u in usage),
                           "cached_generations": sum(u["cached"] for u in usage)}
    for r, it in zip(records, res.items):
        it.evidence["usage"] = [r.meta["usage"]]
    res.errors = [RecordError(p["record"], p["field"], p["error"]) for p in problems] + res.errors
    if output:
        write_results(res, output)
    if as_json:
        print(json.dumps(res.to_dict(), indent=1))
    else:
        show_results(res)
        s = res.settings["llm"]
        err.print(f"[dim]{s['backend']}: {s['prompt_tokens']} prompt + {s['completion_tokens']} completion tokens, "
                  f"{s['cached_generations']} generations from the cache ({sampler.cache.path})[/]")
    if not res.items:
        raise typer.Exit(1)


def _qa_stages(specs: Optional[list[str]]) -> dict[str, str]:
    out = {}
    for spec in specs or []:
        stage, _, model = spec.partition("=")
        if stage not in ("g1", "g2", "a", "u") or not model:
            err.print(f"[red]error:[/] --qa-stage {spec!r}: expected STAGE=MODEL with STAGE one of g1, g2, a, u")
            raise typer.Exit(2)
        out[stage] = model
    return out


def _bar(label: str, total: int):
    from .pipeline import rich_bar

    return rich_bar(label, total, console=err)


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


@app.command()
def evaluate(
    path: Path = typer.Argument(..., help="Labelled records (response, samples, sentences, labels), or a results file "
                                "(.json/.jsonl written by `score`) whose records carry labels."),
    methods: Optional[str] = MethodsOpt,
    encoder: Optional[str] = EncoderOpt,
    layer: Optional[int] = LayerOpt,
    precision: str = PrecisionOpt,
    split: str = SplitOpt,
    nli: Optional[str] = NliOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON keyed by method."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the scored results here (for a "
                                          "results file: merged/recombined, with the --methods chosen)."),
    passages: Optional[str] = typer.Option(None, "--passages", help="Evaluate only these records, by position in "
                                           "the file (e.g. '119-237')."),
    learned: Optional[Path] = typer.Option(None, "--learned", help="Learned-combination file (default: packaged); "
                                           "applied to a results file when 'learned' is asked for and absent."),
    ties: str = typer.Option("as-is", "--ties", help="'random': sentence AUC-PR with tied scores in random order "
                             "(mean of 20 draws); the paper's trapezoidal AUC-PR favours scores with many ties."),
    with_: Optional[list[Path]] = typer.Option(None, "--with", help="Further results files of the same records "
                                               "(merged by id), e.g. methods scored in another run."),
    combine: Optional[str] = typer.Option(None, "--combine", help="Recompute 'combination' from these methods of "
                                          "the (merged) results, normalized over all their records."),
    show: int = typer.Option(0, "--show", help="Also print the first N passages in the coloured sentence view, "
                             "with each sentence's human label."),
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
    positions = _parse_range(passages)
    if '"sentence_scores"' in head:
        res = read_results(path)
        if with_:
            res = _merge_results([res, *(read_results(p) for p in with_)])
        if combine:
            from .scorers import combination

            comps = [m.strip() for m in combine.split(",") if m.strip()]
            try:
                combination.apply(res.items, comps)
            except KeyError as e:
                err.print(f"[red]error:[/] --combine: no scores for method {e} in these results")
                raise typer.Exit(2)
            res.methods = list(dict.fromkeys([*res.methods, "combination"]))
        if positions is not None:
            res.items = [res.items[i] for i in positions]
        if methods and "learned" in methods.split(",") and res.items and "learned" not in res.items[0].sentence_scores:
            from .scorers.learned import LearnedCombination

            try:
                LearnedCombination.load(learned).apply(res.items)
            except (ValueError, KeyError) as e:
                err.print(f"[red]error:[/] learned combination: {e}")
                raise typer.Exit(2)
        if output:  # the merged / recombined results, with only the chosen methods
            keep = [m.strip() for m in methods.split(",")] if methods else list(res.methods)
            missing = [m for m in keep if res.items and m not in res.items[0].sentence_scores]
            if missing:
                err.print(f"[red]error:[/] no scores for {missing} in these results")
                raise typer.Exit(2)
            for it in res.items:
                it.sentence_scores = {m: it.sentence_scores[m] for m in keep}
                it.passage_scores = {m: it.passage_scores[m] for m in keep}
                it.evidence = {m: v for m, v in it.evidence.items() if m in keep}
            res.methods = keep
            write_results(res, output)
    else:
        recs, _ = _read_records_or_exit(path)
        if positions is not None:
            recs = [recs[i] for i in positions]
        unlabelled = [r.id for r in recs if r.labels is None]
        if unlabelled:
            err.print(f"[yellow]warning:[/] {len(unlabelled)} records have no labels and are left out of the figures")
        det = _detector(methods, encoder, layer, nli, precision=precision, split=split,
                        learned=str(learned) if learned else None)
        res = det.score(recs, progress=True)
        if output:
            write_results(res, output)
    try:
        figures = evaluate_results(res, None if methods is None or '"sentence_scores"' not in head
                                   else [m.strip() for m in methods.split(",")], ties=ties)
    except (ValueError, KeyError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    if show and not as_json:
        from .types import Results

        show_results(Results(items=res.items[:show], methods=res.methods, settings=res.settings),
                     primary=methods.split(",")[0].strip() if methods else None)
    if as_json:
        print(json.dumps(json_safe(figures), indent=1))
    else:
        console.print(_table(figures, title=f"{path.name}: AUC-PR (%) and passage correlation (%)"))


def _merge_results(parts):
    """Results of the same records scored by different runs: one item per id (the first file's order), with the
    methods of every file."""
    base = parts[0]
    for other in parts[1:]:
        by_id = {it.id: it for it in other.items}
        for it in base.items:
            o = by_id.get(it.id)
            if o is None:
                err.print(f"[red]error:[/] record {it.id} is missing from one of the results files")
                raise typer.Exit(2)
            it.sentence_scores.update(o.sentence_scores)
            it.passage_scores.update(o.passage_scores)
            it.evidence.update(o.evidence)
        base.methods = list(dict.fromkeys([*base.methods, *other.methods]))
    return base


@app.command("train-learned")
def train_learned(
    results: Optional[list[Path]] = typer.Argument(None, help="Scored WikiBio results (.jsonl/.json from "
                                                   "`reproduce wikibio -o`) holding the components, merged by record "
                                                   "id when several; default: score the passages now."),
    components: str = typer.Option("support,bertscore,nli", "--components", help="Component methods."),
    passages: str = typer.Option("0-118", "--passages", help="Training passages by position (default: the "
                                 "development half; never train on what you report)."),
    c: float = typer.Option(1.0, "--C", help="Inverse L2 regularization strength of the logistic regression."),
    folds: int = typer.Option(5, "--folds", help="Cross-validation folds (grouped by passage) for the printed check."),
    output: Path = typer.Option(None, "--output", "-o", help="Where to write the JSON (default: the packaged file)."),
    data: Optional[Path] = DataOpt,
    precision: str = PrecisionOpt,
    nli: Optional[str] = NliOpt,
    as_json: bool = typer.Option(False, "--json"),
):
    """Train the `learned` logistic combination on labelled WikiBio passages; print cross-validated figures."""
    from .evaluation.wikibio import evaluate_results, load_wikibio
    from .io import read_results
    from .scorers.learned import LearnedCombination, default_path
    from .types import Results

    comps = [m.strip() for m in components.split(",") if m.strip()]
    positions = _parse_range(passages)
    if results:
        res = _merge_results([read_results(p) for p in results])
        res.items = [res.items[i] for i in positions] if positions is not None else res.items
    else:
        det = _detector(",".join(comps), None, None, nli, precision=precision)
        res = det.score(load_wikibio(data, positions), progress=True)
    try:
        model = LearnedCombination.fit(res, comps, C=c, trained_on=f"WikiBio GPT-3 passages {passages}")
    except ValueError as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    # grouped k-fold check: every passage scored by a model that did not see it
    from sklearn.model_selection import KFold

    oof = []
    for train_idx, test_idx in KFold(n_splits=folds, shuffle=True, random_state=0).split(res.items):
        fold = LearnedCombination.fit(Results(items=[res.items[i] for i in train_idx]), comps, C=c)
        held = [res.items[i] for i in test_idx]
        fold.apply(held)
        oof.extend(held)
    figures = evaluate_results(Results(items=oof, methods=comps + ["learned"]), comps + ["learned"])
    out = output or default_path()
    model.save(out)
    if as_json:
        print(json.dumps(json_safe({"weights": dict(zip(comps, model.weights)), "bias": model.bias,
                                      "cross_validated": figures}), indent=1))
    else:
        console.print("weights (standardized): " + ", ".join(f"{m}={w:+.3f}" for m, w in zip(comps, model.weights))
                      + f", bias={model.bias:+.3f}")
        console.print(_table(figures, title=f"{folds}-fold cross-validation on passages {passages} (learned = "
                             f"out-of-fold predictions)"))
    err.print(f"written to {out}")


ensemble_app = typer.Typer(help="Response-level confidence: components, baselines and the tuned ensemble (003).")
app.add_typer(ensemble_app, name="ensemble")


def _sampler(model, base_url, backend, chat, api_key_env, cache, concurrency=4, rpm=None, tpm=None):
    """A cached sampler over the chosen backend, or a clean exit naming what is wrong."""
    from .llm import Sampler, make_backend

    try:
        be = make_backend(model, base_url, chat=chat, api_key_env=api_key_env, kind=backend if backend != "auto" else None)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    from .llm.cache import default_cache_path

    cache = Path(cache) if cache else default_cache_path()
    cache.parent.mkdir(parents=True, exist_ok=True)
    return Sampler(be, cache=str(cache), concurrency=concurrency, rpm=rpm, tpm=tpm)


def _judges(self_judge, gen_sampler, ext_model, ext_base_url, ext_backend, api_key_env, cache, retries):
    from .ensemble.judges import LLMJudge

    judges = {}
    if self_judge and gen_sampler is not None:
        judges["self_judge"] = LLMJudge(gen_sampler, retries=retries)
    if ext_model or ext_base_url:
        s = _sampler(None if ext_model == "local" else ext_model, ext_base_url, ext_backend, False, api_key_env, cache)
        judges["external_judge"] = LLMJudge(s, retries=retries)
    return judges


ComponentsOpt = typer.Option(",".join(("exact_match", "non_contradiction", "semantic_negentropy", "bertscore",
                                       "cosine")), "--components", help="Components (exact_match, non_contradiction, "
                             "semantic_negentropy, bertscore, cosine, selfcheck_nli); judges are added by their options.")
ExtJudgeOpt = typer.Option(None, "--external-judge", help="An external LLM judge (003 §3.3): 'local' (the packaged "
                           "model), a GGUF path, or a model name served at --external-judge-url.")
ExtJudgeUrlOpt = typer.Option(None, "--external-judge-url", help="OpenAI-compatible server of the external judge.")
CacheOpt = typer.Option(None, "--cache", help="On-disk generation cache (SQLite; default: $HALLUSCOPE_CACHE or "
                        "~/.cache/halluscope/generations.sqlite): a "
                        "re-run costs nothing and an interrupted run resumes.")


@ensemble_app.command("sac3")
def ensemble_sac3(
    data: Optional[Path] = DataOpt,
    limit: Optional[int] = typer.Option(None, "--limit", help="Use N questions spread evenly over the file."),
    folds: int = typer.Option(5, "--folds", help="k of the k-fold cross-validation of every tuned figure."),
    components: str = ComponentsOpt,
    external_judge: Optional[str] = ExtJudgeOpt,
    external_judge_url: Optional[str] = ExtJudgeUrlOpt,
    judge_retries: int = typer.Option(2, "--judge-retries", help="Re-asks of an unparseable verdict before it is "
                                      "recorded as missing."),
    cot: int = typer.Option(0, "--cot", help="Also run the chain-of-thought judge (002) with this many self-"
                            "consistency repeats against the set's right answers (needs --external-judge)."),
    cache: Optional[Path] = CacheOpt,
    figures: Optional[Path] = typer.Option(None, "--figures", help="Folder for ROC and accuracy-at-tau PNGs."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write all figures and scores as JSON."),
    as_json: bool = typer.Option(False, "--json"),
):
    """SAC3 NQ-Open: AUROC and F1 of each component, BSDetector, semantic entropy and the cross-validated ensemble,
    beside the paper's Table 1 (NQ-Open F1). The answers are given (gpt-3.5's), so an LLM judge here is external."""
    from .ensemble.report import markdown_table, write_figures
    from .ensemble.sac3 import load_sac3, run_sac3

    judges = _judges(False, None, external_judge, external_judge_url, "auto", "OPENAI_API_KEY", cache, judge_retries)
    tty = True  # progress on stderr: a bar on a terminal, plain lines elsewhere
    from .models.nli import load_nli

    nli_model = load_nli()
    nli_model.progress = _bar if tty else None
    try:
        bar = _bar("judging", limit or 250) if judges and tty else None
        items = load_sac3(data, limit)
        out = run_sac3(data, limit, folds, components=[c.strip() for c in components.split(",") if c.strip()],
                       judges=judges, progress=bar, nli=nli_model, items=items)
        if bar:
            bar(None)
        if cot:
            if "external_judge" not in judges:
                raise ValueError("--cot needs a judge LLM: give --external-judge")
            out["cot"] = _sac3_cot(items, judges["external_judge"].sampler, cot, folds, tty)
    except (FileNotFoundError, ValueError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    if figures:
        figures.mkdir(parents=True, exist_ok=True)
        out["figures"] = write_figures(out, figures, "sac3", f"SAC3 NQ-Open ({out['n']} answers)")
        (figures / "sac3.md").write_text(markdown_table(out) + "\n")
    if output:
        output.write_text(json.dumps(json_safe(out), indent=1))
    if as_json:
        print(json.dumps(json_safe({k: v for k, v in out.items() if k not in ("scores", "judge_replies")}), indent=1))
        return
    t = Table(title=f"SAC3 NQ-Open, {out['n']} answers ({100 * out['hallucination_rate']:.1f}% incorrect); "
              f"positive class = incorrect; F1 at a {out['folds']}-fold cross-validated threshold")
    for c in ("row", "AUROC", "precision", "recall", "F1", "paper F1"):
        t.add_column(c)
    paper = out["paper_f1"]
    from .ensemble.report import figure_rows

    for name, v in figure_rows(out):
        key = name.split(": ")[-1] if name.startswith("baseline") else "ensemble" if "agnostic" in name else None
        p = paper.get(key) if key else None
        t.add_row(name, *(f"{v[x]:.3f}" for x in ("auroc", "precision", "recall", "f1")), "-" if p is None else f"{p:.3f}")
    if "cot" in out:
        v = out["cot"]
        t.add_row(f"CoT judge (002), k={cot}", *(f"{v[x]:.3f}" for x in ("auroc", "precision", "recall", "f1")), "-")
    console.print(t)


def _sac3_cot(items, sampler, k, folds, tty):
    """The 002 metric against SAC3's right answers: hallucination score = share of 'yes' over k repeats."""
    import numpy as np

    from .ensemble.judges import CoTJudge
    from .ensemble.tuning import component_figures

    bar = _bar("CoT judge", len(items) * k) if tty else None
    res = CoTJudge(sampler, k=k).score([(" / ".join(it.meta.get("right_answer", [])) or "", it.response, it.question)
                                        for it in items], bar)
    if bar:
        bar(None)
    conf = np.array([[1 - r.score] for r in res])
    halluc = np.array([0 if it.correct else 1 for it in items])
    fig = component_figures(conf, halluc, ["cot"], folds)["cot"]
    fig["missing"] = int(np.isnan(conf).sum())
    fig["answers"] = [{"id": it.id, "score": r.score, "votes": r.votes, "reasons": r.reasons, "replies": r.replies}
                      for it, r in zip(items, res)]  # every judgement, with its reasons
    return fig


@ensemble_app.command("qa")
def ensemble_qa(
    benchmarks: str = typer.Option("gsm8k,svamp,csqa,arc,nq_open,popqa", "--benchmarks", "-b",
                                   help="gsm8k, svamp, csqa, arc (Challenge), arc_easy, nq_open, popqa."),
    limit: int = typer.Option(50, "--limit", help="The first N questions of each benchmark."),
    n: int = typer.Option(5, "--samples", "-n", help="Candidate answers per question (temperature --temperature)."),
    temperature: float = typer.Option(1.0, "--temperature"),
    model: Optional[str] = typer.Option(None, "--model", help="Answering model: a GGUF path (default: the packaged "
                                        "Gemma-3-270M), a Hugging Face id (--backend transformers), or the server's "
                                        "model name (with --base-url)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="An OpenAI-compatible server (env "
                                           "HALLUSCOPE_BASE_URL)."),
    backend: str = typer.Option("auto", "--backend", help="auto | transformers."),
    chat: bool = typer.Option(False, "--chat", help="Use /chat/completions."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env"),
    self_judge: bool = typer.Option(True, "--self-judge/--no-self-judge", help="The answering LLM judges its answers."),
    external_judge: Optional[str] = ExtJudgeOpt,
    external_judge_url: Optional[str] = ExtJudgeUrlOpt,
    judge_retries: int = typer.Option(2, "--judge-retries"),
    components: str = ComponentsOpt,
    folds: int = typer.Option(5, "--folds"),
    seed: int = typer.Option(0, "--seed"),
    concurrency: int = typer.Option(1, "--concurrency", help="Parallel requests (1 for a local model)."),
    cache: Optional[Path] = CacheOpt,
    data: Optional[Path] = DataOpt,
    out: Path = typer.Option(Path("reports/qa"), "--out", help="Report folder (report.md, report.json, PNGs, "
                             "items_*.jsonl, presets.json)."),
    reanalyze: bool = typer.Option(False, "--reanalyze", help="Only rebuild the report, figures and presets of --out "
                                   "from its saved items (no generation, no model work)."),
):
    """The QA pipeline (003 §4): answer each benchmark's questions with any backend (original at temperature 0,
    candidates at --temperature), grade automatically (numeric match, choice letter, normalized gold match), score
    every component, cross-validate the ensemble, and write a report with ROC and accuracy-at-tau figures."""
    from .ensemble.report import reanalyze as rebuild
    from .ensemble.report import run_qa

    if reanalyze:
        try:
            rebuild(out, folds, seed)
        except (OSError, ValueError, KeyError) as e:
            err.print(f"[red]error:[/] cannot rebuild the report in {out}: {e}")
            raise typer.Exit(2)
        err.print(f"report rebuilt: {out / 'report.md'}")
        return
    from .models.nli import load_nli

    nli_model = load_nli()
    nli_model.progress = _bar
    names = [b.strip() for b in benchmarks.split(",") if b.strip()]
    sampler = _sampler(model, base_url, backend, chat, api_key_env, cache, concurrency)
    judges = _judges(self_judge, sampler, external_judge, external_judge_url, "auto", api_key_env, cache, judge_retries)
    try:
        rep = run_qa(names, sampler, out, data, limit, n, temperature, folds, seed,
                     [c.strip() for c in components.split(",") if c.strip()], judges, nli=nli_model,
                     console=err)
    except (FileNotFoundError, ValueError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    t = Table(title=f"QA pipeline, {rep['backend']}: AUROC / F1 (cross-validated), positive = incorrect answer")
    for c in ("benchmark", "n", "accuracy", "best component", "BSDetector", "sem. entropy", "ensemble agn.", "ensemble joint"):
        t.add_column(c)
    for name, r in rep["benchmarks"].items():
        if "skipped" in r:
            t.add_row(name, str(r["n"]), f"{r['accuracy']:.2f}", r["skipped"], "", "", "", "")
            continue
        best = max(r["components"].items(), key=lambda kv: -1 if kv[1]["auroc"] != kv[1]["auroc"] else kv[1]["auroc"])
        f = lambda v: f"{v['auroc']:.3f} / {v['f1']:.3f}"  # noqa: E731
        b = r["baselines"]
        t.add_row(name, str(r["n"]), f"{r['accuracy']:.2f}", f"{best[0]} {f(best[1])}",
                  f(b["bsdetector"]) if "bsdetector" in b else "-", f(b["semantic_entropy"]) if "semantic_entropy" in b else "-",
                  f(r["ensemble"]["agnostic"]), f(r["ensemble"]["joint"]))
    console.print(t)
    err.print(f"report: {out / 'report.md'}")


@ensemble_app.command("presets")
def ensemble_presets(
    closed: Optional[list[Path]] = typer.Option(None, "--closed", help="report.json of `ensemble qa`: its numeric "
                                                "and choice benchmarks feed the closed-form preset (repeatable)."),
    open_: Optional[list[Path]] = typer.Option(None, "--open", help="JSON of `ensemble sac3 -o`, or report.json of "
                                               "`ensemble qa` (its text benchmarks): the open-ended preset."),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the presets JSON (use it with `ensemble score "
                             "--config`; the packaged presets are never overwritten)."),
):
    """Rebuild the weight presets for users without graded data from saved results: each group's answers pooled
    (on the components all of them have), AUROC-tuned weights on the simplex, then the F1 threshold. Quote the
    cross-validated figures of the same runs: a preset's own figures on its data would be in-sample."""
    from .ensemble.qa import BENCHMARKS
    from .ensemble.report import presets_from_reports, save_json

    def parts(paths, want_text):
        got = []
        for p in paths or []:
            d = json.loads(p.read_text())
            if "benchmarks" in d:
                got += [(f"{n} ({p})", r) for n, r in d["benchmarks"].items() if (BENCHMARKS[n][1] == "text") == want_text]
            else:
                got.append((str(p), d))
        return got

    try:
        presets = presets_from_reports(parts(closed, False), parts(open_, True))
    except (OSError, ValueError, KeyError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    save_json(presets, out)
    for label, p in presets.items():
        w = ", ".join(f"{c} {x:.2f}" for c, x in zip(p["components"], p["weights"]))
        console.print(f"[bold]{label}[/]: {w}; threshold {p['threshold']:.3f}\n  [dim]{p['trained_on']}[/]")
    err.print(f"written to {out}")


def _answers(path: Path, need_label: bool = False):
    """Response items from JSONL (question, response, samples; correct when grading): bad records name the field."""
    from .ensemble.components import ResponseItem

    items = []
    for k, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{path}: record {k}: not JSON ({e})") from e
        fields = [("question", str), ("response", str), ("samples", list)] + ([("correct", bool)] if need_label else [])
        for f, typ in fields:
            if not isinstance(r.get(f), typ):
                raise ValueError(f"{path}: record {r.get('id', k)}: field '{f}' missing or not a {typ.__name__}")
        items.append(ResponseItem(str(r.get("id", k)), r["question"], r["response"], [str(x) for x in r["samples"]],
                                  r.get("correct")))
    return items


@ensemble_app.command("tune")
def ensemble_tune(
    path: Path = typer.Argument(..., help="Graded JSONL: 'question', 'response', 'samples' and 'correct' (true/false)."),
    components: str = ComponentsOpt,
    mode: str = typer.Option("agnostic", "--mode", help="agnostic (AUROC-tuned weights, then the F1 threshold) or "
                             "joint (weights and threshold for F1)."),
    folds: int = typer.Option(5, "--folds"),
    out: Path = typer.Option(Path("ensemble.json"), "--out", "-o", help="The tuned EnsembleConfig (JSON)."),
):
    """Tune the ensemble on your graded answers: prints the k-fold cross-validated figures (what to expect on new
    answers), then fits weights and threshold on all of them and saves the config for `ensemble score --config`."""
    from .ensemble.components import ComponentScorer
    from .ensemble.report import markdown_table
    from .ensemble.sac3 import analyze
    from .ensemble.tuning import tune

    comps = [c.strip() for c in components.split(",") if c.strip()]
    try:
        items = _answers(path, need_label=True)
        rows = ComponentScorer(components=comps).score(items)
        res = analyze(items, rows, comps, folds)
        if "skipped" in res:
            raise ValueError(res["skipped"])
        import numpy as np

        C = np.array(res["scores"]["components"], float)
        cfg = tune(C, np.array(res["scores"]["hallucination"]), comps, mode=mode)
    except (OSError, ValueError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    cfg.trained_on = f"{path} ({len(items)} answers)"
    cfg.save(out)
    console.print(markdown_table(res))
    w = ", ".join(f"{c} {x:.2f}" for c, x in zip(cfg.components, cfg.weights))
    console.print(f"fitted on all {len(items)} answers: {w}; threshold {cfg.threshold:.3f} -> {out}")


@ensemble_app.command("score")
def ensemble_score(
    path: Path = typer.Argument(..., help="JSONL: one answer per line with 'question', 'response' and 'samples' "
                                "(and optionally 'id', 'correct')."),
    preset: str = typer.Option("open-ended", "--preset", help="closed-form | open-ended (packaged presets)."),
    config: Optional[Path] = typer.Option(None, "--config", help="Your own tuned EnsembleConfig JSON instead, or a "
                                          "presets file from `ensemble presets` (with --preset naming the entry)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write one JSON line per answer."),
):
    """Confidence of whole answers with a weight preset (or your tuned config): each component, the weighted
    confidence, and the flag (confidence < threshold = likely incorrect). Components the config names but this run
    cannot compute (an LLM judge) are left out and the remaining weights renormalized."""
    import numpy as np

    from .ensemble.components import COMPONENTS, ComponentScorer
    from .ensemble.tuning import EnsembleConfig

    try:
        cfg = EnsembleConfig.load(config, preset) if config else EnsembleConfig.preset(preset)
        items = _answers(path)
    except (OSError, ValueError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    usable = [c for c in cfg.components if c in COMPONENTS]
    rows = ComponentScorer(components=usable).score(items)
    C = np.array([[r.get(c, np.nan) for c in cfg.components] for r in rows], float)
    conf = cfg.confidence(C)
    t = Table(title=f"confidence ({'config ' + str(config) if config else 'preset ' + preset}; flagged below "
              f"{cfg.threshold:.3f})")
    for c in ("id", "response", "confidence", "flag"):
        t.add_column(c)
    lines = []
    for it, r, c in zip(items, rows, conf):
        flag = bool(c < cfg.threshold)
        t.add_row(it.id, it.response[:60], f"{c:.3f}", "[red]likely incorrect[/]" if flag else "[green]ok[/]")
        lines.append(json.dumps({"id": it.id, "confidence": float(c), "hallucination_score": float(1 - c),
                                 "flagged": flag, "components": r}))
    console.print(t)
    if output:
        output.write_text("\n".join(lines) + "\n")


@app.command("report")
def report(
    results: Path = typer.Argument(..., help="A results file (.json/.jsonl) written by score, evaluate -o, check -o "
                                   "or reproduce -o."),
    out: Path = typer.Option(Path("report.html"), "--out", "-o", help="The HTML file to write."),
    with_: Optional[list[Path]] = typer.Option(None, "--with", help="Further results of the same records (merged by "
                                               "id), e.g. methods scored in another run."),
    records: Optional[Path] = typer.Option(None, "--records", help="The input records (with samples), so evidence "
                                           "can quote the sample; WikiBio ids are found in --data by themselves."),
    fig7: Optional[Path] = typer.Option(None, "--samples-ablation", help="JSON printed by `reproduce samples "
                                        "--json` (Figure 7)."),
    ensemble: Optional[Path] = typer.Option(None, "--ensemble", help="JSON of `ensemble qa` (report.json) or "
                                            "`ensemble sac3 -o`: ROC and accuracy-at-tau."),
    data: Optional[Path] = DataOpt,
    title: str = typer.Option("halluscope report", "--title"),
    figures: Optional[Path] = typer.Option(None, "--figures", help="Also write every figure as a PNG here."),
):
    """One self-contained HTML report (no network): highlighted passages with per-method scores and evidence, the
    papers' figures where the file has labels, and a summary of the run."""
    from .io import read_results
    from .report.html import build_report

    try:
        res = read_results(results)
        if with_:
            res = _merge_results([res, *(read_results(p) for p in with_)])
        samples = {}
        if records:
            recs, _ = _read_records_or_exit(records)
            samples = {r.id: list(r.samples) for r in recs}
        else:
            from .evaluation.wikibio import load_wikibio

            try:
                ids = {it.id for it in res.items}
                samples = {r.id: list(r.samples) for r in load_wikibio(data) if r.id in ids}
            except (FileNotFoundError, OSError):
                samples = {}
        f7 = json.loads(fig7.read_text()) if fig7 else None
        ens = json.loads(ensemble.read_text()) if ensemble else None
        path = build_report(res, out, title, samples, f7, ens, source=str(results), figures_dir=figures)
    except (OSError, ValueError, KeyError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    err.print(f"report: {path} ({path.stat().st_size / 1e6:.1f} MB)")


@app.command("evaluate-nli")
def evaluate_nli_cmd(
    nli: Optional[str] = NliOpt,
    data: Optional[Path] = DataOpt,
    limit: Optional[int] = typer.Option(1000, "--limit", help="Pairs per set, evenly spread (0 = all)."),
    nli_precision: str = NliPrecisionOpt,
    sets: Optional[str] = typer.Option(None, "--sets", help="Comma-separated subset of the sets (default: all)."),
    as_json: bool = typer.Option(False, "--json"),
):
    """Accuracy of an NLI model on MNLI dev-matched, ANLI R1-R3 test, XNLI-en test and SNLI test: 3-way where it is
    3-way, and contradiction-vs-not for every model (the decision non-contradiction and SelfCheck-NLI rest on)."""
    from .evaluation.nli_bench import SETS, evaluate_nli
    from .models.nli import load_nli

    try:
        model = load_nli(nli, **({} if nli_precision == "auto" else {"precision": nli_precision}))
        model.progress = _bar
        chosen = tuple(x.strip() for x in sets.split(",")) if sets else tuple(SETS)
        unknown = [x for x in chosen if x not in SETS]
        if unknown:
            raise ValueError(f"unknown sets {unknown}; choose from {', '.join(SETS)}")
        out = evaluate_nli(model, sets=chosen, data_dir=data, limit=limit or None)
    except (FileNotFoundError, ValueError, OSError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
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


@app.command("methods")
def list_methods():
    """List every method with its formula in one line."""
    from .pipeline import available_methods

    from .pipeline import METHOD_SUMMARY as rows

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
    precision: str = PrecisionOpt,
    split: str = SplitOpt,
    nli: Optional[str] = NliOpt,
    nli_evidence: str = NliEvidenceOpt,
    nli_precision: str = NliPrecisionOpt,
    combine: Optional[str] = typer.Option(None, "--combine", help="Methods averaged by 'combination' "
                                          "(default: every other chosen method)."),
    samples: Optional[int] = typer.Option(None, "--samples", help="Use only the first K samples of each passage."),
    llm_model: Optional[str] = typer.Option(None, "--llm-model", help="LLM for 'prompt' and 'qa' (GGUF path, or "
                                            "the server's model name with --base-url; default the packaged Gemma)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible server for the LLM methods."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Generation cache for LLM methods (default: "
                                         "$HALLUSCOPE_CACHE or ~/.cache/halluscope/generations.sqlite)."),
    concurrency: int = typer.Option(4, "--concurrency"),
):
    """Score the 238 WikiBio GPT-3 passages and print our figures beside the paper's Tables 3 and 6."""
    from .evaluation.paper import paper_row
    from .evaluation.wikibio import reproduce

    det = _detector(methods or "ngram1_max,bertscore,nli,combination", encoder, layer, nli, combine=combine,
                    precision=precision, split=split, nli_evidence=nli_evidence, nli_precision=nli_precision)
    if any(m == "prompt" or m.startswith("qa_") for m in det.methods):
        det.llm = _sampler(llm_model, base_url, "auto", False, "OPENAI_API_KEY", cache, concurrency)
    figures, res = reproduce(detector=det, data_dir=data, passages=_parse_range(passages), output=output,
                             resume=resume, progress=True,
                             evidence=(lambda r: r.samples[:samples]) if samples else None)
    err.print(f"[dim]{len(res)} passages in {res.settings.get('seconds', 0):.1f}s; per scorer: "
              f"{json.dumps(res.settings.get('scorer_seconds', {}))}[/]")
    if as_json:
        print(json.dumps(json_safe({m: v for m, v in figures.items()}), indent=1))
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
    precision: str = PrecisionOpt,
    split: str = SplitOpt,
    nli: Optional[str] = NliOpt,
):
    """Figure 7 (passage Spearman) and Figure 8 (NonFact* AUC-PR) against the number of samples."""
    from .evaluation.wikibio import ablation_samples

    det = _detector(methods or "ngram1_max,bertscore", encoder, layer, nli, precision=precision, split=split)
    kk = _parse_range(ks) or list(range(1, 21))
    bar = _bar("sample counts N", len(kk))
    out = ablation_samples(det.methods, ks=kk, data_dir=data, passages=_parse_range(passages), detector=det,
                           progress=(lambda k: bar(1)) if bar else (lambda k: err.print(f"[dim]N={k} done[/]")))
    if bar:
        bar(None)
    if plot:
        from .report.plots import plot_samples

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
def reproduce_reference(
    methods: Optional[str] = MethodsOpt,
    data: Optional[Path] = DataOpt,
    passages: Optional[str] = typer.Option(None, "--passages"),
    as_json: bool = typer.Option(False, "--json"),
    encoder: Optional[str] = EncoderOpt,
    layer: Optional[int] = LayerOpt,
    precision: str = PrecisionOpt,
    split: str = SplitOpt,
    nli: Optional[str] = NliOpt,
):
    """Table 4: SelfCheck samples versus the WikiBio reference passage as the evidence."""
    from .evaluation.paper import TABLE4
    from .evaluation.wikibio import ablation_reference

    det = _detector(methods or "ngram1_max,bertscore", encoder, layer, nli, precision=precision, split=split)
    out = ablation_reference(det.methods, data_dir=data, passages=_parse_range(passages), detector=det)
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
def reproduce_layers(
    data: Optional[Path] = DataOpt,
    passages: Optional[str] = typer.Option("0-118", "--passages", help="Subset by position; default the "
                                           "development half 0-118 (choose on it, report on the rest)."),
    encoder: Optional[str] = EncoderOpt,
    precision: str = PrecisionOpt,
    as_json: bool = typer.Option(False, "--json"),
):
    """BERTScore with every layer of the encoder (one forward pass per sentence), to choose the layer."""
    from .evaluation.wikibio import sweep_layers

    state = {}

    def progress(i, n):  # a bar with ETA on a terminal, plain lines otherwise (rich_bar decides)
        if "bar" not in state:
            state["bar"], state["done"] = _bar("passages", n), 0
        state["bar"](i - state["done"])  # i counts the passages done so far
        state["done"] = i
        if i >= n:
            state["bar"](None)

    try:
        out = sweep_layers(encoder, precision=precision, data_dir=data, passages=_parse_range(passages),
                           progress=progress)
    except ValueError as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    if as_json:
        print(json.dumps(json_safe(out), indent=1))
        return
    console.print(_table(out, title=f"BERTScore by encoder layer ({encoder or 'minilm'}, {precision}), "
                         f"passages {passages or 'all'}"))


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


@app.command("train-nli")
def train_nli_cmd(
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output folder: mixture, checkpoints, and model/ at "
                                       "the end (required unless --package)."),
    data: Optional[Path] = typer.Option(None, "--data", help="The data/nli folder (default: <data>/nli)."),
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
    package: Optional[Path] = typer.Option(None, "--package", help="Instead of training: copy this exported model "
                                           "folder into the package as the default NLI and write its model card."),
    evaluation: Optional[Path] = typer.Option(None, "--evaluation", help="With --package: the JSON of "
                                              "`halluscope evaluate-nli --json` for the card's metrics table."),
):
    """Train halluscope's own 3-way NLI cross-encoder (entailment / neutral / contradiction) on the documented mixture
    of data/nli plus synthetic sentence-vs-evidence pairs, evaluate it and export it to OUT/model (resumable)."""
    from .evaluation.wikibio import default_data_dir
    from .models.nli_train import train_nli

    if package:
        from .models.nli_train import package_model

        ev = json.loads(evaluation.read_text()) if evaluation else None
        print(package_model(package, evaluation=ev))
        return
    if out is None:
        err.print("[red]error:[/] --out is required (the folder the training writes to)")
        raise typer.Exit(2)
    data = data or Path(default_data_dir()) / "nli"
    try:
        rec = train_nli(data, out, base=base, seed=seed, epochs=epochs, batch_size=batch_size, lr=lr,
                        max_length=max_length, synthetic=synthetic, scale=scale, eval_limit=eval_limit,
                        stop_after_minutes=stop_after, log=lambda m: err.print(m, highlight=False))
    except (FileNotFoundError, ValueError, OSError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    print(json.dumps(rec.get("metrics", rec), indent=1))


def main() -> None:  # pragma: no cover
    """The console entry point: the app, with a server that never answered reported in one line (exit 2)."""
    from .llm.base import UnreachableError

    try:
        app()
    except UnreachableError as e:
        err.print(f"[red]error:[/] {e}")
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
