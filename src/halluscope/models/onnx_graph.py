"""fp32 inference of a Hugging Face model through ONNX Runtime (the NLI classifier's logits, the encoder's hidden
states): the same model, the same fp32 arithmetic, in other kernels.

On two AVX512 AMD EPYC cores ONNX Runtime ran halluscope-nli's fp32 graph 1.8-2.0x faster than eager PyTorch, whose
fp32 GEMM reaches about half of ONNX Runtime's there (BENCHMARKS.md; expect less on Intel CPUs and on AVX2-only ones),
and the two agreed within 5.3e-6 per probability. Nothing is quantized and nothing runs in reduced precision.
Batches go to the session in slices of a few hundred positions (:func:`slices`), so a layer's activations stay in the
CPU's caches.

The graph is exported once per model, on first use, with PyTorch's exporter (eager attention, dynamic batch and
length axes, opset 17), into ``onnx/`` of the user cache (:func:`halluscope.userdirs.user_cache_dir`), under a key
made of the model's files, its outputs, the exporting versions and :data:`EXPORT_VERSION`, so a retrained model,
another PyTorch or a change to :func:`export` gets its own graph. Before a graph is used, its outputs on a padded
probe batch are compared with PyTorch's (:func:`check`). The most recently used :data:`KEEP` graphs are kept, older
ones pruned.
Writes go through a unique temporary file and an atomic rename, so parallel workers never read half a graph.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from ..userdirs import user_cache_dir

log = logging.getLogger(__name__)
OPSET = 17
EXPORT_VERSION = 1  # bump when export() changes what it writes
KEEP = 6  # graphs kept in the cache folder (the NLI's, the encoder's, a layer sweep's, ...); older ones deleted
TOLERANCE = 1e-4  # largest output difference from PyTorch on the probe batch (hidden states: relative to their scale)
# positions (rows x length) per session call: about 1.1x whole batches of 32 NLI pairs; 1,024 measured alike on the
# default detector, and the smaller slice keeps a layer's activations in smaller caches (BENCHMARKS.md)
SLICE_TOKENS = 512
_WEIGHT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin")


def cache_dir() -> Path:
    return user_cache_dir() / "onnx"


def graph_key(model_dir: str | Path, input_names: list[str], outputs: tuple[str, ...] = ("logits",)) -> str:
    """A digest of the model's weights and config, the inputs and outputs, and the versions that export the graph."""
    import onnx
    import torch
    import transformers

    h = hashlib.sha256(f"{EXPORT_VERSION}|{OPSET}|{torch.__version__}|{transformers.__version__}|"
                       f"{onnx.__version__}|{','.join(input_names)}".encode())
    if tuple(outputs) != ("logits",):  # the classifiers' keys stay what they were
        h.update(f"|{','.join(outputs)}".encode())
    found = False
    for name in _WEIGHT_FILES:
        f = Path(model_dir) / name
        if f.is_file():
            found = found or name != "config.json"
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 22), b""):
                    h.update(block)
    if not found:
        raise FileNotFoundError(f"no single weights file ({', '.join(_WEIGHT_FILES[1:])}) in {model_dir}")
    return h.hexdigest()[:32]


def probe(input_names: list[str], config) -> dict[str, np.ndarray]:
    """A small padded batch of token ids (3 x 11; the second row padded) for a model of ``config``, the export's
    example and the check's input: with padding in it, no shortcut for an all-ones attention mask can be traced into
    the graph."""
    ids = np.array([[101, 2023, 2003, 1037, 3231, 1012, 102, 2009, 2001, 1012, 102]] * 3, dtype=np.int64)
    ids = ids % int(getattr(config, "vocab_size", 30522) or 30522)
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    types = np.zeros_like(ids)
    types[:, 7:] = 1 if int(getattr(config, "type_vocab_size", 0) or 0) >= 2 else 0
    return {k: {"input_ids": ids, "attention_mask": mask}.get(k, types) for k in input_names}


