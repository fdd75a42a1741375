"""Likert judge: an LLM scores the answer's correctness on a 1-5 scale, mapped to a confidence in [0, 1].

    confidence = (k - 1) / 4,    score = 1 - confidence,    k in {1, ..., 5}

1 completely incorrect, 2 mostly incorrect, 3 partially correct, 4 mostly correct, 5 completely correct: uqlm's
``likert`` judge template (Bouchard & Chauhan 2025, uqlm ``LLMJudge(scoring_template="likert")``), with the
same normalization (0, 0.25, 0.5, 0.75, 1). Our template states the scale in one line and shows two solved
examples so that a completion (base) model answers with a digit in place (uqlm's continuous template shows
examples too); ``Detector(method_options={"likert_judge": {"template": ...}})`` changes it.

Parsing: the reply's first non-empty line opens with an integer 1-5 ('4', '4/5', 'Score: 4', '**4**'), or with one
of the five labels ('mostly correct'); anything else, a fraction ('4.5') or a number off the scale, is unparseable
(uqlm searches for the keywords anywhere, so its 'correct' also matches inside 'incorrect'). Unparseable replies are
asked again (``retries``, default 2) and then recorded as missing: NaN, counted, never 0.
"""

from __future__ import annotations

import re

from .judging import LLMJudge, parse_scale, register_judge

LIKERT_TEMPLATE = (
    "Score the correctness of the proposed answer to the question from 1 to 5: 1 completely incorrect, 2 mostly "
    "incorrect, 3 partially correct, 4 mostly correct, 5 completely correct.\n\n"
    "Question: Who was the first president of the United States?\nProposed answer: Benjamin Franklin\n"
    "Score (1-5): 1\n\n"
    "Question: What is 2+2?\nProposed answer: 4\nScore (1-5): 5\n\n"
    "Question: {question}\nProposed answer: {answer}\nScore (1-5):"
)
LABELS = ("completely incorrect", "mostly incorrect", "partially correct", "mostly correct", "completely correct")
_LABEL = re.compile(r"^[\s\"'*(\[]*(" + "|".join(LABELS) + r")\b", re.IGNORECASE)


def parse_likert(text: str) -> float | None:
    """Confidence (k - 1) / 4 of a 1-5 reply (a digit or a label); None when unparseable."""
    v = parse_scale(text, 5, integer=True)
    if v is not None:
        return v
    line = next((ln for ln in (text or "").splitlines() if ln.strip()), "")
    m = _LABEL.match(line)
    return LABELS.index(m.group(1).lower()) / 4 if m else None


def likert_judge(sampler, template: str = LIKERT_TEMPLATE, retries: int = 2, max_tokens: int = 6):
    return LLMJudge(sampler, template, retries=retries, max_tokens=max_tokens, parse=parse_likert)


register_judge("likert_judge", likert_judge,
               lambda judge, opts: f"1 - (k - 1)/4, k = the judge's 1-5 score; {judge.id}",
               source="uqlm LLMJudge 'likert' template (Bouchard & Chauhan 2025)",
               formula="1 - (k - 1)/4, k = the LLM judge's correctness score on a 1-5 Likert scale; NaN when "
                       "unparseable")
