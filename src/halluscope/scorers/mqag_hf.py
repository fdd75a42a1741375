"""MQAG stages as Hugging Face models, given by id or local path, as in the original MQAG (Manakul et al. 2023):

=====  ==========================================  ===========================================================
stage  model class (e.g. the paper's)              input -> output
=====  ==========================================  ===========================================================
G1     seq2seq LM (potsawee/t5-large-generation-    sentence -> "question <sep> answer"
       squad-QuestionAnswer, ...-race-...)
G2     seq2seq LM (potsawee/t5-large-generation-    "question <sep> answer <sep> passage" -> "d1 <sep> d2 <sep> d3"
       race-Distractor)
A      multiple choice (potsawee/longformer-large-  (context <bos> question, option) for each option -> softmax
       4096-answering-race)
U      sequence classification (potsawee/longfor-   "question <sep> context" -> P(answerable): the sigmoid of a
       mer-large-4096-answerable-squad2)            single logit, or the softmax of the last class
=====  ==========================================  ===========================================================

``<sep>`` is the tokenizer's ``sep_token``; T5's sentinel tokens in G2's output count as separators too. G1 decodes
greedily for draw 0 and samples (seeded with the draw) for later draws. Models load once per id/path and run on the
CPU unless a GPU is there; inputs are batched, and every (stage, input) is computed once per scorer (an in-memory
cache), so a sentence's question is answered once per context however many methods read it.
"""

from __future__ import annotations

import re

import numpy as np

_MODELS: dict[tuple[str, str], tuple] = {}


def _device():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _load(kind: str, spec: str):
    key = (kind, spec)
    if key not in _MODELS:
        import transformers as tf

        from ..models.registry import quiet_transformers

        cls = {"seq2seq": tf.AutoModelForSeq2SeqLM, "mc": tf.AutoModelForMultipleChoice,
               "cls": tf.AutoModelForSequenceClassification}[kind]
        try:
            with quiet_transformers():
                tok = tf.AutoTokenizer.from_pretrained(spec)
                model = cls.from_pretrained(spec).to(_device()).eval()
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot load MQAG model {spec!r} as {cls.__name__}: {e}") from e
        _MODELS[key] = (tok, model)
    return _MODELS[key]


def _sep(tok) -> str:
    return tok.sep_token or tok.eos_token or "<sep>"


class _HFStage:
    kind = ""

    def __init__(self, spec: str, batch_size: int = 8, max_length: int = 512, max_new_tokens: int = 64):
        self.spec, self.batch_size, self.max_length, self.max_new_tokens = spec, batch_size, max_length, max_new_tokens
        self.tok, self.model = _load(self.kind, spec)
        self._cache: dict = {}

    @property
    def id(self) -> str:
        return f"HF {self.spec}"

    def _batches(self, xs):
        for i in range(0, len(xs), self.batch_size):
            yield xs[i : i + self.batch_size]


class HFQuestionGenerator(_HFStage):
    """G1: sentence -> (question, answer)."""

    kind = "seq2seq"

    def _generate(self, texts: list[str], sample: bool, seed: int) -> list[str]:
        import torch

        out = []
        for b in self._batches(texts):
            enc = self.tok(b, return_tensors="pt", padding=True, truncation=True, max_length=self.max_length)
            enc = {k: enc[k].to(self.model.device) for k in ("input_ids", "attention_mask")}
            if sample:
                torch.manual_seed(seed)
            with torch.inference_mode():
                ids = self.model.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=sample,
                                          num_beams=1)
            out += self.tok.batch_decode(ids, skip_special_tokens=False)
        return out

    def _clean(self, text: str) -> str:
        for t in (self.tok.pad_token, self.tok.eos_token, self.tok.cls_token, self.tok.bos_token):
            if t and t != _sep(self.tok):
                text = text.replace(t, " ")
        return text

    def g1(self, sentences: list[str], draws: list[int]) -> list[tuple[str, str] | None]:
        out: list[tuple[str, str] | None] = [None] * len(sentences)
        for k in sorted(set(draws)):
            idx = [i for i, d in enumerate(draws) if d == k and (sentences[i], k) not in self._cache]
            for i, text in zip(idx, self._generate([sentences[i] for i in idx], sample=k > 0, seed=k)):
                parts = [p.strip() for p in self._clean(text).split(_sep(self.tok))]
                qa = (parts[0], parts[1]) if len(parts) >= 2 and parts[0] and parts[1] else None
                self._cache[(sentences[i], k)] = qa
        for i, (s, k) in enumerate(zip(sentences, draws)):
            out[i] = self._cache[(s, k)]
        return out


