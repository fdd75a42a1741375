"""Seconds per answer of the response-level ensemble preset on SAC3 NQ-Open (10 samples per answer).

    .venv/bin/python benchmarks/bench_ensemble.py                  # open-ended preset, all 250 answers
    .venv/bin/python benchmarks/bench_ensemble.py --limit 50 --nli aegis
    .venv/bin/python benchmarks/bench_ensemble.py --nli-precision bf16   # where the CPU has native bf16

Times the preset's components that need no LLM (exact match, non-contradiction, semantic negentropy, BERTScore,
cosine; a judge costs whatever its LLM costs), with fresh models and empty caches, model loading timed apart.
Prints a line and adds a row to benchmarks/results/ensemble.json, with the CPU named.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="open-ended")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--nli", default=None)
    ap.add_argument("--data", default=None)
    ap.add_argument("--nli-precision", default="auto", help="auto (fp32), fp32, bf16 or int8")
    ap.add_argument("--out", default=str(HERE / "results" / "ensemble.json"))
    a = ap.parse_args()
    import torch

    from machine import cpu_info
    from halluscope.engine.components import COMPONENTS, ComponentScorer
    from halluscope.evaluation.sac3 import load_sac3
    from halluscope.combine.tuned import EnsembleConfig
    from halluscope.models.encoder import Encoder
    from halluscope.models.nli import load_nli

    torch.set_num_threads(os.cpu_count() or 1)
    items = load_sac3(a.data, a.limit)
    comps = [c for c in EnsembleConfig.preset(a.preset).components if c in COMPONENTS]
    t = time.perf_counter()
    enc, nli = Encoder(), load_nli(a.nli, precision=a.nli_precision)
    load = time.perf_counter() - t
    t = time.perf_counter()
    ComponentScorer(enc, nli, components=comps).score(items)
    wall = time.perf_counter() - t
    row = {"preset": a.preset, "components": comps, "nli": nli.name, "nli_precision": getattr(nli, "precision", None),
           "answers": len(items),
           "samples": len(items[0].samples), "load_s": round(load, 2), "wall_s": round(wall, 2),
           "s_per_answer": round(wall / len(items), 3), "nli_pairs": nli.forward_pairs,
           "encoder_texts": enc.forward_texts, "cpu": cpu_info()}
    print(json.dumps(row))
    path = Path(a.out)
    res = json.loads(path.read_text()) if path.exists() else {}
    res[f"{a.preset}@{nli.name}@{len(items)}" + ("" if a.nli_precision == "auto" else f"@{a.nli_precision}")] = row
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
