"""On a leased GPU machine: a larger NLI model as a teacher. all-mpnet-base-v2 (12 layers, 768-d; carried in NF4 by
``pack4.py``, since the call takes 64 MiB) fine-tuned on the mixture by ``train_nli`` (the library function behind
``halluscope train-nli``), all weights trained; then it scores the mixture's own pairs (the soft labels
``distill.py`` trains a student on) and every recorded NLI input of the evaluations (``nli_replay.py``), both in
fp32, and writes those probabilities to OUT/NAME_probs.npz (``pool``, ``units``, ``units2``), printing its log and
its training record (README.md beside this file). ``distill.py`` reads them as ``CARRY/teacher_probs.npz``.

  python3 benchmarks/gpu_nli/teacher.py OUT CARRY '{"epochs": 2, "lr": 2e-5, "batch_size": 32}' [tiny]

CARRY holds ``mpnet4.npz.xz``, ``mix.jsonl.xz`` and ``units.jsonl.xz``. Optional settings beside train_nli's: ``name``
(of the run and its files; two runs can share the GPU), ``mix`` (another mixture file in CARRY), ``pool`` (false: do
not score the mixture's pairs), ``pack`` (true: also send the teacher back in NF4, ``pack4.py``, in 15 MB parts, to
score more pairs with it elsewhere). A ``units2.jsonl.xz`` in CARRY is scored too (more pairs to distil on)."""
import json
import lzma
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, "src")
sys.path.insert(0, str(Path(__file__).parent))
import numpy as np  # noqa: E402
import torch  # noqa: E402

from device_run import WORK, read_units, score_units, send_parts  # noqa: E402 (beside this file)
from pack4 import pack, unpack  # noqa: E402
from halluscope.models.nli_train import _load_mixture, _read_pairs, _Run, export_nli, train_nli  # noqa: E402


def log(*a):
    print(*a, flush=True)


def train_teacher(tdir: Path, base: Path, mix: Path, dev: str, kw: dict, stop: float) -> dict:
    """``train_nli`` with every weight trained, max length 128, seed 0, stopped after ``stop`` minutes; a run that
    ran out of time is exported at the step it reached, marked as such (``stopped_at``). Returns its record."""
    rec = train_nli(data="none", out=tdir, base=str(base), mixture=mix, device=dev, eval_limit=0, seed=0,
                    max_length=128, train_embeddings=True, stop_after_minutes=stop, checkpoint_minutes=100,
                    log=log, **kw)
    if rec.get("stopped"):
        done = _load_mixture(tdir, Path("none"), None)
        run = _Run(tdir, str(base), done, kw["batch_size"], kw["epochs"], kw["lr"], 128, True, log,
                   torch.device(dev))
        export_nli(run.model, run.tok, tdir, done, dict(base="all-mpnet-base-v2 (NF4)", stopped_at=run.step,
                                                        total=run.total, **kw), Path("none"), 0, log)
    return rec


def main() -> None:
    out, carry, kw, tiny = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]), len(sys.argv) > 4
    name, mixname = kw.pop("name", "teacher"), kw.pop("mix", "mix.jsonl.xz")
    score_pool, send_nf4 = kw.pop("pool", True), kw.pop("pack", False)
    work = WORK / name
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    t0, dev = time.time(), "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True  # a teacher's scores: TF32 matmuls are fine
    with lzma.open(carry / "mpnet4.npz.xz", "rb") as f, open(work / "mpnet4.npz", "wb") as g:
        shutil.copyfileobj(f, g)
    base = work / "mpnet"
    unpack(work / "mpnet4.npz", base)
    mix = carry / mixname  # train_nli reads it as it is
    pairs = _read_pairs(mix)
    if tiny:  # a slice, written out for train_nli
        pairs, mix, kw = pairs[:300], work / "mix.jsonl", dict(kw, epochs=0.1)
        mix.write_text("".join(json.dumps(p.__dict__) + "\n" for p in pairs), encoding="utf-8")
    log(f"unpacked, {len(pairs)} pairs, {time.time() - t0:.0f} s")
    tdir, stop = work / "T", float(kw.pop("stop_minutes", 5.0))
    train_teacher(tdir, base, mix, dev, kw, stop)
    log(f"trained, {time.time() - t0:.0f} s")
    model = tdir / "model"
    units = read_units(carry, tiny)
    more = read_units(carry, tiny, "units2.jsonl.xz") if (carry / "units2.jsonl.xz").is_file() else []
    pool = [(p.premise, p.hypothesis) for p in pairs] if score_pool else []
    probs = score_units(model, pool + units + more, dev)
    n, m = len(pool), len(pool) + len(units)
    np.savez_compressed(out / f"{name}_probs.npz", pool=probs[:n], units=probs[n:m], units2=probs[m:])
    log("training.json", (model / "training.json").read_text(encoding="utf-8"))
    log(f"scored {n} pool pairs, {len(units)} + {len(more)} units; {time.time() - t0:.0f} s")
    if send_nf4:  # the teacher itself, to score more pairs elsewhere (pack4.py unpack joins nothing: cat the parts)
        pack(model, work / "t4.npz")
        send_parts((work / "t4.npz").read_bytes(), out, f"{name}_nf4.npz")
        log(f"packed, {(work / 't4.npz').stat().st_size / 1e6:.1f} MB; done {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
