"""Sampling throughput of the LLM backends on this machine, and the cost of a re-run served from the cache.

    .venv/bin/python benchmarks/bench_llm.py                 # the packaged Gemma-3-270M behind the llama.cpp server
    .venv/bin/python benchmarks/bench_llm.py --prompts 8 --samples 5 --max-tokens 48

For the same prompts and seeds: (1) single stream (concurrency 1) over HTTP, (2) concurrent (4 requests in
flight) over HTTP, (3) the local llama-cpp backend in-process, (4) the concurrent run again from the SQLite cache.
Prints a table and writes benchmarks/results/llm.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROMPTS = [
    "Who was Ada Lovelace?", "What is the capital of Australia?", "Who wrote Pride and Prejudice?",
    "When did the Berlin Wall fall?", "What is photosynthesis?", "Who painted the Mona Lisa?",
    "What is the boiling point of water?", "Who was Alan Turing?", "What is the largest planet?",
    "Who discovered penicillin?", "What is the speed of light?", "Who was Marie Curie?",
]


def run(sampler, prompts, n, max_tokens):
    t = time.perf_counter()
    draws = sampler.draw([f"Question: {p}\nAnswer:" for p in prompts], n=n, max_tokens=max_tokens, seed=0)
    dt = time.perf_counter() - t
    toks = sum(g.completion_tokens for d in draws for g in [d.main, *d.samples] if g is not None)
    cached = sum(d.usage()["cached"] for d in draws)
    return {"seconds": round(dt, 3), "generations": len(draws) * (n + 1), "completion_tokens": toks,
            "tokens_per_s": round(toks / dt, 1) if dt > 0 else None, "from_cache": cached,
            "ok": all(d.ok for d in draws)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=6)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--out", default=str(HERE / "results" / "llm.json"))
    a = ap.parse_args()
    from halluscope.llm import GenerationCache, Sampler
    from halluscope.llm.http import OpenAIBackend
    from halluscope.llm.local import LlamaCppBackend
    from halluscope.llm.server import LlamaServer

    prompts = PROMPTS[: a.prompts]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp, LlamaServer("gemma") as server:
        be = OpenAIBackend("gemma", base_url=server.base_url, timeout=300)
        run(Sampler(be), prompts[:1], 1, 8)  # warm-up
        rows["http, single stream"] = run(Sampler(be, concurrency=1), prompts, a.samples, a.max_tokens)
        cache = GenerationCache(Path(tmp) / "c.sqlite")
        rows["http, 4 concurrent"] = run(Sampler(be, cache=cache, concurrency=4), prompts, a.samples, a.max_tokens)
        rows["http, 4 concurrent, re-run from cache"] = run(Sampler(be, cache=cache, concurrency=4), prompts,
                                                             a.samples, a.max_tokens)
    local = LlamaCppBackend("gemma")
    run(Sampler(local), prompts[:1], 1, 8)
    rows["llama-cpp in-process, single stream"] = run(Sampler(local, concurrency=1), prompts, a.samples, a.max_tokens)
    from machine import cpu_info

    out = {"machine": {"cpu": cpu_info(), "cpus": __import__("os").cpu_count(), "python": platform.python_version()},
           "prompts": len(prompts), "samples": a.samples, "max_tokens": a.max_tokens, "runs": rows}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"{'run':45s} {'gens':>5s} {'tokens':>7s} {'seconds':>8s} {'tok/s':>7s} {'cached':>6s}")
    for k, r in rows.items():
        print(f"{k:45s} {r['generations']:5d} {r['completion_tokens']:7d} {r['seconds']:8.2f} "
              f"{r['tokens_per_s'] or 0:7.1f} {r['from_cache']:6d}")


if __name__ == "__main__":
    main()
