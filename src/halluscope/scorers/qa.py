"""SelfCheck-QA with MQAG (Manakul et al. 2023, §5.2 and App. B), each stage an LLM prompt.

For sentence r_i: G1 draws a question q and its answer a from r_i; G2 draws three distractors given (q, a, R);
the answering system A picks one of the four options o given the response R (a_R) and given each sample S_n
(a_Sn); the answerability system U gives alpha_n = P_U(answerable | q, S_n). With matches N_m (a_Sn = a_R) and
mismatches N_n:

    count:        S = N_n / (N_m + N_n)                 over samples with alpha_n >= 0.5
    bayes:        S = g2^N_n / (g1^N_m + g2^N_n)         same hard counts, g1 = b2/(1-b1), g2 = b1/(1-b2)
    bayes_alpha:  the same with soft counts N'_m = sum alpha_n over matches, N'_n over mismatches (Eq. 20-21)

with b1 = b2 = 0.8. A sentence's score is the mean over its questions. Each stage is any backend behind the sampler
(cached, concurrent, retried); A and U read the first answer token's top log-probs where the backend returns them
(probabilities of the option letters, of Yes/No) and fall back to the answer text. A question whose generation
cannot be parsed is dropped; a sentence left with no question scores 0.5 (no evidence either way).
"""

from __future__ import annotations

import math
import re
import zlib

import numpy as np

from ..llm.base import Generation, GenParams, LLMError
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


