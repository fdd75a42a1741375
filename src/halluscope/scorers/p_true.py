"""P(True) (Kadavath et al. 2022, "Language Models (Mostly) Know What They Know", §3.3 and §4 with brainstormed
samples): the LLM is shown the question, its samples as brainstormed ideas, and the answer, and asked

    Question: {question}
    Here are some brainstormed ideas: {sample 1}
    {sample 2}
    ...
    Proposed Answer: {answer}
    Is the proposed answer:
     (A) True
     (B) False
    The proposed answer is:

    score = 1 - P(True)

**From log-probs** (when the backend returns top log-probs; the HTTP, llama.cpp and transformers backends and a
LangChain model that reports them do): one greedy generation with the top-k log-probs of each token; at the first
position whose top-k holds an option token, P(True) = sum of p over the tokens that name option A / True, divided
by the sum over the tokens naming A / True or B / False (tokens are read stripped of spaces, brackets and
punctuation, case ignored, so ' (A', 'A', ' True' and 'true' all count for True). Leading tokens that are only
whitespace or punctuation (' (', a newline) are read past; if the model writes something else first, or no
option is in the top-k, P(True) is missing (NaN). **From samples** (when the backend returns no log-probs):
``k`` verdicts drawn at temperature 1 (seeds 1..k), P(True) = share of True (A) among those that open with an
option; NaN when none does. Which one was used is stated in each answer's evidence (``p_true_from``) and in the
run's settings. The paper reads P(True) off the token probabilities only; it does not normalize over the two
options (uqlm's ``p_true`` reads the first token only): we normalize so that mass on other tokens (' (', a
newline) does not count as False.

Options (``Detector(method_options={"p_true": {...}})``): ``template`` (needs {question}, {answer}, {ideas}),
``top_logprobs`` (10), ``k`` (10 sampled verdicts in the fallback), ``max_ideas`` (the first 10 samples are listed).
"""

from __future__ import annotations

import math
import re

from .judging import JudgeMethod, Verdict, method_options, option_names, question_answer
from ..llm.base import GenParams, LLMError, TokenLogprob, unless_all_failed

PTRUE_TEMPLATE = ("Question: {question}\nHere are some brainstormed ideas: {ideas}\nProposed Answer: {answer}\n"
                  "Is the proposed answer:\n (A) True\n (B) False\nThe proposed answer is:")
_NEUTRAL = " \t\r\n()[]\"'*.:,"
_REPLY = re.compile(r"^[\s\"'*\[]*\(?\s*(a|b|true|false)\b", re.IGNORECASE)


def option_of(token: str) -> bool | None:
    """True for a token naming option A / True, False for B / False, None for any other token."""
    t = token.strip(_NEUTRAL).lower()
    return True if t in ("a", "true") else False if t in ("b", "false") else None


def p_true_from_tokens(tokens: list[TokenLogprob]) -> tuple[float | None, int]:
    """(P(True), position read): normalized over the option tokens of the first position whose top-k names an
    option, reading past whitespace/punctuation tokens; (None, position) when the model writes something else."""
    for pos, t in enumerate(tokens):
        top = {**(t.top or {}), t.token: t.logprob}
        mass = {True: 0.0, False: 0.0}
        for tok, lp in top.items():
            o = option_of(tok)
            if o is not None and lp is not None and math.isfinite(lp):
                mass[o] += math.exp(lp)
        if mass[True] + mass[False] > 0:
            return mass[True] / (mass[True] + mass[False]), pos
        if t.token.strip(_NEUTRAL):
            return None, pos
    return None, len(tokens)


def parse_option(text: str) -> bool | None:
    """The option a sampled verdict opens with ('(A) True', 'B', 'false.'); None for anything else."""
    line = next((ln for ln in (text or "").splitlines() if ln.strip()), "")
    m = _REPLY.match(line)
    return None if not m else m.group(1).lower() in ("a", "true")