def local_dir(path: str | Path) -> str:
    """The local folder of a model given by path or by hub id (its downloaded snapshot), whose files key its graph."""
    if Path(path).is_dir():
        return str(path)
    from transformers.utils import cached_file

    return str(Path(cached_file(str(path), "config.json")).parent)


def _select(out, outputs: tuple[str, ...]) -> tuple:
    """The tensors named by ``outputs`` from a model's output: ``logits``, or ``hidden_K`` (hidden state K: 0 the
    embeddings, K the output of layer K)."""
    return tuple(out.logits if name == "logits" else out.hidden_states[int(name.split("_")[1])] for name in outputs)


def export(model, input_names: list[str], dest: Path, outputs: tuple[str, ...] = ("logits",)) -> Path:
    """Export ``model`` (a Hugging Face model in fp32, loaded with eager attention) to ``dest``: inputs
    ``input_names`` in that order, the ``outputs`` named as in :func:`_select`, batch and sequence axes dynamic."""
    import torch

    hidden = any(name != "logits" for name in outputs)

    class Outputs(torch.nn.Module):  # positional inputs in a fixed order, so the graph's names match them
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *xs):
            kw = {"output_hidden_states": True} if hidden else {}
            return _select(self.model(**dict(zip(input_names, xs)), **kw), outputs)

    example = tuple(torch.from_numpy(v) for v in probe(input_names, model.config).values())
    axes = {k: {0: "batch", 1: "length"} for k in input_names}
    axes |= {name: {0: "batch"} if name == "logits" else {0: "batch", 1: "length"} for name in outputs}
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.stem}.", suffix=".tmp")
    os.close(fd)
    try:
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")  # the tracer's notes on shape-dependent Python code; check() decides
            torch.onnx.export(Outputs(), example, tmp, input_names=input_names, output_names=list(outputs),
                              dynamic_axes=axes, opset_version=OPSET, dynamo=False)
        os.replace(tmp, dest)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return dest


def slices(x: dict[str, np.ndarray], budget: int = SLICE_TOKENS, left: bool = False):
    """Consecutive row slices of the padded batch ``x`` (rows sorted by length, as the NLI and the encoder sort
    them), each at most ``budget`` positions (its rows times its longest row, one row at least) and, where the
    tokenizer pads on the right, cut to its own longest row: the padding removed is masked out and comes after
    every real token, so each row's outputs are what the whole batch gives it. Left padding (``left``) is kept
    whole: cutting it would shift the real tokens' position ids."""
    lens = x["attention_mask"].sum(axis=1)
    full = x["attention_mask"].shape[1]
    i, n = 0, len(lens)
    while i < n:
        j, width = i + 1, full if left else int(lens[i])
        while j < n and (j - i + 1) * max(width, int(lens[j])) <= budget:
            width, j = max(width, int(lens[j])), j + 1
        yield {k: v[i:j, :width] for k, v in x.items()}
        i = j


def _prune(folder: Path, keep: int = KEEP) -> None:
    graphs = sorted(folder.glob("*.onnx"), key=lambda f: f.stat().st_mtime, reverse=True)
    stale = [f for f in folder.glob(".*.tmp") if time.time() - f.stat().st_mtime > 3600]  # a killed export's
    for old in graphs[keep:] + stale:
        old.unlink(missing_ok=True)


