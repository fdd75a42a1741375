"""SelfCheck-QA with MQAG (Manakul et al. 2023, §5.2 and App. B); each stage an LLM prompt or a Hugging Face model.

For sentence r_i: G1 draws a question q and its answer a from r_i; G2 draws three distractors given (q, a, R);
the answering system A picks one of the four options o given the response R (a_R) and given each sample S_n
(a_Sn); the answerability system U gives alpha_n = P_U(answerable | q, S_n). With matches N_m (a_Sn = a_R) and
mismatches N_n:

    count:        S = N_n / (N_m + N_n)                 over samples with alpha_n >= AT (0.5)
    bayes:        S = g2^N_n / (g1^N_m + g2^N_n)         same hard counts, g1 = b2/(1-b1), g2 = b1/(1-b2)
    bayes_alpha:  the same with soft counts N'_m = sum alpha_n over matches, N'_n over mismatches (Eq. 20-21)

with b1 = b2 = 0.8. A question unanswerable on the response itself (alpha_R = P_U(answerable | q, R) < AT) is a bad
question (§5.2, Eq. 8: "the context is either the response R or sampled passages"): count and bayes score it 0.5, as
the reference package does; bayes_alpha reads the samples' soft counts only. A sentence's score is the mean over its
questions. Options (``Detector(method_options={"qa_bayes": {...}})``, the same for the three methods):
``questions_per_sentence`` (1; the reference package asks 5), ``beta1``, ``beta2`` and ``threshold`` (AT). A
question whose generation cannot be parsed is dropped; a sentence left with no question scores 0.5 (no evidence
either way). A stage's generation that fails after the retries is missing, never guessed: no question (G1, G2), a
question dropped (A or U on R), a sample left out of the counts (A or U on it); the batch goes on. Where every
generation of a stage failed (a refused key, a model the server does not have) the first failure is raised.

Stages (``QAScorer(sampler, stages={"g1": ..., "g2": ..., "a": ..., "u": ...})``; each value one of):

- a :class:`~halluscope.llm.sampler.Sampler` (or nothing: the scorer's own): the stage is an LLM prompt on that
  backend (cached, concurrent, retried); A and U read the first answer token's top log-probs where the backend returns
  them (probabilities of the option letters, of Yes/No) and fall back to the answer text;
- a Hugging Face model id or local path: the stage is that model, as in the original MQAG
  (:mod:`halluscope.scorers.mqag_hf`: seq2seq question+answer and distractor generators, a multiple-choice answerer,
  an answerability classifier);
- any object with the stage's method (``g1``, ``g2``, ``a`` or ``u``, see :class:`LLMStages`).
"""

from __future__ import annotations

import math
import re
import zlib

import numpy as np

from ..llm.base import Generation, GenParams, LLMError, unless_all_failed
from ..llm.sampler import Sampler
from ..types import MethodInfo
from .base import MethodScores, PreparedItem

G1_TEMPLATE = (
    "Sentence: Marie Curie was born in Warsaw in 1867.\nQuestion: Where was Marie Curie born?\nAnswer: Warsaw\n\n"
    "Sentence: {sentence}\nQuestion:"
)
G2_TEMPLATE = (
    "Passage: {passage}\nQuestion: {question}\nCorrect answer: {answer}\n"
    "Three other plausible but wrong answers, one per line:\n1."
)
A_TEMPLATE = "Context: {context}\nQuestion: {question}\nOptions:\n{options}\nThe correct option is"
U_TEMPLATE = "Context: {context}\nQuestion: {question}\nCan the question be answered from the context? Answer Yes or No.\nAnswer:"
LETTERS = "ABCD"
STAGES = ("g1", "g2", "a", "u")  # question generation, distractor generation, answering, answerability


def bayes(nm: float, nn: float, beta1: float = 0.8, beta2: float = 0.8) -> float:
    g1, g2 = beta2 / (1 - beta1), beta1 / (1 - beta2)
    # g2^nn / (g1^nm + g2^nn), computed in log space
    a, b = nm * math.log(g1), nn * math.log(g2)
    m = max(a, b)
    return math.exp(b - m) / (math.exp(a - m) + math.exp(b - m))