class QAScorer:
    names = ("qa_count", "qa_bayes", "qa_bayes_alpha")

    def __init__(self, sampler: Sampler, questions_per_sentence: int = 1, beta1: float = 0.8, beta2: float = 0.8,
                 threshold: float = 0.5, top_logprobs: int = 10, stages: dict[str, Sampler] | None = None):
        """``stages`` gives a different sampler (any backend: HTTP, GGUF, a transformers model by id or path) to
        any of the stages ``g1``, ``g2``, ``a``, ``u``; the others use ``sampler``."""
        self.sampler = sampler
        self.stages = {k: (stages or {}).get(k, sampler) for k in ("g1", "g2", "a", "u")}
        self.q = questions_per_sentence
        self.beta1, self.beta2, self.threshold = beta1, beta2, threshold
        self.k = top_logprobs

    def method_info(self) -> list[MethodInfo]:
        desc = {"qa_count": "N_n/(N_m+N_n)", "qa_bayes": "Bayes with hard counts",
                "qa_bayes_alpha": "Bayes with answerability soft counts (App. B)"}
        return [MethodInfo(n, bounded=True, description=f"MQAG (LLM stages, {self.sampler.backend.cache_id()}): "
                           + desc[n]) for n in self.names]

    def _gen(self, jobs, stage: str):
        res = self.stages[stage].run(jobs)
        for r in res:
            if isinstance(r, LLMError):
                raise r
        return res

    def score(self, items: list[PreparedItem]) -> dict[str, list[MethodScores]]:
        # G1: a question and answer per (sentence, k)
        keys, jobs = [], []
        for a, it in enumerate(items):
            for i, s in enumerate(it.sentences):
                for k in range(self.q):
                    keys.append((a, i))
                    jobs.append((G1_TEMPLATE.format(sentence=s), GenParams(0.0 if k == 0 else 1.0, 40, k, 0,
                                                                            ("\n\n",)), k))
        qas = []
        for key, g in zip(keys, self._gen(jobs, "g1")):
            m = re.match(r"\s*(.+?)\s*\n\s*Answer:\s*(.+)", g.text)
            if m and m.group(2).strip():
                qas.append((key, m.group(1).strip(), m.group(2).strip().splitlines()[0]))
        # G2: three distractors
        jobs = [(G2_TEMPLATE.format(passage=items[a].record.response.replace("\n", " "), question=q, answer=ans),
                 GenParams(0.0, 48, 0, 0, ("\n\n",)), 0) for (a, _), q, ans in qas]
        questions = []
        for (key, q, ans), g in zip(qas, self._gen(jobs, "g2")):
            lines = [re.sub(r"^\s*\d+[.)]\s*", "", x).strip() for x in ("1." + g.text).splitlines()]
            opts = [ans] + [x for x in dict.fromkeys(lines) if x and x.lower() != ans.lower()][:3]
            if len(opts) < 2:
                continue
            opts = (opts + ["none of these"] * 4)[:4]
            # a stable shuffle (not Python's per-process hash): the answer is not always option A, and the same
            # question gets the same prompts in every run, so the cache serves a re-run
            order = sorted(range(4), key=lambda j: zlib.crc32(f"{q}|{j}".encode()))
            questions.append((key, q, [opts[j] for j in order]))
        # A (on R and every sample) and U (on every sample)
        a_jobs, u_jobs, where = [], [], []
        for qi, ((a, i), q, opts) in enumerate(questions):
            it = items[a]
            options = "\n".join(f"{LETTERS[j]}. {o}" for j, o in enumerate(opts))
            for n, ctx in enumerate([it.record.response, *it.evidence]):
                ctx = ctx.replace("\n", " ")
                a_jobs.append((A_TEMPLATE.format(context=ctx, question=q, options=options),
                               GenParams(0.0, 3, 0, self.k), 0))
                if n > 0:
                    u_jobs.append((U_TEMPLATE.format(context=ctx, question=q), GenParams(0.0, 2, 0, self.k), 0))
                where.append((qi, n))
        a_res, u_res = self._gen(a_jobs, "a"), self._gen(u_jobs, "u")
        picks: dict[tuple[int, int], int] = {}
        for (qi, n), g in zip(where, a_res):
            p = _first_token_probs(g, list(LETTERS))
            if p:
                picks[(qi, n)] = LETTERS.index(max(p, key=p.get))
            else:
                m = re.search(r"\b([ABCD])\b", g.text)
                picks[(qi, n)] = LETTERS.index(m.group(1)) if m else -1
        alphas: dict[tuple[int, int], float] = {}
        u_where = [w for w in where if w[1] > 0]
        for (qi, n), g in zip(u_where, u_res):
            p = _first_token_probs(g, ["yes", "no"])
            if p:
                alphas[(qi, n)] = p["yes"]
            else:
                w = g.text.strip().lower()
                alphas[(qi, n)] = 1.0 if w.startswith("yes") else 0.0 if w.startswith("no") else 0.5
        per_sentence: dict[tuple[int, int], list[tuple[float, float, float]]] = {}
        for qi, ((a, i), q, opts) in enumerate(questions):
            n_samples = len(items[a].evidence)
            ar = picks[(qi, 0)]
            nm = nn = snm = snn = 0.0
            for n in range(1, n_samples + 1):
                match = picks[(qi, n)] == ar
                al = alphas[(qi, n)]
                if al >= self.threshold:
                    nm, nn = nm + match, nn + (not match)
                snm, snn = snm + al * match, snn + al * (not match)
            count = nn / (nm + nn) if nm + nn > 0 else 0.5
            per_sentence.setdefault((a, i), []).append(
                (count, bayes(nm, nn, self.beta1, self.beta2), bayes(snm, snn, self.beta1, self.beta2)))
        out: dict[str, list[MethodScores]] = {n: [] for n in self.names}
        for a, it in enumerate(items):
            rows = [np.mean(per_sentence[(a, i)], axis=0) if (a, i) in per_sentence else np.full(3, 0.5)
                    for i in range(len(it.sentences))]
            arr = np.array(rows)
            ev = [{"questions": [q for (k, q, _) in questions if k == (a, i)]} for i in range(len(it.sentences))]
            for j, name in enumerate(self.names):
                out[name].append(MethodScores(arr[:, j], float(arr[:, j].mean()), ev if j == 2 else None))
        return out