class PTrue:
    """P(True) of (question, answer) with the samples as brainstormed ideas, over any backend (a cached sampler)."""

    def __init__(self, sampler, template: str = PTRUE_TEMPLATE, top_logprobs: int = 10, k: int = 10,
                 max_ideas: int = 10, max_tokens: int = 4):
        for f in ("{question}", "{answer}", "{ideas}"):
            if f not in template:
                raise ValueError(f"the P(True) template needs {f}")
        self.sampler, self.template = sampler, template
        self.top_logprobs, self.k, self.max_ideas, self.max_tokens = int(top_logprobs), int(k), max_ideas, max_tokens

    def prompt(self, question: str, answer: str, samples) -> str:
        ideas = "\n".join(" ".join(s.split()) for s in list(samples)[: self.max_ideas])
        return self.template.format(question=question, answer=answer, ideas=ideas)

    def judge(self, pairs: list[tuple[str, str]], samples: list, progress=None) -> list[Verdict]:
        """One verdict per (question, answer) with its samples: confidence = P(True), NaN when missing."""
        prompts = [self.prompt(q, a, s) for (q, a), s in zip(pairs, samples)]
        params = GenParams(0.0, self.max_tokens, seed=0, top_logprobs=self.top_logprobs, stop=("\n\n",))
        gens = unless_all_failed(self.sampler.run([(p, params, 0) for p in prompts], progress))
        out, todo = [], []
        for i, g in enumerate(gens):
            if isinstance(g, LLMError):
                out.append(Verdict(float("nan"), [f"<error: {g}>"], {"p_true_from": "logprobs"}))
            elif g.tokens and any(t.top for t in g.tokens):
                p, pos = p_true_from_tokens(g.tokens)
                top = g.tokens[pos].top if pos < len(g.tokens) else None
                out.append(Verdict(float("nan") if p is None else p, [g.text.strip()],
                                   {"p_true_from": "logprobs", "position": pos, "top": top}))
            else:  # the backend gave no log-probs: sampled verdicts instead
                out.append(None)
                todo.append(i)
        for i, v in zip(todo, self._sampled([prompts[i] for i in todo])):
            out[i] = v
        return out

    def _sampled(self, prompts: list[str]) -> list[Verdict]:
        jobs = [(p, GenParams(1.0, self.max_tokens, seed=r, stop=("\n\n",)), r)
                for p in prompts for r in range(1, self.k + 1)]
        gens = unless_all_failed(self.sampler.run(jobs))
        out = []
        for j in range(len(prompts)):
            chunk = gens[j * self.k : (j + 1) * self.k]
            replies = [f"<error: {g}>" if isinstance(g, LLMError) else g.text.strip() for g in chunk]
            votes = [None if isinstance(g, LLMError) else parse_option(g.text) for g in chunk]
            known = [v for v in votes if v is not None]
            out.append(Verdict(sum(known) / len(known) if known else float("nan"), replies,
                               {"p_true_from": "samples", "votes": votes}))
        return out


def _build(names, art):
    ptrue = PTrue(art.llm("p_true"), **method_options(art, "p_true"))
    return JudgeMethod("p_true", lambda items: ptrue.judge(question_answer(items), [it.evidence for it in items]),
                       "1 - P(True) (Kadavath et al. 2022) with the samples as brainstormed ideas; "
                       f"{ptrue.sampler.backend.cache_id()}", tally="p_true_from")


def _register() -> None:
    from ..engine.registry import MethodSpec, register

    register(MethodSpec("p_true", level="response", needs=("llm",), bounded=True, aggregate=None,
                        source="Kadavath et al. 2022, Language Models (Mostly) Know What They Know, §3.3-4 (P(True) "
                               "with brainstormed samples)",
                        formula="1 - P(True): the LLM's probability of '(A) True' after 'Is the proposed answer: (A) "
                                "True (B) False', normalized over the True/False tokens of its top log-probs (else the "
                                "share of True among k sampled verdicts); NaN when neither is found",
                        options=option_names(PTrue.__init__)[1:]),  # after self and the sampler
             build=_build)


_register()
