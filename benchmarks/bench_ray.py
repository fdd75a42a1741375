"""Records/s of batch scoring in one process, on Ray with 1 actor and on Ray with 2 actors (issue 16).

    nice -n 10 .venv/bin/python benchmarks/bench_ray.py             # WikiBio 0-19, 10 samples, default methods
    .venv/bin/python benchmarks/bench_ray.py --passages 4 --samples 4 --methods ngram1_max    # a quick check

The same WikiBio slice is scored three ways, all with ``chunk_size`` records per chunk of model work (default 4, so
20 passages make 5 batches for the actors to share) and torch using the machine's cores:

- one process: a fresh subprocess; model loading timed apart from scoring; ``Detector.timings`` splits the scoring
  time by method, and the NLI pairs and encoder texts that went through the models are counted (the workload a
  GPU would take over);
- Ray, 1 actor (all cores as its torch threads) and Ray, 2 actors (one core each): a local cluster started once (its
  start timed apart), then :func:`halluscope.scale.score_with_ray` (wall of the call: actors started, models loaded
  in each, batches scored, Parquet parts written); the actors' load time and summed scorer seconds are reported.

Every Ray run is checked against the one-process scores (max absolute difference over every method). The three
configurations run in ``--repeats`` interleaved rounds (default 2) and the table shows each one's fastest round,
with every round's wall and the load average beside it: on a shared machine other work slows some rounds. Prints a
table and writes ``runs/bench_ray.json`` (``runs/`` is not tracked), with the CPU model and its vector flags.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import cpu_info, cpu_name

ROOT = Path(__file__).resolve().parents[1]
def cpu() -> dict:
    """The CPU (``machine.cpu_info``) and the load average when the run started."""
    return {**cpu_info(), "loadavg_at_start": os.getloadavg()}


def slice_records(passages: int, samples: int):
    from halluscope.evaluation.wikibio import load_wikibio

    recs = load_wikibio(None, list(range(passages)))
    for r in recs:
        r.samples = r.samples[:samples]
    return recs


def one_process_worker(args) -> None:
    """Runs in the subprocess: load, score, print the timings as JSON, write the scores for the comparison."""
    import torch

    torch.set_num_threads(args.threads or os.cpu_count() or 1)
    from halluscope import Detector

    recs = slice_records(args.passages, args.samples)
    t = time.perf_counter()
    det = Detector(methods=args.methods, chunk_size=args.chunk_size)
    det.scorers()
    load = time.perf_counter() - t
    t, cpu0 = time.perf_counter(), time.process_time()
    res = det.score(recs)
    wall, cpu_s = time.perf_counter() - t, time.process_time() - cpu0
    res.to_df("sentence").to_parquet(args.out / "one_process.parquet", index=False)
    counts = (("nli", "forward_pairs"), ("encoder", "forward_texts"))
    models = {k: getattr(det._models.get(k), attr, None) for k, attr in counts}
    print(json.dumps({"load_s": load, "score_s": wall, "cpu_s": cpu_s, "records": len(res.items),
                      "sentences": sum(len(it.sentences) for it in res.items), "scorer_seconds": det.timings,
                      "nli_pairs": models["nli"], "encoder_texts": models["encoder"]}))


def one_process(args) -> dict:
    cmd = [sys.executable, __file__, "--worker", "--passages", str(args.passages), "--samples", str(args.samples),
           "--chunk-size", str(args.chunk_size), "--out", str(args.out), "--threads", str(args.threads or 0)]
    cmd += ["--methods", args.methods] if args.methods else []
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    r = json.loads(done.stdout.strip().splitlines()[-1])
    return {"engine": "one process", "actors": 0, **r, "wall_s": r["load_s"] + r["score_s"]}


def max_difference(out: Path, reference: Path) -> float:
    import numpy as np
    import pandas as pd

    from halluscope.scale import read_output

    a, b = pd.read_parquet(reference), read_output(out, "sentence")
    cols = [c for c in a.columns if a[c].dtype.kind == "f" and c != "label"]
    return max(float(np.nanmax(np.abs(a[c].to_numpy(float) - b[c].to_numpy(float)))) for c in cols)


def on_ray(args, recs, actors: int) -> dict:
    from halluscope.scale import score_with_ray

    out = args.out / f"ray{actors}"
    t = time.perf_counter()
    run = score_with_ray(recs, out, methods=args.methods, num_actors=actors, batch_tokens=args.batch_tokens,
                         chunk_size=args.chunk_size, resume=False, num_cpus_per_actor=args.threads or None)
    wall = time.perf_counter() - t
    load = max(run.load_seconds.values())
    return {"engine": f"Ray, {actors} actor{'s' * (actors > 1)}", "actors": actors, "wall_s": wall, "load_s": load,
            "score_s": wall - load, "records": run.records, "sentences": run.sentences, "batches": run.batches,
            "batch_seconds": run.batch_seconds, "cpu_s": run.batch_cpu_seconds, "scorer_seconds": run.scorer_seconds,
            "max_abs_diff_vs_one_process": max_difference(out, args.out / "one_process.parquet")}


def table(rows: list[dict]) -> str:
    """Wall: the whole call (for Ray: actors started, models loaded in each, batches, Parquet written); model load:
    the slowest actor's; in-batch: the time inside Detector.score, summed over actors (the rest of the wall is what
    Ray and loading cost); CPU s per record: the CPU time of that scoring (all threads), which other work on the
    machine does not inflate as it does wall time."""
    head = ("| engine | wall s | model load s | in-batch scoring s (sum over actors) | CPU s per record | "
            "records/s (wall) | records/s (wall minus load) | max abs diff vs one process |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for r in rows:
        diff = r.get("max_abs_diff_vs_one_process")
        inside = r.get("batch_seconds", r["score_s"])
        lines.append(f"| {r['engine']} | {r['wall_s']:.1f} | {r['load_s']:.1f} | {inside:.1f} | "
                     f"{r['cpu_s'] / r['records']:.2f} | "
                     f"{r['records'] / r['wall_s']:.3f} | {r['records'] / r['score_s']:.3f} | "
                     f"{'-' if diff is None else f'{diff:.1e}'} |")
    return "\n".join(lines)


def best_of(runs: list[dict]) -> dict:
    """The run with the smallest wall (the least disturbed by other work on a shared machine), with every wall."""
    best = dict(min(runs, key=lambda r: r["wall_s"]))
    best["walls_s"] = [round(r["wall_s"], 1) for r in runs]
    best["loadavg_1min"] = [r["loadavg_1min"] for r in runs]
    return best


def rounds(args, recs) -> list[dict]:
    """``--repeats`` rounds of the three configurations, interleaved, so a burst of other load hits all alike."""
    runs: dict[str, list[dict]] = {}
    for _ in range(args.repeats):
        for make in (lambda: one_process(args), lambda: on_ray(args, recs, 1), lambda: on_ray(args, recs, 2)):
            load = os.getloadavg()[0]
            r = make()
            r["loadavg_1min"] = round((load + os.getloadavg()[0]) / 2, 2)
            runs.setdefault(r["engine"], []).append(r)
    return [best_of(v) for v in runs.values()]


def main(args) -> None:
    import ray

    machine = cpu()
    args.out = Path(tempfile.mkdtemp(prefix="bench_ray_"))
    try:
        recs = slice_records(args.passages, args.samples)
        t = time.perf_counter()
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        cluster_start = time.perf_counter() - t
        try:
            rows = rounds(args, recs)
        finally:
            ray.shutdown()
    finally:
        shutil.rmtree(args.out, ignore_errors=True)
    print(f"{cpu_name(machine)}; Ray cluster start "
          f"{cluster_start:.1f} s; {args.passages} passages x {args.samples} samples, methods "
          f"{args.methods or 'default'}, chunk {args.chunk_size}; best of {args.repeats} interleaved rounds")
    print(table(rows))
    for r in rows:
        print(f"{r['engine']}: walls {r['walls_s']} s, load average {r['loadavg_1min']}, scorer seconds "
              + ", ".join(f"{k} {v:.1f}" for k, v in r["scorer_seconds"].items()))
    result = {"machine": machine, "ray_cluster_start_s": cluster_start, "passages": args.passages,
              "samples": args.samples, "methods": args.methods or "default", "chunk_size": args.chunk_size,
              "batch_tokens": args.batch_tokens, "repeats": args.repeats, "ray": ray.__version__, "rows": rows}
    dest = ROOT / "runs" / "bench_ray.json"
    dest.parent.mkdir(exist_ok=True)
    dest.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written to {dest}")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--passages", type=int, default=20)
    p.add_argument("--samples", type=int, default=10)
    p.add_argument("--methods", default=None, help="comma-separated; default: the default methods")
    p.add_argument("--chunk-size", type=int, default=4, help="records per chunk of model work (and per batch)")
    p.add_argument("--batch-tokens", type=int, default=1, help="1: one chunk per batch (the default here)")
    p.add_argument("--repeats", type=int, default=2, help="interleaved rounds; the table shows each one's best")
    p.add_argument("--threads", type=int, default=0, help="torch threads of the process and of each actor (0: the "
                   "cores, shared among the actors)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    return p.parse_args()


if __name__ == "__main__":
    a = parse()
    if a.worker:
        one_process_worker(a)
    else:
        main(a)
