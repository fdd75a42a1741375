"""SelfCheck-Prompt (Manakul et al. 2023, later version §5.5): ask an LLM whether each sample supports each sentence.

For sentence r_i and sample S_n the LLM gets the template (default, the paper's):

    Context: {context}
    Sentence: {sentence}
    Is the sentence supported by the context above? Answer Yes or No.
    Answer:

and its answer maps to x = 0 (Yes), 1 (No), 0.5 (anything else); S_prompt(i) = mean over samples of x. Greedy
decoding (temperature 0), a few tokens. The per-pair answers go through the sampler, so they are cached on disk,
run concurrently and retried like every generation. The evidence kept per sentence is each sample's raw answer.
A judgement whose generation still fails after the retries is missing (``<error: ...>`` in the evidence): the mean
is over the others, NaN where every one of a sentence's failed; the batch goes on. Where every judgement of the
batch failed (a refused key, a model the server does not have) the first failure is raised. The answers neither
Yes nor No are counted in the method's description, and warned of where they are most of a batch's.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np

from ..llm.base import GenParams, LLMError, unless_all_failed
from ..llm.sampler import Sampler
from ..types import MethodInfo
from .base import MethodScores, PreparedItem

DEFAULT_TEMPLATE = (
    "Context: {context}\nSentence: {sentence}\nIs the sentence supported by the context above? Answer Yes or No.\n"
    "Answer:"
)
_WORD = re.compile(r"[A-Za-z]+")


def parse_yes_no(answer: str) -> float:
    """Yes -> 0.0, No -> 1.0, anything else -> 0.5 (the first word decides)."""
    m = _WORD.search(answer or "")
    if not m:
        return 0.5
    w = m.group(0).lower()
    return 0.0 if w == "yes" else 1.0 if w == "no" else 0.5


class PromptScorer:
    name = "prompt"

    def __init__(self, sampler: Sampler, template: str = DEFAULT_TEMPLATE, max_tokens: int = 5):
        if "{context}" not in template or "{sentence}" not in template:
            raise ValueError("the prompt template needs {context} and {sentence}")
        self.sampler = sampler
        self.template = template
        self.params = GenParams(temperature=0.0, max_tokens=max_tokens, seed=0, stop=("\n",))
        self.answered = self.other = 0  # answers that came back, and those neither Yes nor No (read as 0.5)
        self._warned = False  # said once: the scorer runs per chunk of a run

    def method_info(self) -> list[MethodInfo]:
        return [MethodInfo(self.name, bounded=True, description="mean over samples of the LLM's answer to 'is the "
                           f"sentence supported by the context?' (Yes 0, No 1, other 0.5); {self.other} of "
                           f"{self.answered} answers neither Yes nor No; {self.sampler.backend.cache_id()}")]

    def score(self, items: list[PreparedItem]) -> dict[str, list[MethodScores]]:
        jobs, where = [], []
        for k, it in enumerate(items):
            for i, s in enumerate(it.sentences):
                for n, ctx in enumerate(it.evidence):
                    jobs.append((self.template.format(context=ctx.replace("\n", " "), sentence=s), self.params, 0))
                    where.append((k, i, n))
        gens = unless_all_failed(self.sampler.run(jobs))
        answers = [[[None] * len(it.evidence) for _ in it.sentences] for it in items]
        failed = set()
        for (k, i, n), g in zip(where, gens):
            if isinstance(g, LLMError):  # a failed judgement is missing, never guessed: the others still count
                answers[k][i][n] = f"<error: {g}>"
                failed.add((k, i, n))
            else:
                answers[k][i][n] = g.text.strip()
        self._count([answers[k][i][n] for k, i, n in where if (k, i, n) not in failed])
        out = []
        for k, it in enumerate(items):
            x = np.array([[math.nan if (k, i, n) in failed else parse_yes_no(a) for n, a in enumerate(row)]
                          for i, row in enumerate(answers[k])])
            seen = np.isfinite(x).sum(axis=1)  # a sentence whose every judgement failed: NaN (no warning filters:
            s = np.where(seen > 0, np.nansum(x, axis=1) / np.maximum(seen, 1), math.nan)  # they are per process)
            passage = float(s[np.isfinite(s)].mean()) if np.isfinite(s).any() else math.nan
            out.append(MethodScores(s, passage, [{"answers": row} for row in answers[k]]))
        return {self.name: out}

    def _count(self, answers: list[str]) -> None:
        """Count the answers neither Yes nor No (SelfCheckGPT reads them as 0.5); warn once, where they are most of
        the answers so far: a model that answers otherwise (a chat model's "The sentence is supported") makes the
        column look like real, undecided scores."""
        self.answered += len(answers)
        self.other += sum(parse_yes_no(a) == 0.5 for a in answers)
        if not self._warned and self.answered and self.other > self.answered / 2:
            self._warned = True
            warnings.warn(f"prompt: {self.other} of {self.answered} answers were neither Yes nor No (read as 0.5): "
                          "give the model a template it answers with Yes or No (--method-option prompt.template=...)",
                          stacklevel=2)


def _register() -> None:
    from ..engine.registry import MethodSpec, register

    from .judging import method_options, option_names

    register(MethodSpec("prompt", level="sentence", needs=("sentences", "llm"), bounded=True, claims=True,
                        source="SelfCheckGPT (Manakul et al. 2023) §5.5 (SelfCheck-Prompt)",
                        formula="mean over samples of the LLM's verdict 'supported by the sample?': Yes 0, No 1, "
                                "other 0.5", options=option_names(PromptScorer)),
             build=lambda names, art: PromptScorer(art.llm("prompt"), **method_options(art, "prompt")))


_register()