def _first_token_probs(g: Generation, choices: list[str]) -> dict[str, float] | None:
    if not g.tokens or not g.tokens[0].top:
        return None
    p = {c: 0.0 for c in choices}
    for tok, lp in g.tokens[0].top.items():
        t = tok.strip().strip(".):").upper() if len(choices[0]) == 1 else tok.strip().lower()
        for c in choices:
            if t == (c if len(c) == 1 else c.lower()):
                p[c] += math.exp(lp)
    z = sum(p.values())
    return {c: v / z for c, v in p.items()} if z > 0 else None


class LLMStages:
    """The four MQAG stages as LLM prompts over one sampler."""

    def __init__(self, sampler: Sampler, top_logprobs: int = 10):
        self.sampler, self.k = sampler, top_logprobs

    @property
    def id(self) -> str:
        return f"LLM {self.sampler.backend.cache_id()}"

    def _run(self, jobs):
        """The generations, with a failed one (an :class:`LLMError` after the retries) as None: each stage reads it
        as missing; where every one failed, the first failure is raised (a configuration fault)."""
        return [None if isinstance(r, LLMError) else r for r in unless_all_failed(self.sampler.run(jobs))]

    def g1(self, sentences: list[str], draws: list[int]) -> list[tuple[str, str] | None]:
        """A (question, answer) per (sentence, draw): draw 0 greedy, later draws sampled with seed = draw."""
        jobs = [(G1_TEMPLATE.format(sentence=s), GenParams(0.0 if k == 0 else 1.0, 40, k, 0, ("\n\n",)), k)
                for s, k in zip(sentences, draws)]
        out = []
        for g in self._run(jobs):
            m = re.match(r"\s*(.+?)\s*\n\s*Answer:\s*(.+)", g.text) if g is not None else None
            out.append((m.group(1).strip(), m.group(2).strip().splitlines()[0]) if m and m.group(2).strip() else None)
        return out

    def g2(self, triples: list[tuple[str, str, str]]) -> list[list[str]]:
        """Distractors for each (passage, question, answer)."""
        jobs = [(G2_TEMPLATE.format(passage=p.replace("\n", " "), question=q, answer=a),
                 GenParams(0.0, 48, 0, 0, ("\n\n",)), 0) for p, q, a in triples]
        out = []
        for g in self._run(jobs):  # none for a failed one: the question has too few options and is dropped
            lines = ("1." + g.text).splitlines() if g is not None else []
            out.append([re.sub(r"^\s*\d+[.)]\s*", "", x).strip() for x in lines])
        return out

    def a(self, triples: list[tuple[str, str, list[str]]]) -> list[list[float] | None]:
        """Probabilities of the options for each (context, question, options); None when no option was picked,
        NaN where the generation failed (missing)."""
        jobs = []
        for ctx, q, opts in triples:
            options = "\n".join(f"{LETTERS[j]}. {o}" for j, o in enumerate(opts))
            jobs.append((A_TEMPLATE.format(context=ctx.replace("\n", " "), question=q, options=options),
                         GenParams(0.0, 3, 0, self.k), 0))
        out = []
        for (ctx, q, opts), g in zip(triples, self._run(jobs)):
            if g is None:
                out.append(math.nan)
                continue
            letters = list(LETTERS[: len(opts)])
            p = _first_token_probs(g, letters)
            if p:
                out.append([p[c] for c in letters])
            else:
                m = re.search(rf"\b([{LETTERS[:len(opts)]}])\b", g.text)
                out.append([float(c == m.group(1)) for c in letters] if m else None)
        return out

    def u(self, pairs: list[tuple[str, str]]) -> list[float]:
        """P(answerable) for each (context, question); NaN where the generation failed (missing)."""
        jobs = [(U_TEMPLATE.format(context=ctx.replace("\n", " "), question=q), GenParams(0.0, 2, 0, self.k), 0)
                for ctx, q in pairs]
        out = []
        for g in self._run(jobs):
            if g is None:
                out.append(math.nan)
                continue
            p = _first_token_probs(g, ["yes", "no"])
            if p:
                out.append(p["yes"])
            else:
                w = g.text.strip().lower()
                out.append(1.0 if w.startswith("yes") else 0.0 if w.startswith("no") else 0.5)
        return out


