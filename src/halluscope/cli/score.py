"""Scoring commands: score, check, evaluate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..io import json_safe
from ..scorers.nli import check_evidence
from .common import (
    CacheOpt,
    CalibrationOpt,
    QaStageOpt,
    ModelOpt,
    BaseUrlOpt,
    BackendOpt,
    ChatOpt,
    ApiKeyEnvOpt,
    fails,
    app,
    console,
    err,
    MethodsOpt,
    FirstSamplesOpt,
    EncoderOpt,
    LayerOpt,
    PrecisionOpt,
    SplitOpt,
    NliOpt,
    NliPrecisionOpt,
    NliEvidenceOpt,
    example_path,
    _detector,
    _read_records_or_exit,
    _exit_for_skipped,
    _qa_stages,
    _bar,
    _sampler,
    _parse_range,
    _method_options,
    MethodOptionOpt,
    ClaimsOpt,
    QuietOpt,
    prepare_output,
    say,
    show_usage,
)
from .render import _table, show_results


@app.command()
@fails
def score(
    paths: Optional[list[Path]] = typer.Argument(None, help="Records: .jsonl, .json, .csv or .parquet files, folders"
                                                 " of them or globs; default: the bundled examples.", show_default=False),
    methods: Optional[str] = MethodsOpt,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write results (.jsonl/.json/.csv/.parquet)."
                                          " A .jsonl output is written as the run goes, a batch of 16 records at"
                                          " a time."),
    resume: bool = typer.Option(False, "--resume", help="Continue a .jsonl --output: its records scored with these "
                                "methods, the same response and sample count are kept, the others scored."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of the coloured view."),
    quiet: bool = QuietOpt,
    samples: Optional[int] = FirstSamplesOpt,
    encoder: Optional[str] = EncoderOpt,
    layer: Optional[int] = LayerOpt,
    precision: str = PrecisionOpt,
    split: str = SplitOpt,
    nli: Optional[str] = NliOpt,
    nli_evidence: str = NliEvidenceOpt,
    nli_precision: str = NliPrecisionOpt,
    baseline: Optional[Path] = typer.Option(None, "--bertscore-baseline", help="bert_score baseline file (rescaling)."),
    combine: Optional[str] = typer.Option(None, "--combine", help="Methods averaged by 'combination'."),
    qa_stage: Optional[list[str]] = QaStageOpt,
    claims: Optional[str] = ClaimsOpt,
    engine: str = typer.Option("local", "--engine", help="'local' (this process) or 'ray': a Ray cluster scores "
                               "PATH (a file, folder or glob of shards) into Parquet parts under -o OUT/."),
    address: Optional[str] = typer.Option(None, "--address", help="With --engine ray: 'auto' or HOST:PORT, on a "
                                          "node of the cluster (default: a Ray running on this machine, else a new "
                                          "local one)."),
    actors: Optional[int] = typer.Option(None, "--actors", help="With --engine ray: scoring actors (default: one "
                                         "per GPU, else one per CPU)."),
    gpus: Optional[float] = typer.Option(None, "--gpus-per-actor", help="With --engine ray: GPUs each actor holds "
                                         "(e.g. 0.5: two actors per GPU; 0: CPUs only; default: 1 where the cluster "
                                         "has GPUs, else 0)."),
    cpus: Optional[float] = typer.Option(None, "--cpus-per-actor", help="With --engine ray: CPUs (threads) per actor."),
    batch_tokens: Optional[int] = typer.Option(None, "--batch-tokens", help="With --engine ray: words per batch."),
    method_option: Optional[list[str]] = MethodOptionOpt, calibration: Optional[Path] = CalibrationOpt,
    model: Optional[str] = ModelOpt, base_url: Optional[str] = BaseUrlOpt, backend: str = BackendOpt,
    chat: bool = ChatOpt, api_key_env: str = ApiKeyEnvOpt, cache: Optional[Path] = CacheOpt,
):
    """Score every sentence of each record's response against its samples, and each passage as a whole. Methods that
    ask an LLM (p_true, verbalized, the judges, prompt, ...) use --model / --base-url (default: the packaged local
    model)."""
    path = (paths[0] if len(paths) == 1 else paths) if paths else None  # several: files in the order given
    options = {k: v for k, v in dict(
        methods=methods, encoder=encoder, layer=layer, precision=precision, sentence_split=split, nli=nli,
        nli_evidence=check_evidence(nli_evidence), nli_precision=nli_precision,
        bertscore_baseline=str(baseline) if baseline else None, combine=combine, qa_stages=_qa_stages(qa_stage),
        method_options=_method_options(method_option), calibration=str(calibration) if calibration else None,
    ).items() if v or k not in ("qa_stages", "method_options")}
    if engine != "local":
        if claims or model or base_url or samples:
            raise ValueError("--claims, --samples and LLM methods (--model, --base-url) run with --engine local (the "
                             "Ray output holds sentences and answers only; its actors load no LLM)")
        return _score_on_ray(engine, path, output, resume, address, (actors, gpus, cpus, batch_tokens), as_json,
                             options)
    _score_local(path, output, resume, "json" if as_json else "quiet" if quiet else "view",
                 {**options, "claims": claims}, (model, base_url, backend, chat, api_key_env, cache), samples)


def _score_local(path, output, resume, show: str, options: dict, llm: tuple, samples: int | None) -> None:
    """``score`` in this process: a Detector of ``options``, with the LLM of ``llm`` (model, base URL, backend, chat,
    key variable, cache) when asked for or when a method or the claim splitter needs one, on the first ``samples``
    of each record (all for None); streamed to a .jsonl output, else written at the end."""
    from ..io import write_results
    from ..llm.base import LLMError
    from ..pipeline import Detector, asks_llm

    source = path or example_path()
    prepare_output(output, source, resume, hold=output is not None and output.suffix.lower() != ".jsonl")
    recs, errors = _read_records_or_exit(source)
    det = Detector(**options)
    if llm[0] or llm[1] or asks_llm(det.methods, det.qa_stages) or options.get("claims") == "llm":
        det.llm = _sampler(*llm)
    stream = output if output is not None and output.suffix.lower() == ".jsonl" else None
    try:
        res = det.score(recs, output=stream, resume=resume, progress=True,
                        evidence=(lambda r: r.samples[:samples]) if samples else None)
    except KeyboardInterrupt:
        say(f"interrupted: the records scored so far are in {stream}; run the same command with --resume to go on"
            if stream else "interrupted: nothing written (a .jsonl --output keeps each batch as it is scored)")
        raise typer.Exit(130)
    except LLMError as e:  # the LLM went away or refuses: what was scored is kept, and said
        raise LLMError(f"{e}; the records scored before are in {stream}: run the same command with --resume when "
                       "the server answers again" if stream and stream.exists() and stream.stat().st_size else e)
    res.errors = errors + res.errors
    if output is not None and stream is None:
        write_results(res, output)
    if show == "json":
        print(json.dumps(res.to_dict(), indent=1))
    else:
        show_results(res, view=show == "view")
    if output is not None:
        err.print(f"results written to {output}")
    _exit_for_skipped(res, output)


@app.command()
@fails
def check(
    prompts: Optional[list[str]] = typer.Argument(None, help="Prompts (questions) to answer and check."),
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="A file of prompts, one per line (or JSONL with "
                                        "a 'prompt' field and an optional 'id', which the results keep)."),
    n: int = typer.Option(20, "--samples", "-n", min=1, help="Stochastic samples per prompt."),
    methods: Optional[str] = typer.Option(None, "--methods", "-m",
                                          help="Scoring methods; default: the default methods and their calibrated "
                                          "probability; add 'prompt', 'greybox', 'qa', ..."),
    model: Optional[str] = ModelOpt, base_url: Optional[str] = BaseUrlOpt, backend: str = BackendOpt,
    chat: bool = ChatOpt, api_key_env: str = ApiKeyEnvOpt, calibration: Optional[Path] = CalibrationOpt,
    template: Optional[str] = typer.Option(None, "--template", help="How a prompt is put to the model; default "
                                           "'Question: {prompt}\\nAnswer:' for completions, '{prompt}' for chat."),
    temperature: float = typer.Option(1.0, "--temperature", help="Temperature of the samples (main: 0)."),
    max_tokens: int = typer.Option(96, "--max-tokens"),
    seed: int = typer.Option(0, "--seed", help="Seed of the main response; sample i uses seed + i."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Parallel requests (default 4)."),
    rpm: Optional[float] = typer.Option(None, "--rpm", help="Requests-per-minute limit."),
    tpm: Optional[float] = typer.Option(None, "--tpm", help="Tokens-per-minute limit."),
    cache: Optional[Path] = CacheOpt,
    top_logprobs: int = typer.Option(5, "--top-logprobs", help="Top-k log-probs of the main response (grey-box)."),
    qa_stage: Optional[list[str]] = QaStageOpt,
    method_option: Optional[list[str]] = MethodOptionOpt,
    nli: Optional[str] = NliOpt,
    as_json: bool = typer.Option(False, "--json"),
    quiet: bool = QuietOpt,
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the results (.json/.jsonl/.csv/.parquet)."),
):
    """Answer each prompt with an LLM (main response at temperature 0, N samples at --temperature) and score every
    sentence of the answer. Runs with no network and no key on the packaged local model."""
    from ..io import read_prompts, write_results
    from ..llm.sampler import usage_summary

    prepare_output(output, file, hold=True)
    items = [(None, p) for p in prompts or []] + (read_prompts(file) if file else [])  # (id or None, prompt)
    if not items:
        raise ValueError("give prompts as arguments or with --file")
    det = _detector(methods, None, None, nli, method_options=_method_options(method_option) or None,
                    qa_stages=_qa_stages(qa_stage), calibration=str(calibration) if calibration else None)
    sampler = _sampler(model, base_url, backend, chat, api_key_env, cache, concurrency, rpm, tpm)
    records, problems = _draw(sampler, items, template, chat, dict(n=n, temperature=temperature,
                                                                   max_tokens=max_tokens, seed=seed,
                                                                   top_logprobs=top_logprobs))
    det.llm = sampler
    res = det.score(records, progress=True)
    for it in res.items:  # the drawn samples go into the output: it can be read, reviewed and scored again
        it.samples = next(r.samples for r in records if r.id == it.id)
    res.settings["llm"] = {"backend": sampler.backend.cache_id(), "samples": n, "temperature": temperature,
                           "seed": seed, **usage_summary(records, res)}
    res.errors = problems + res.errors
    if output:
        write_results(res, output)
    if as_json:
        print(json.dumps(res.to_dict(), indent=1))
    else:
        show_results(res, view=not quiet)
        show_usage(res.settings["llm"], sampler.cache.path)
    _exit_for_skipped(res, output)


@app.command()
@fails
def evaluate(
    path: Path = typer.Argument(..., help="Labelled records (sentences, labels) or graded ones (correct), with "
                                "response and samples, or a results file (.json/.jsonl of `score`) of such records."),
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
    calibration_file: Optional[Path] = typer.Option(None, "--calibration", help="Recompute the default 'probability' "
                                                    "of a results file with this calibration file (no rescoring)."),
):
    """Sentence AUC-PR (NonFact, NonFact*, Factual) and passage Pearson/Spearman against human labels, in percent;
    with the default 'probability', also its calibration (ECE, Brier score) against the labels. Records graded as
    a whole ('correct') get answer-level figures: AUROC, PRR and AURC of each method's answer score for wrong answers
    (and ECE / Brier of 'probability')."""
    from ..evaluation.wikibio import evaluate_all, load_results
    from ..io import write_results

    chosen = [m.strip() for m in methods.split(",")] if methods else None
    prepare_output(output, path, hold=True)  # a results file's or labelled records': checked and locked first
    res, scored_now = load_results(path, with_, combine, _parse_range(passages), chosen, learned, calibration_file)
    if res is None:  # labelled records: score them now
        det = _detector(methods, encoder, layer, nli, precision=precision, split=split,
                        learned=str(learned) if learned else None)
        res = _score_labelled(det, path, _parse_range(passages))
    if calibration_file and scored_now:  # a results file's was recomputed as it was read
        from .. import calibration

        calibration.apply(res.items, cal := calibration.load(calibration_file))
        res.settings["probability"] = cal.to_dict()
    if output:
        write_results(res, output)
    figures = evaluate_all(res, None if scored_now else chosen, ties=ties)
    if show and not as_json:  # the first records in view; the summary counts them all
        show_results(res, primary=chosen[0] if chosen else None, limit=show)
    _render_figures(figures, path.name, as_json)
    if scored_now:  # records scored here: the skipped ones are listed and said by the exit code
        _exit_for_skipped(res, output)


def _score_labelled(det, path: Path, positions):
    """``evaluate`` on records: those at ``positions`` scored, the unreadable ones kept as the results' errors;
    records with neither labels nor a grade are said (all of them: an error, before any scoring)."""
    from ..io import pick

    recs, skipped = _read_records_or_exit(path)
    recs = pick(recs, positions, str(path))
    unlabelled = [r.id for r in recs if r.labels is None and r.correct is None]
    if recs and len(unlabelled) == len(recs):
        raise ValueError(f"no record of {path} has sentence labels ('sentences' and 'labels') or a grade "
                         "('correct'): nothing to evaluate against (`halluscope score` scores them)")
    if unlabelled:
        err.print(f"[yellow]warning:[/] {len(unlabelled)} records have neither labels nor a grade ('correct') and "
                  f"are left out of the figures: {', '.join(unlabelled[:5])}{' ...' if len(unlabelled) > 5 else ''}",
                  highlight=False)
    res = det.score(recs, progress=True)
    res.errors = skipped + res.errors
    return res


def _render_figures(figures: dict, name: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps(json_safe(figures), indent=1))
        return
    calib, answers = figures.pop("calibration", None), figures.pop("answers", None)
    ties = figures.pop("ties", {})
    if figures:
        base = figures.get("random", {})
        console.print(_table(figures, title=f"{name}: sentences and passages ({base.get('sentences', '?')} labelled "
                             f"sentences in {base.get('passages', '?')} passages)"))
        for m, r in figures.items():
            if m != "random" and r.get("sentences", 0) < base.get("sentences", 0):
                left = base["sentences"] - r["sentences"]
                console.print(f"{m}: a response-level method: passage figures only" if r.get("level") == "response"
                              else f"{m}: no score for {left} of the sentences (left out)", highlight=False)
    for m, r in ties.items():
        console.print(f"{m}: {r['distinct']} distinct scores over {r['sentences']} sentences; with tied scores in "
                      f"random order NonFact {r['nonfact']:.2f}, NonFact* {r['nonfact_star']:.2f}, Factual "
                      f"{r['factual']:.2f} (the trapezoidal AUC-PR favours ties; --ties random)", highlight=False)
    if calib:
        few = "; few sentences: an ECE on under 200 moves by several points from sample to sample" * (calib["n"] < 200)
        console.print(f"probability, {calib['n']} labelled sentences: ECE {calib['ece']:.4f}, Brier "
                      f"{calib['brier']:.4f} ({calib['bins']} bins; positive: minor or major inaccurate{few})")
    if answers:
        console.print(_table(answers, title=f"{name}: graded answers (positive: wrong; fractions; PRR and AURC of "
                             "rejecting by the score)", columns=("n", "wrong", "auroc", "prr", "aurc", "ece", "brier"),
                             digits=3))
        console.print("AUROC and PRR: higher is better (0.5 and 0 = random); AURC, ECE and Brier: lower is better; "
                      "'-': AUROC and PRR where the n answers with a score are all right or all wrong (nothing to "
                      "rank), ECE and Brier for a score that is not a probability", highlight=False)


def _score_on_ray(engine, path, output, resume, address, pool, as_json, options) -> None:
    """``score --engine ray``: the library's :func:`~halluscope.scale.score_with_ray` (``pool``: actors, GPUs and
    CPUs per actor, tokens per batch; ``options``: the Detector's, as the local path sets them), then a one-line
    summary."""
    from dataclasses import asdict

    from rich.text import Text

    from ..scale import score_with_ray

    if engine != "ray":
        raise ValueError(f"--engine must be 'local' or 'ray', got {engine!r}")
    if path is None or output is None:
        raise ValueError("--engine ray needs an input (a file, folder or glob of shards) and -o OUT/ (a folder)")
    if isinstance(path, list):
        raise ValueError(f"--engine ray reads one file, folder or glob, not {len(path)} paths: quote a glob ('in/*."
                         "jsonl') so that halluscope reads it, or give the folder")
    try:
        run = score_with_ray(str(path), output, address=address, num_actors=pool[0], num_gpus_per_actor=pool[1],
                             num_cpus_per_actor=pool[2], resume=resume, progress=True,
                             **({"batch_tokens": pool[3]} if pool[3] else {}), **options)
    except ImportError as e:  # Ray missing: one line, exit 2, like every library error (printed as written)
        raise ValueError(str(e)) from None
    except KeyboardInterrupt:
        say(f"interrupted: the shards finished so far are recorded in {output}/manifest.json; run the same command "
            "with --resume to go on")
        raise typer.Exit(130)
    if as_json:
        print(json.dumps(json_safe(asdict(run)), indent=1))
    line, warnings = run.report()
    err.print(Text(line), highlight=False, soft_wrap=True)  # Text: a path is never markup
    for w in warnings:
        say(w, "warning:", "yellow")
    if run.shards_failed:
        raise ValueError(f"{len(run.shards_failed)} shards could not be read (see {output}/errors/): run again to "
                         "retry them")
    if run.errors or run.errors_before or run.duplicate_ids:  # the local path's codes: 3 some skipped, 1 none scored
        if run.errors:
            say(f"{run.errors} records skipped (listed in {output}/errors/)", "warning:", "yellow")
        raise typer.Exit(3 if run.records or run.shards_skipped else 1)


def _draw(sampler, items: list[tuple[str | None, str]], template, chat: bool, settings: dict):
    """``check``'s draws: each prompt's main response and samples (``settings``: n, temperature, max_tokens, seed,
    top_logprobs) as records named by the prompt's id (else its position), with a progress bar; the prompts whose
    draws cannot be scored are reported."""
    from ..llm import DEFAULT_TEMPLATE_COMPLETIONS
    from ..llm.sampler import records_from_draws

    ids = [str(k) if i is None else i for k, (i, _) in enumerate(items)]
    if len(set(ids)) < len(ids):
        raise ValueError(f"duplicate id {next(i for i in ids if ids.count(i) > 1)!r} among the prompts")
    items = [p for _, p in items]
    tmpl = template or ("{prompt}" if chat else DEFAULT_TEMPLATE_COMPLETIONS)
    bar = _bar("sampling", len(items) * (settings["n"] + 1))
    draws = sampler.draw([tmpl.replace("{prompt}", p) for p in items], **settings,
                         stop=() if chat else ("\nQuestion:", "\nAnswer:", "\n\n"), progress=bar)
    bar(None)
    records, problems = records_from_draws(items, draws, sampler.backend.cache_id(), ids)
    for e in problems:
        say(e, "skipped", "yellow")
    return records, problems
