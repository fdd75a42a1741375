"""fp32 inference of a Hugging Face classifier through ONNX Runtime: the same model, the same fp32 arithmetic, faster.

On two CPU cores ONNX Runtime runs halluscope-nli's fp32 graph about 1.8x faster than eager PyTorch (fused attention,
GELU and LayerNorm kernels; BENCHMARKS.md), and its probabilities agree with PyTorch's to a few 1e-6. There is no
quantization and no reduced precision, so no CPU's choice of kernels can change an answer by more than the last bits.

The graph is exported once per model, on first use, with PyTorch's exporter (eager attention, dynamic batch and
length axes, opset 17), and kept in the user's cache directory (``$HALLUSCOPE_CACHE`` or ``$XDG_CACHE_HOME/halluscope``
or ``~/.cache/halluscope``, folder ``onnx``) under a key made of the model's files and the exporting versions, so a
retrained model or another PyTorch version gets its own graph. The newest few graphs are kept, older ones pruned.
Writes go through a temporary file and an atomic rename, so parallel workers never read half a graph.
"""

from __future__ import annotations

import hashlib
import logging
import os
import warnings
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)
OPSET = 17
KEEP = 4  # graphs kept in the cache folder; the least recently used beyond that are deleted
_WEIGHT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin")


def cache_dir() -> Path:
    if os.environ.get("HALLUSCOPE_CACHE"):
        return Path(os.environ["HALLUSCOPE_CACHE"]).expanduser().parent / "onnx"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "halluscope" / "onnx"


def graph_key(model_dir: str | Path, input_names: list[str]) -> str:
    """A digest of the model's weights and config, the inputs, and the versions that export the graph."""
    import onnx
    import torch
    import transformers

    h = hashlib.sha256(f"{OPSET}|{torch.__version__}|{transformers.__version__}|{onnx.__version__}|"
                       f"{','.join(input_names)}".encode())
    found = False
    for name in _WEIGHT_FILES:
        f = Path(model_dir) / name
        if f.is_file():
            found = found or name != "config.json"
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 22), b""):
                    h.update(block)
    if not found:
        raise FileNotFoundError(f"no model weights ({', '.join(_WEIGHT_FILES[1:])}) in {model_dir}")
    return h.hexdigest()[:32]


def export(model_dir: str | Path, input_names: list[str], dest: Path) -> Path:
    """Export the sequence classifier in ``model_dir`` to ``dest`` (fp32, inputs ``input_names`` in that order,
    output ``logits``; batch and sequence axes dynamic)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir), attn_implementation="eager")
    model = model.float().eval()

    class Logits(torch.nn.Module):  # positional inputs in a fixed order, so the graph's names match them
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *xs):
            return self.model(**dict(zip(input_names, xs))).logits

    # a padded example, so no shortcut for an all-ones attention mask can be traced into the graph
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    example = tuple(mask if k == "attention_mask" else torch.ones_like(mask) if k == "input_ids" else
                    torch.zeros_like(mask) for k in input_names)
    axes = {k: {0: "batch", 1: "length"} for k in input_names} | {"logits": {0: "batch"}}
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
    try:
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")
            torch.onnx.export(Logits(), example, str(tmp), input_names=input_names, output_names=["logits"],
                              dynamic_axes=axes, opset_version=OPSET, dynamo=False)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def _prune(folder: Path, keep: int = KEEP) -> None:
    graphs = sorted(folder.glob("*.onnx"), key=lambda f: f.stat().st_mtime, reverse=True)
    for old in graphs[keep:]:
        old.unlink(missing_ok=True)


class OnnxClassifier:
    """An ONNX Runtime session over the exported fp32 graph of the classifier in ``model_dir``; call it with the
    tokenizer's numpy arrays to get the logits."""

    def __init__(self, model_dir: str | Path, input_names: list[str], threads: int | None = None,
                 folder: Path | None = None):
        import onnxruntime as ort

        folder = folder or cache_dir()
        self.input_names = list(input_names)
        self.path = folder / f"{graph_key(model_dir, self.input_names)}.onnx"
        if not self.path.is_file():
            log.info("exporting %s to %s (once per model)", model_dir, self.path)
            export(model_dir, self.input_names, self.path)
            _prune(folder)
        else:
            os.utime(self.path)  # recently used: kept by the pruning
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = threads or 0
        so.log_severity_level = 3
        self.session = ort.InferenceSession(str(self.path), so, providers=["CPUExecutionProvider"])

    def __call__(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        return self.session.run(None, {k: np.asarray(inputs[k], dtype=np.int64) for k in self.input_names})[0]