def make_stage(name: str, spec, sampler: Sampler | None):
    """A stage from a Sampler, a Hugging Face id/path, or an object that already has the stage's method."""
    if spec is None or isinstance(spec, Sampler):
        if spec is None and sampler is None:
            raise ValueError(f"MQAG stage {name}: give a Sampler (LLM) or a Hugging Face model id/path")
        return LLMStages(spec or sampler)
    if isinstance(spec, str):
        if spec == "llm":
            if sampler is None:
                raise ValueError(f"MQAG stage {name}: 'llm' needs an LLM sampler")
            return LLMStages(sampler)
        from . import mqag_hf

        return mqag_hf.load_stage(name, spec)
    if not hasattr(spec, name):
        raise ValueError(f"MQAG stage {name}: {spec!r} has no {name}() method")
    return spec


class QAScorer:
    names = ("qa_count", "qa_bayes", "qa_bayes_alpha")

    def __init__(self, sampler: Sampler | None = None, questions_per_sentence: int = 1, beta1: float = 0.8,
                 beta2: float = 0.8, threshold: float = 0.5, top_logprobs: int = 10, stages: dict | None = None):
        """``stages`` maps any of ``g1``, ``g2``, ``a``, ``u`` to a Sampler, a Hugging Face id/path, or a stage
        object; the others are LLM prompts on ``sampler``."""
        unknown = set(stages or {}) - set(STAGES)
        if unknown:
            raise ValueError(f"unknown MQAG stages {sorted(unknown)}; use g1, g2, a, u")
        self.sampler = sampler
        self.stages = {k: make_stage(k, (stages or {}).get(k), sampler) for k in STAGES}
        for st in self.stages.values():
            if isinstance(st, LLMStages):
                st.k = top_logprobs
        self.q = questions_per_sentence
        self.beta1, self.beta2, self.threshold = beta1, beta2, threshold

    def method_info(self) -> list[MethodInfo]:
        desc = {"qa_count": "N_n/(N_m+N_n)", "qa_bayes": "Bayes with hard counts",
                "qa_bayes_alpha": "Bayes with answerability soft counts (App. B)"}
        stages = ", ".join(f"{k.upper()}: {getattr(v, 'id', type(v).__name__)}" for k, v in self.stages.items())
        return [MethodInfo(n, bounded=True, description=f"MQAG ({stages}): " + desc[n]) for n in self.names]

    def score(self, items: list[PreparedItem]) -> dict[str, list[MethodScores]]:
        # G1: a question and answer per (sentence, draw)
        keys, sents, draws = [], [], []
        for a, it in enumerate(items):
            for i, s in enumerate(it.sentences):
                for k in range(self.q):
                    keys.append((a, i))
                    sents.append(s)
                    draws.append(k)
        qas = [(key, qa[0], qa[1]) for key, qa in zip(keys, self.stages["g1"].g1(sents, draws)) if qa]
        # G2: three distractors from the passage
        dist = self.stages["g2"].g2([(items[a].record.response, q, ans) for (a, _), q, ans in qas])
        questions = []
        for (key, q, ans), lines in zip(qas, dist):
            opts = [ans] + [x for x in dict.fromkeys(lines) if x and x.lower() != ans.lower()][:3]
            if len(opts) < 2:
                continue
            opts = (opts + ["none of these"] * 4)[:4]
            # a stable shuffle (not Python's per-process hash): the answer is not always option A, and the same
            # question gets the same prompts in every run, so the cache serves a re-run
            order = sorted(range(4), key=lambda j: zlib.crc32(f"{q}|{j}".encode()))
            questions.append((key, q, [opts[j] for j in order]))
        # A (on R and every sample) and U (on every sample)
        a_in, u_in, where = [], [], []
        for qi, ((a, i), q, opts) in enumerate(questions):
            it = items[a]
            for n, ctx in enumerate([it.record.response, *it.evidence]):
                a_in.append((ctx, q, opts))
                u_in.append((ctx, q))
                where.append((qi, n))
        a_res = self.stages["a"].a(a_in) if a_in else []
        u_res = self.stages["u"].u(u_in) if u_in else []
        # a pick: the option's index, -1 when none was picked, None when the answering failed (missing)
        picks = {w: None if _missing(p) else int(np.argmax(p)) if p is not None else -1
                 for w, p in zip(where, a_res)}
        alphas = dict(zip(where, (float(x) for x in u_res)))
        per_sentence: dict[tuple[int, int], list[tuple[float, float, float]]] = {}
        for qi, ((a, i), q, opts) in enumerate(questions):
            got = self._question(qi, len(items[a].evidence), picks, alphas)
            if got is not None:
                per_sentence.setdefault((a, i), []).append(got)
        out: dict[str, list[MethodScores]] = {n: [] for n in self.names}
        for a, it in enumerate(items):
            rows = [np.mean(per_sentence[(a, i)], axis=0) if (a, i) in per_sentence else np.full(3, 0.5)
                    for i in range(len(it.sentences))]
            arr = np.array(rows)
            ev = [{"questions": [q for (k, q, _) in questions if k == (a, i)]} for i in range(len(it.sentences))]
            for j, name in enumerate(self.names):
                out[name].append(MethodScores(arr[:, j], float(arr[:, j].mean()), ev if j == 2 else None))
        return out

    def _question(self, qi: int, n_samples: int, picks: dict, alphas: dict) -> tuple[float, float, float] | None:
        """One question's (count, bayes, bayes_alpha) from the answers on R and on each sample; None when the
        answer or the answerability on R is missing (the question says nothing). A sample whose answer or
        answerability is missing is left out of the counts."""
        ar, alpha_r = picks[(qi, 0)], alphas[(qi, 0)]
        if ar is None or math.isnan(alpha_r):
            return None
        nm = nn = snm = snn = 0.0
        for n in range(1, n_samples + 1):
            al = alphas[(qi, n)]
            if picks[(qi, n)] is None or math.isnan(al):
                continue
            match = picks[(qi, n)] == ar
            if al >= self.threshold:
                nm, nn = nm + match, nn + (not match)
            snm, snn = snm + al * match, snn + al * (not match)
        soft = bayes(snm, snn, self.beta1, self.beta2)
        if alpha_r < self.threshold:  # a bad question: unanswerable on the response itself
            return 0.5, 0.5, soft
        count = nn / (nm + nn) if nm + nn > 0 else 0.5
        return count, bayes(nm, nn, self.beta1, self.beta2), soft