def session(path: str | Path, options):
    """An ONNX Runtime CPU session, with ONNX Runtime's telemetry events off (by default it records them in
    ~/.cache/Microsoft/DeveloperTools/.onnxruntime/: a library writes nothing of that kind)."""
    import onnxruntime as ort

    if hasattr(ort, "disable_telemetry_events"):
        ort.disable_telemetry_events()
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxGraph:
    """An ONNX Runtime session over the exported fp32 graph of ``model`` (a Hugging Face model in fp32 whose files
    are in ``model_dir``); call it with the tokenizer's numpy arrays to get the ``outputs`` (:func:`_select`), a list
    of arrays. Raises where the export fails or the graph's outputs on :func:`probe` differ from PyTorch's by more
    than :data:`TOLERANCE`."""

    def __init__(self, model, model_dir: str | Path, input_names: list[str], threads: int | None = None,
                 folder: Path | None = None, outputs: tuple[str, ...] = ("logits",)):
        import onnxruntime as ort

        folder = folder or cache_dir()
        self.outputs = tuple(outputs)
        self.path = folder / f"{graph_key(model_dir, input_names, self.outputs)}.onnx"
        if not self.path.is_file():
            log.info("exporting %s to %s (once per model)", model_dir, self.path)
            export(_eager(model, model_dir), list(input_names), self.path, self.outputs)
            _prune(folder)
        else:
            try:
                os.utime(self.path)  # recently used: kept by the pruning
            except OSError:
                pass  # a read-only or shared cache: the graph is still usable
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = threads or 0
        so.log_severity_level = 3
        self.session = session(self.path, so)
        self.input_names = [i.name for i in self.session.get_inputs()]  # the exporter drops inputs a model ignores
        check(self, model, input_names)

    def __call__(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(None, {k: np.asarray(inputs[k], dtype=np.int64) for k in self.input_names})


def graph_for(model, path: str, tokenizer, runtime: str, fits: bool, what: str,
              outputs: tuple[str, ...] = ("logits",)) -> OnnxGraph | None:
    """The ONNX Runtime graph a model runs on, or None for PyTorch. ``runtime``: ``auto`` (the graph where the model
    ``fits`` it, i.e. fp32 on the CPU; PyTorch with a logged warning where the export or its check fails), ``onnx``
    (the graph, and such a failure is an error) or ``torch``. ``what`` names the model in messages."""
    if runtime not in ("auto", "onnx", "torch"):
        raise ValueError(f"{what} runtime must be auto, onnx or torch, got {runtime!r}")
    if runtime == "torch" or (runtime == "auto" and not fits):
        return None
    if not fits:
        raise ValueError(f"the onnx runtime runs fp32 on the CPU only ({what})")
    import torch

    names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in tokenizer("a", "b")]
    try:
        return OnnxGraph(model, local_dir(path), names, threads=torch.get_num_threads(), outputs=outputs)
    except Exception as e:  # noqa: BLE001 - any export or check failure: PyTorch computes the same fp32
        if runtime == "onnx":
            raise RuntimeError(f"cannot run {what} through ONNX Runtime: {e}") from e
        log.warning("%s runs in PyTorch: no usable ONNX graph (%s)", what, e)
        return None


def _eager(model, model_dir: str | Path):
    """``model`` again, of its own class, with eager attention (what the exporter traces)."""
    from .registry import quiet_transformers

    with quiet_transformers():
        return type(model).from_pretrained(str(model_dir), attn_implementation="eager").float().eval()


def check(graph: OnnxGraph, model, input_names: list[str]) -> float:
    """The largest output difference between ``graph`` and the PyTorch ``model`` on :func:`probe`; raises above
    :data:`TOLERANCE` (a graph that traced something the model does not compute is never used)."""
    import torch

    x = probe(input_names, model.config)
    hidden = any(name != "logits" for name in graph.outputs)
    with torch.inference_mode():
        out = model(**{k: torch.from_numpy(v) for k, v in x.items()}, **({"output_hidden_states": True} if hidden
                                                                         else {}))
        refs = [t.float().numpy() for t in _select(out, graph.outputs)]
    # hidden states are compared relative to their largest magnitude (large encoders have outlier dimensions)
    diff = max(float(np.abs(g - r).max()) / (1.0 if name == "logits" else max(1.0, float(np.abs(r).max())))
               for name, g, r in zip(graph.outputs, graph(x), refs))
    if not diff <= TOLERANCE:
        raise ValueError(f"the exported graph {graph.path.name} differs from PyTorch by {diff:.2g} on a probe batch")
    return diff
