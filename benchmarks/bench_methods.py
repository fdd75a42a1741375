"""Wall time and peak memory of each halluscope method on WikiBio GPT-3, one fresh process per method.

    .venv/bin/python benchmarks/bench_methods.py                       # every method, all 238 passages
    .venv/bin/python benchmarks/bench_methods.py --methods nli --passages 24
    .venv/bin/python benchmarks/bench_methods.py --matmul               # the machine's fp32 matmul ceiling

Prints a table and writes benchmarks/results/methods.json (one entry per method). Model loading is timed apart
from scoring. Peak RSS is the process's ru_maxrss (it includes the Python interpreter and the loaded libraries).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
METHODS = {
    "ngram1": "ngram1_avg,ngram1_max",
    "ngram1-5": "ngram",
    "bertscore": "bertscore",
    "nli": "nli",
    "bertscore-bf16": "bertscore",
    "bertscore-torch": "bertscore",
}
ENCODERS = {  # the default encoder (fp32; on a CPU through ONNX Runtime) against PyTorch's bf16 and fp32
    "bertscore-bf16": {"precision": "bf16", "runtime": "torch"},
    "bertscore-torch": {"precision": "fp32", "runtime": "torch"},
}


def worker(key: str, passages: int | None, data: str | None) -> dict:
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    from halluscope import Detector
    from halluscope.evaluation.wikibio import load_wikibio
    from halluscope.scorers.base import PreparedItem

    recs = load_wikibio(data, list(range(passages)) if passages else None)
    det = Detector(methods=METHODS[key])
    t = time.perf_counter()
    if key in ENCODERS:
        from halluscope.models.encoder import Encoder

        det._models["encoder"] = Encoder(**ENCODERS[key])
    scorers = det.scorers()  # loads models
    # warm-up on a tiny item so that lazily loaded pieces (spaCy, tokenizers) count as load time
    warm = PreparedItem.from_record(recs[0], recs[0].samples[:1])
    for s in scorers:
        s.score([warm])
    for m in det._models.values():
        if hasattr(m, "_cache"):
            m._cache.clear()
        if hasattr(m, "forward_pairs"):
            m.forward_pairs = m.forward_tokens = 0
        if hasattr(m, "forward_texts"):
            m.forward_texts = m.forward_tokens = 0
    load = time.perf_counter() - t
    t = time.perf_counter()
    res = det.score(recs)
    wall = time.perf_counter() - t
    out = {
        "method": key,
        "methods": METHODS[key],
        "passages": len(recs),
        "sentences": sum(len(it.sentences) for it in res),
        "load_s": round(load, 3),
        "wall_s": round(wall, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if "nli" in det._models:
        nli = det._models["nli"]
        out.update(pairs=nli.forward_pairs, pairs_per_s=round(nli.forward_pairs / wall, 2),
                   tokens=nli.forward_tokens, tokens_per_s=round(nli.forward_tokens / wall, 1))
    if "encoder" in det._models:
        enc = det._models["encoder"]
        out["encoder"] = f"{enc.precision}, {'onnxruntime' if getattr(enc, 'graph', None) else 'torch'}"
        out.update(texts=enc.forward_texts, texts_per_s=round(enc.forward_texts / wall, 2),
                   tokens=enc.forward_tokens, tokens_per_s=round(enc.forward_tokens / wall, 1))
    return out


def matmul_ceiling(n: int = 2048, repeats: int = 10, native_only: bool = False, device: str = "cpu") -> dict:
    """Measured fp32 and bf16 GEMM throughput (GFLOP/s) with torch on this machine's ``device`` (the ceiling model
    inference can reach); ``native_only`` leaves bf16 out where the device only emulates it."""
    import torch

    from halluscope.models.encoder import bf16_supported

    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    out = {"threads": torch.get_num_threads()}
    native = bf16_supported(device.split(":")[0])
    for dtype in (torch.float32, torch.bfloat16) if native or not native_only else (torch.float32,):
        a = torch.randn(n, n, dtype=dtype, device=device)
        b = torch.randn(n, n, dtype=dtype, device=device)
        for _ in range(3):
            a @ b
        sync()
        t = time.perf_counter()
        for _ in range(repeats):
            a @ b
        sync()
        dt = (time.perf_counter() - t) / repeats
        out[str(dtype).replace("torch.", "")] = round(2 * n**3 / dt / 1e9, 1)
    return out


def ort_matmul_ceiling(n: int = 2048, repeats: int = 10) -> float:
    """fp32 GEMM GFLOP/s of ONNX Runtime's own kernels (one MatMul node), the ceiling of the default fp32 runtime."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = [helper.make_tensor_value_info(k, TensorProto.FLOAT, [n, n]) for k in "ABC"]
    graph = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["C"])], "gemm", x[:2], x[2:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() or 1
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = {k: np.random.default_rng(0).standard_normal((n, n), dtype=np.float32) for k in "AB"}
    s.run(None, feed)
    t = time.perf_counter()
    for _ in range(repeats):
        s.run(None, feed)
    return round(2 * n**3 / ((time.perf_counter() - t) / repeats) / 1e9, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", default=",".join(k for k in METHODS if k not in ENCODERS),
                    help=f"comma-separated, from {', '.join(METHODS)} (default: all but the encoder variants)")
    ap.add_argument("--passages", type=int, default=None, help="first K passages (default: all 238)")
    ap.add_argument("--data", default=None, help="data folder (default: ../shared/data)")
    ap.add_argument("--out", default=str(HERE / "results" / "methods.json"))
    ap.add_argument("--matmul", action="store_true", help="measure the matmul ceiling only")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker, a.passages, a.data)))
        return
    if a.matmul:
        print(json.dumps(matmul_ceiling()))
        return
    from machine import cpu_info

    machine = {"cpu": cpu_info(), "cpus": os.cpu_count(), "platform": platform.platform(),
               "python": platform.python_version()}
    path = Path(a.out)
    results = json.loads(path.read_text()) if path.exists() else {}
    for key in a.methods.split(","):
        cmd = [sys.executable, __file__, "--worker", key]
        if a.passages:
            cmd += ["--passages", str(a.passages)]
        if a.data:
            cmd += ["--data", a.data]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr[-2000:], file=sys.stderr)
            raise SystemExit(f"worker {key} failed")
        row = json.loads(r.stdout.strip().splitlines()[-1])
        row["machine"] = machine
        results[f"{key}@{row['passages']}"] = row
        print(f"{key:10s} passages={row['passages']:4d} load={row['load_s']:7.2f}s wall={row['wall_s']:8.2f}s "
              f"peak_rss={row['peak_rss_mb']:7.1f}MB " + " ".join(f"{k}={row[k]}" for k in
                                                          ("pairs_per_s", "texts_per_s", "tokens_per_s") if k in row))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