class HFDistractorGenerator(HFQuestionGenerator):
    """G2: (passage, question, answer) -> distractors."""

    def g2(self, triples: list[tuple[str, str, str]]) -> list[list[str]]:
        sep = _sep(self.tok)
        todo = [t for t in dict.fromkeys(triples) if t not in self._cache]
        texts = [f"{q} {sep} {a} {sep} {p}" for p, q, a in todo]
        for t, text in zip(todo, self._generate(texts, sample=False, seed=0)):
            text = re.sub(r"<extra\S+>", sep, self._clean(text))
            self._cache[t] = [d.strip() for d in text.split(sep) if d.strip()]
        return [self._cache[t] for t in triples]


class HFMultipleChoiceAnswerer(_HFStage):
    """A: (context, question, options) -> probabilities of the options."""

    kind = "mc"

    def a(self, triples: list[tuple[str, str, list[str]]]) -> list[list[float] | None]:
        import torch

        todo = [t for t in dict.fromkeys((c, q, tuple(o)) for c, q, o in triples) if t not in self._cache]
        joiner = self.tok.bos_token or _sep(self.tok)
        for b in self._batches(todo):
            n_opt = len(b[0][2])
            if any(len(t[2]) != n_opt for t in b):  # one forward pass needs the same number of options
                rows = [self.a([(c, q, list(o))])[0] for c, q, o in b]
                self._cache.update(zip(b, rows))
                continue
            first = [f"{c} {joiner} {q}" for c, q, o in b for _ in o]
            second = [opt for _, _, o in b for opt in o]
            enc = self.tok(first, second, return_tensors="pt", padding=True, truncation=True,
                           max_length=self.max_length).to(self.model.device)
            enc = {k: v.view(len(b), n_opt, -1) for k, v in enc.items()}
            with torch.inference_mode():
                logits = self.model(**enc).logits.float()
            for t, p in zip(b, torch.softmax(logits, dim=-1).cpu().numpy()):
                self._cache[t] = [float(x) for x in p]
        return [self._cache[(c, q, tuple(o))] for c, q, o in triples]


class HFAnswerability(_HFStage):
    """U: (context, question) -> P(answerable)."""

    kind = "cls"

    def u(self, pairs: list[tuple[str, str]]) -> list[float]:
        import torch

        sep = _sep(self.tok)
        todo = [p for p in dict.fromkeys(pairs) if p not in self._cache]
        for b in self._batches(todo):
            enc = self.tok([f"{q} {sep} {c}" for c, q in b], return_tensors="pt", padding=True, truncation=True,
                           max_length=self.max_length).to(self.model.device)
            with torch.inference_mode():
                logits = self.model(**enc).logits.float()
            if logits.shape[-1] == 1:
                p = torch.sigmoid(logits[:, 0])
            else:  # the last class is "answerable"
                p = torch.softmax(logits, dim=-1)[:, -1]
            for pair, v in zip(b, p.cpu().numpy()):
                self._cache[pair] = float(np.clip(v, 0.0, 1.0))
        return [self._cache[p] for p in pairs]


STAGE_CLASSES = {"g1": HFQuestionGenerator, "g2": HFDistractorGenerator, "a": HFMultipleChoiceAnswerer,
                 "u": HFAnswerability}
# the original MQAG models (need network the first time); use any compatible id or local path instead
PAPER_MODELS = {
    "g1": "potsawee/t5-large-generation-squad-QuestionAnswer",
    "g2": "potsawee/t5-large-generation-race-Distractor",
    "a": "potsawee/longformer-large-4096-answering-race",
    "u": "potsawee/longformer-large-4096-answerable-squad2",
}


def load_stage(name: str, spec: str):
    if name not in STAGE_CLASSES:
        raise ValueError(f"unknown MQAG stage {name!r}; use g1, g2, a, u")
    return STAGE_CLASSES[name](PAPER_MODELS[name] if spec == "paper" else spec)
