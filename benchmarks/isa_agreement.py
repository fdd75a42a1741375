"""The same answers on every x86-64 CPU: the default NLI model and the default detector run three times, each in a
fresh Python:

- natively, each library on the kernels it picks for this CPU;
- natively with every library that has a switch told to use its AVX2 kernels (numpy ``NPY_DISABLE_CPU_FEATURES=
  X86_V4``, PyTorch ``ATEN_CPU_CAPABILITY=avx2``, oneDNN ``ONEDNN_MAX_CPU_ISA=AVX2``, MKL
  ``MKL_ENABLE_INSTRUCTIONS=AVX2``, OpenBLAS ``OPENBLAS_CORETYPE=Haswell``); ONNX Runtime, which runs the NLI model
  and the encoder, has no such switch, hence:
- under QEMU's user-mode emulation of an Intel Haswell (AVX2 and FMA, no AVX512), where ONNX Runtime reads the
  emulated CPU's features with CPUID and picks its AVX2 kernels as on a real AVX2-only machine. QEMU 7.2 (Debian 12)
  mis-emulates an instruction of numpy's AVX2 sort (64-bit argsort comes out in the wrong order, or segfaults; the
  same numpy code is right on this CPU under ``NPY_DISABLE_CPU_FEATURES=X86_V4``), so numpy runs there at its SSE4.2
  baseline (``X86_V3`` disabled too) and its AVX2 code is checked by the second run instead.

    .venv/bin/python benchmarks/isa_agreement.py                  # the bundled examples, 3 samples each
    .venv/bin/python benchmarks/isa_agreement.py --samples 0      # with all their samples (much slower emulated)
    .venv/bin/python benchmarks/isa_agreement.py --cpu Skylake-Server-v4   # AVX512 without VNNI

Needs ``qemu-x86_64`` (Debian's ``qemu-user``; ``make test`` installs it as root). Each run reports: the kernels
PyTorch picks and what numpy may use, the NLI model's probabilities in fp32 (the default) and int8 on two clear pairs
and the pairs of the bundled examples (each sentence against the first sentence of each sample), the old aegis int8
model's on the clear pairs in one batch (its kernels saturate without VNNI: issue 13 measured P(contradiction) 0.08
for "He was born in Paris." on a real AVX2-only CPU, against 0.99 with VNNI; in other batches it may not), one int8
product of ONNX Runtime that shows that saturation directly (:func:`ort_int8_probe`), and every
method of the default detector per sentence (``probability`` included) and ``probability`` per answer. Prints the
largest difference of each from the native run and writes benchmarks/results/isa_agreement.json. Emulation is slow
(the detector's models load in minutes), so times here say nothing about a real AVX2 CPU's speed. The switches need
numpy >= 2.4 (its X86_V3 / X86_V4 groups); the child refuses to run where numpy ignores them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# pairs a model must read the same everywhere: an entailment and a contradiction (the pair aegis gets wrong on AVX2)
CLEAR = [("He was born in London in 1820.", "He was born in London."),
         ("He was born in London in 1820.", "He was born in Paris.")]


def child(spec: dict) -> dict:
    """Run inside the child process: everything ``spec`` asks for, on this (real or emulated) CPU."""
    import os

    import torch
    from numpy._core._multiarray_umath import __cpu_features__ as f

    from halluscope.models.nli import load_nli

    t = time.perf_counter()
    off = os.environ.get("NPY_DISABLE_CPU_FEATURES", "").split()
    if any(f.get(g, True) for g in off):  # numpy < 2.4 has no X86_V3 / X86_V4 groups and ignores them
        raise RuntimeError(f"numpy {np.__version__} did not switch off {off}: the AVX2 runs need numpy >= 2.4")
    # the kernels PyTorch picks (from CPUID, or ATEN_CPU_CAPABILITY), and numpy's AVX2 / AVX512 groups (its switch
    # applied: False where switched off)
    out: dict = {"torch": torch.backends.cpu.get_cpu_capability(), "numpy_avx2": bool(f.get("X86_V3")),
                 "numpy_avx512": bool(f.get("X86_V4"))}
    pairs = [tuple(p) for p in spec["pairs"]]
    for precision in spec.get("precisions", ("fp32", "int8")):
        out[precision] = load_nli(precision=precision).probs(pairs).tolist()
    if spec.get("probe"):
        out["ort_int8"] = ort_int8_probe()
    if spec.get("aegis"):  # one batch of its own: aegis's int8 activations are scaled per batch
        out["aegis"] = load_nli("aegis").probs([tuple(p) for p in spec["aegis"]])[:, 2].tolist()
    if spec.get("records"):
        from halluscope.pipeline import Detector

        res = Detector().score(spec["records"])
        out["answers"] = [it.passage_scores["probability"] for it in res.items]
        out["methods"] = [it.sentence_scores for it in res.items]
    out["seconds"] = time.perf_counter() - t
    return out


def ort_int8_probe(k: int = 64) -> float:
    """Which int8 kernels ONNX Runtime picked, read from one product: ``MatMulInteger`` of uint8 255s by int8 127s
    over ``k`` terms, divided by its exact value 255 x 127 x k. 1.0 where the kernel sums each product in 32 bits
    (VNNI's ``vpdpbusd``, AMX); 32767 x k / 2 over that, 0.506, where it adds two products in a saturating 16-bit
    lane first (the AVX2 kernel's ``vpmaddubsw``): the saturation that made aegis's answers differ on AVX2-only CPUs
    (issue 13), and a quick sign that ONNX Runtime sees the emulated CPU, not the host."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.full((k, 8), 127, np.int8), "b")
    graph = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe",
                              [helper.make_tensor_value_info("a", TensorProto.UINT8, [None, k])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [None, 8])], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y = session.run(None, {"a": np.full((4, k), 255, np.uint8)})[0]
    return float(y[0, 0]) / (255 * 127 * k)


# the AVX2 switches of the libraries that have one (run "switches" above)
AVX2_SWITCHES = {"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR", "ATEN_CPU_CAPABILITY": "avx2",
                 "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "OPENBLAS_CORETYPE": "Haswell"}
# under QEMU 7.2, numpy at its baseline: its AVX2 argsort is mis-emulated there (module docstring)
QEMU_NUMPY = {"NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4"}


def run(spec: dict, cpu: str | None = None, env: dict | None = None, timeout: float = 3600) -> dict:
    """:func:`child` in a fresh Python, natively (``cpu`` None) or under ``qemu-x86_64 -cpu CPU`` (numpy at its
    baseline there, :data:`QEMU_NUMPY`), with ``env`` added to its environment."""
    import os
    import tempfile

    qemu = shutil.which("qemu-x86_64")
    if cpu and qemu is None:
        raise RuntimeError("qemu-x86_64 is not installed: apt-get install qemu-user (make test does it as root)")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(spec, fh)
    try:
        cmd = [*([qemu, "-cpu", cpu] if cpu else []), sys.executable, str(Path(__file__).resolve()), "--child", fh.name]
        base = {k: v for k, v in os.environ.items() if k not in AVX2_SWITCHES}  # "native" means native
        env = {**base, **(QEMU_NUMPY if cpu else {}), **(env or {})}
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    finally:
        Path(fh.name).unlink()
    if done.returncode != 0:
        raise RuntimeError(f"the child on {cpu or 'this CPU'} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def example_spec(samples: int) -> dict:
    """The bundled examples (``samples`` first samples each, 0: all) and their NLI pairs, plus :data:`CLEAR`."""
    import dataclasses

    from halluscope.cli import example_path
    from halluscope.io import read_records
    from halluscope.text import split_sentences

    recs, _ = read_records(example_path())
    recs = [dataclasses.replace(r, samples=r.samples[:samples] if samples else r.samples) for r in recs]
    pairs = [[split_sentences(s)[0], sent] for r in recs for sent in split_sentences(r.response) for s in r.samples]
    return {"pairs": [list(p) for p in CLEAR] + pairs, "aegis": [list(p) for p in CLEAR], "probe": True,
            "records": [{"id": r.id, "response": r.response, "samples": r.samples} for r in recs]}


def compare(native: dict, emulated: dict) -> dict:
    def largest(a, b) -> float:  # equal values (the same +inf or NaN included) differ by 0
        a, b = np.asarray(a, float), np.asarray(b, float)
        d = np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0.0, np.abs(a - b))
        return float(np.nan_to_num(d, nan=np.inf).max()) if d.size else 0.0

    rows = {k: largest(native[k], emulated[k]) if k in native else None for k in ("fp32", "int8", "aegis", "answers")}
    for m in (native.get("methods") or [{}])[0]:  # each of the detector's methods, over every sentence
        a, b = (np.concatenate([np.asarray(r[m], float) for r in d["methods"]]) for d in (native, emulated))
        rows[f"method {m}"] = largest(a, b)
    for k in ("fp32", "int8"):
        if k in native:
            rows[f"{k}_labels_same"] = bool((np.argmax(native[k], 1) == np.argmax(emulated[k], 1)).all())
    return rows


def _fmt(x) -> str:
    return str(x) if isinstance(x, bool) or x is None else f"{x:.2g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--samples", type=int, default=3, help="samples per bundled example (0: all)")
    ap.add_argument("--cpu", default="Haswell-v4", help="the QEMU CPU model to emulate (qemu-x86_64 -cpu help)")
    ap.add_argument("--out", default=str(HERE / "results" / "isa_agreement.json"))
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(json.loads(Path(a.child).read_text()))))
        return
    sys.path.insert(0, str(HERE))
    from machine import cpu_info

    spec = example_spec(a.samples)
    runs = {"native": run(spec), "switches": run(spec, env=AVX2_SWITCHES), "emulated": run(spec, a.cpu)}
    gaps = {name: compare(runs["native"], r) for name, r in runs.items() if name != "native"}
    print(f"host: {cpu_info()}; PyTorch's kernels / numpy AVX2, AVX512: " + "; ".join(
        f"{n} {r['torch']} / {r['numpy_avx2']}, {r['numpy_avx512']}" for n, r in runs.items()) + f" ({a.cpu})")
    print(f"{len(spec['pairs'])} NLI pairs, {len(spec['records'])} answers; largest |native - other|:")
    print(f"  {'':24s} {'switches':>12s} {'emulated':>12s}")
    for k in gaps["emulated"]:
        print(f"  {k:24s} " + " ".join(f"{_fmt(gaps[n][k]):>12s}" for n in ("switches", "emulated")))
    aegis = ", ".join(f"{n} {r['aegis'][1]:.3f}" for n, r in runs.items())
    secs = ", ".join(f"{n} {r['seconds']:.0f}" for n, r in runs.items())
    probe = ", ".join(f"{n} {r['ort_int8']:.3f}" for n, r in runs.items())
    print(f"aegis P(contradiction) of '{CLEAR[1][1]}': {aegis}; child seconds: {secs}")
    print(f"ONNX Runtime's int8 product over its exact value (1: 32-bit sums; 0.506: AVX2's saturation): {probe}")
    Path(a.out).write_text(json.dumps({"host": cpu_info(), "emulated_cpu": a.cpu, "switches": AVX2_SWITCHES,
                                       "samples": a.samples, "pairs": len(spec["pairs"]),
                                       "answers": len(spec["records"]), "gaps": gaps, "runs": runs}, indent=1))
    print(f"written to {a.out}")


if __name__ == "__main__":
    main()
