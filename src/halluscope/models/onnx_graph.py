"""fp32 inference of a Hugging Face classifier through ONNX Runtime: the same model, the same fp32 arithmetic, in other
kernels.

On two AVX512 AMD EPYC cores ONNX Runtime ran halluscope-nli's fp32 graph 1.8-2.0x faster than eager PyTorch, whose
fp32 GEMM reaches about half of ONNX Runtime's there (BENCHMARKS.md; expect less on Intel CPUs and on AVX2-only ones),
and the two agreed within 5.3e-6 per probability. Nothing is quantized and nothing runs in reduced precision.

The graph is exported once per model, on first use, with PyTorch's exporter (eager attention, dynamic batch and
length axes, opset 17), into ``onnx/`` of the user cache (:func:`halluscope.userdirs.user_cache_dir`), under a key
made of the model's files, the exporting versions and :data:`EXPORT_VERSION`, so a retrained model, another PyTorch
or a change to :func:`export` gets its own graph. Before a graph is used, its logits on a padded probe batch are
compared with PyTorch's (:func:`check`). The most recently used :data:`KEEP` graphs are kept, older ones pruned.
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
KEEP = 4  # graphs kept in the cache folder; the least recently used beyond that are deleted
TOLERANCE = 1e-4  # largest logit difference from PyTorch on the probe batch that a graph may show
_WEIGHT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin")


def cache_dir() -> Path:
    return user_cache_dir() / "onnx"


def graph_key(model_dir: str | Path, input_names: list[str]) -> str:
    """A digest of the model's weights and config, the inputs, and the versions that export the graph."""
    import onnx
    import torch
    import transformers

    h = hashlib.sha256(f"{EXPORT_VERSION}|{OPSET}|{torch.__version__}|{transformers.__version__}|"
                       f"{onnx.__version__}|{','.join(input_names)}".encode())
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


def export(model, input_names: list[str], dest: Path) -> Path:
    """Export the sequence classifier ``model`` (loaded with eager attention) to ``dest``: fp32, inputs
    ``input_names`` in that order, output ``logits``, batch and sequence axes dynamic."""
    import torch

    class Logits(torch.nn.Module):  # positional inputs in a fixed order, so the graph's names match them
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *xs):
            return self.model(**dict(zip(input_names, xs))).logits

    example = tuple(torch.from_numpy(v) for v in probe(input_names, model.config).values())
    axes = {k: {0: "batch", 1: "length"} for k in input_names} | {"logits": {0: "batch"}}
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.stem}.", suffix=".tmp")
    os.close(fd)
    try:
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")  # the tracer's notes on shape-dependent Python code; check() decides
            torch.onnx.export(Logits(), example, tmp, input_names=input_names, output_names=["logits"],
                              dynamic_axes=axes, opset_version=OPSET, dynamo=False)
        os.replace(tmp, dest)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return dest


def _prune(folder: Path, keep: int = KEEP) -> None:
    graphs = sorted(folder.glob("*.onnx"), key=lambda f: f.stat().st_mtime, reverse=True)
    stale = [f for f in folder.glob(".*.tmp") if time.time() - f.stat().st_mtime > 3600]  # a killed export's
    for old in graphs[keep:] + stale:
        old.unlink(missing_ok=True)


class OnnxClassifier:
    """An ONNX Runtime session over the exported fp32 graph of ``model`` (a sequence classifier in fp32 whose files
    are in ``model_dir``); call it with the tokenizer's numpy arrays to get the logits. Raises where the export
    fails or the graph's logits on :func:`probe` differ from PyTorch's by more than :data:`TOLERANCE`."""

    def __init__(self, model, model_dir: str | Path, input_names: list[str], threads: int | None = None,
                 folder: Path | None = None):
        import onnxruntime as ort

        folder = folder or cache_dir()
        self.path = folder / f"{graph_key(model_dir, input_names)}.onnx"
        if not self.path.is_file():
            log.info("exporting %s to %s (once per model)", model_dir, self.path)
            export(_eager(model_dir), list(input_names), self.path)
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
        self.session = ort.InferenceSession(str(self.path), so, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]  # the exporter drops inputs a model ignores
        check(self, model, input_names)

    def __call__(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        return self.session.run(None, {k: np.asarray(inputs[k], dtype=np.int64) for k in self.input_names})[0]


def _eager(model_dir: str | Path):
    """The model again, with eager attention (what the exporter traces)."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir), attn_implementation="eager")
    return model.float().eval()


def check(graph: OnnxClassifier, model, input_names: list[str]) -> float:
    """The largest logit difference between ``graph`` and the PyTorch ``model`` on :func:`probe`; raises above
    :data:`TOLERANCE` (a graph that traced something the model does not compute is never used)."""
    import torch

    x = probe(input_names, model.config)
    with torch.inference_mode():
        ref = model(**{k: torch.from_numpy(v) for k, v in x.items()}).logits.float().numpy()
    diff = float(np.abs(graph(x) - ref).max())
    if not diff <= TOLERANCE:
        raise ValueError(f"the exported graph {graph.path.name} differs from PyTorch by {diff:.2g} on a probe batch")
    return diff