def _missing(p) -> bool:
    """A stage output that is NaN: its generation failed."""
    return isinstance(p, float) and math.isnan(p)


def needs_llm(stages: dict | None) -> bool:
    """Whether the MQAG methods ask an LLM with these ``qa_stages``: for every stage not given a model."""
    return not set(STAGES) <= set(stages or {})


def _build(names: list[str], art) -> "QAScorer":
    stages = dict(art.option("qa_stages") or {})
    llm = art.option("llm")
    if llm is None and needs_llm(stages):
        raise ValueError("the 'qa' methods need an LLM (Detector(llm=Sampler(backend))) for every MQAG stage "
                         "not given as a Hugging Face model in qa_stages")
    return QAScorer(llm, stages=stages, **_options(names, art))


OPTIONS = ("questions_per_sentence", "beta1", "beta2", "threshold")


def _options(names: list[str], art) -> dict:
    """The MQAG settings given to any of the three methods (one scorer computes them all, so they must agree)."""
    from .judging import method_options

    out: dict = {}
    for n in names:
        for k, v in method_options(art, n).items():
            if k in out and out[k] != v:
                raise ValueError(f"method option {n}.{k}: {v!r} differs from {out[k]!r} given to another qa method "
                                 "(one MQAG run scores all three)")
            out[k] = v
    q = out.get("questions_per_sentence", 1)
    if not (isinstance(q, int) and not isinstance(q, bool) and q >= 1):
        raise ValueError(f"method option questions_per_sentence: {q!r} is not a whole number >= 1")
    for k, shown in (("beta1", "(0, 1)"), ("beta2", "(0, 1)"), ("threshold", "[0, 1]")):
        v = out.get(k, 0.5)
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not number or not (0 < v < 1 if k != "threshold" else 0 <= v <= 1):
            raise ValueError(f"method option {k}: {v!r} is not a number in {shown}")
    return out


def _register() -> None:
    from ..engine.registry import MethodSpec, register

    rule = {"qa_count": "N_n / (N_m + N_n) over answerable samples",
            "qa_bayes": "g2^N_n / (g1^N_m + g2^N_n), hard counts (Eq. 20)",
            "qa_bayes_alpha": "the Bayes score with answerability soft counts (Eq. 21)"}
    register(*(MethodSpec(n, level="sentence", needs=("sentences", "mqag_models", "llm"), bounded=True, group="qa",
                          source="SelfCheckGPT (Manakul et al. 2023) §5.2 and App. B (MQAG)",
                          formula="multiple-choice questions from the sentence answered on R and each sample: " + f,
                          options=OPTIONS)
               for n, f in rule.items()), build=_build)


_register()
