"""NLI speed and agreement: pairs/s and tokens/s of the NLI model in each precision the CPU offers, the achieved
GFLOP/s against the machine's measured matrix-multiply ceiling, and how far int8 / bf16 probabilities are from fp32.

    .venv/bin/python benchmarks/bench_nli.py                      # halluscope-nli, 10 WikiBio passages, 20 samples
    .venv/bin/python benchmarks/bench_nli.py --passages 4 --aegis  # also time the old aegis model
    .venv/bin/python benchmarks/bench_nli.py --units UNITS.jsonl.xz  # also 6,000 pairs of every evaluation's inputs

The pairs are the ones SelfCheck-NLI sends for the first K WikiBio passages: sentence-sized evidence (each sentence
against the 3 closest sentences of each sample, the default) and, for comparison, whole samples (read in sentence
windows where they exceed the model's window). Prints a table and writes benchmarks/results/nli.json. FLOPs per pair
are counted as 2 x (non-embedding parameters) x tokens, attention's quadratic term left out (it is small at these
lengths), so the GFLOP/s figure is a lower bound.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from machine import cpu_info

HERE = Path(__file__).resolve().parent


def wikibio_pairs(passages: int, data: str | None, evidence) -> list[tuple[str, str]]:
    from halluscope.evaluation.wikibio import load_wikibio
    from halluscope.models.encoder import Encoder
    from halluscope.scorers.base import PreparedItem
    from halluscope.scorers.nli import evidence_premises

    items = [PreparedItem.from_record(r) for r in load_wikibio(data, list(range(passages)))]
    enc = Encoder() if evidence != "sample" else None
    prem = evidence_premises(enc, [it.sentences for it in items], [it.evidence for it in items], evidence)
    return list(dict.fromkeys((e, s) for it, pr in zip(items, prem) for s, row in zip(it.sentences, pr) for e in row))


def recorded_pairs(path: str, n: int) -> list[tuple[str, str]]:
    """``n`` unique pairs drawn (seed 1) from recorded NLI inputs: what every evaluation asks, not only WikiBio."""
    import random

    from halluscope.models.nli_data import _rows

    units = list(dict.fromkeys(tuple(x) for x in _rows(Path(path))))
    random.Random(1).shuffle(units)
    return units[:n]


def time_model(nli, pairs) -> tuple[dict, np.ndarray, dict]:
    nli.probs(pairs[:8])
    nli.clear_cache()
    nli.forward_pairs = nli.forward_tokens = nli.padded_tokens = 0
    t = time.perf_counter()
    p = nli.probs(pairs)
    wall = time.perf_counter() - t
    row = {"pairs": len(pairs), "forwarded": nli.forward_pairs, "wall_s": round(wall, 2),
           "pairs_per_s": round(len(pairs) / wall, 1), "tokens_per_s": round(nli.forward_tokens / wall, 1),
           "mean_tokens": round(nli.forward_tokens / max(nli.forward_pairs, 1), 1)}
    if nli.padded_tokens:  # positions computed for padding, as a share of the real tokens
        row["padding"] = round(nli.padded_tokens / max(nli.forward_tokens, 1) - 1, 4)
    model = getattr(nli, "model", None)
    if model is not None and hasattr(model, "base_model"):
        emb = sum(p.numel() for n, p in model.named_parameters() if "embeddings" in n)
        total = sum(p.numel() for p in model.parameters())
        if total > emb:  # quantized modules hide their weights from parameters(): counted from fp32 where known
            row["gflop_per_s"] = round(2 * (total - emb) * nli.forward_tokens / wall / 1e9, 1)
    return row, p, dict(nli._unit_cache)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=10)
    ap.add_argument("--data", default=None)
    ap.add_argument("--nli", default="halluscope-nli")
    ap.add_argument("--aegis", action="store_true", help="also time the aegis model")
    ap.add_argument("--units", default=None, help="also measure on N pairs drawn from a file of recorded NLI inputs "
                    "(JSON Lines of [premise, hypothesis], plain or .xz: benchmarks/gpu_nli/nli_replay.py record)")
    ap.add_argument("--n-units", type=int, default=6000)
    ap.add_argument("--out", default=str(HERE / "results" / "nli.json"))
    a = ap.parse_args()
    import torch
    from bench_methods import matmul_ceiling, ort_matmul_ceiling

    from halluscope.models.encoder import bf16_supported
    from halluscope.models.nli import load_nli

    torch.set_num_threads(os.cpu_count() or 1)
    info = {"cpu": cpu_info(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "matmul_gflops": matmul_ceiling(native_only=True) | {"fp32_onnxruntime": ort_matmul_ceiling()},
            "passages": a.passages}
    rows = {}
    for evidence in (3, "sample") + (("recorded",) if a.units else ()):
        pairs = recorded_pairs(a.units, a.n_units) if evidence == "recorded" else wikibio_pairs(a.passages, a.data,
                                                                                               evidence)
        ref = None
        # fp32 (the default) runs on the model's ONNX graph; "fp32-torch" is the same model in eager PyTorch
        precisions = ["fp32", "fp32-torch", "int8"] + (["bf16"] if bf16_supported() else [])
        for prec in precisions:
            kw = {"precision": "fp32", "runtime": "torch"} if prec == "fp32-torch" else {"precision": prec}
            row, p, units = time_model(load_nli(a.nli, **kw), pairs)
            if ref is None:
                ref, ref_units, gflop = p, units, row.get("gflop_per_s")
            else:
                row["max_abs_diff_vs_fp32"] = float(f"{np.abs(p - ref).max():.3g}")
                # per window: a long premise takes its most entailing window's row, so a near tie between two
                # windows can switch the row a pair gets while no window's probabilities move much
                row["max_abs_diff_windows"] = float(f"{max(np.abs(units[u] - ref_units[u]).max() for u in units):.3g}")
                row["top_label_agreement"] = round(float((p.argmax(1) == ref.argmax(1)).mean()), 4)
                row["gflop_per_s"] = round(gflop * row["tokens_per_s"] / rows[f"{a.nli} fp32 evidence={evidence}"]
                                           ["tokens_per_s"], 1) if gflop else None
            rows[f"{a.nli} {prec} evidence={evidence}"] = row
            print(f"{a.nli:14s} {prec:10s} evidence={str(evidence):6s} " + " ".join(f"{k}={v}" for k, v in row.items()))
        if a.aegis:
            row, _, _ = time_model(load_nli("aegis"), pairs)
            rows[f"aegis int8 evidence={evidence}"] = row
            print(f"{'aegis':14s} int8  evidence={str(evidence):6s} " + " ".join(f"{k}={v}" for k, v in row.items()))
    print(json.dumps(info))
    path = Path(a.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": info, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
