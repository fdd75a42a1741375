"""Verbalized confidence: the LLM is asked how confident it is, from 0 to 100, that the answer is correct.

    score = 1 - c / 100,    c = the number the reply opens with (0-100)

Source: verbalized confidence as in Lin, Hilton & Evans 2022 ("Teaching models to express their uncertainty in
words"), Tian et al. 2023 ("Just ask for calibration", verbal 1-stage) and Xiong et al. 2024 ("Can LLMs express
their uncertainty?", vanilla verbalized confidence), here for a given answer: the model states its confidence in
the answer (its own when the run's LLM wrote it, as with ``halluscope check``). The default template frames the
answer as the model's own and shows two solved examples (one wrong answer rated low, one right answer rated high),
so that a completion (base) model answers with a number in place; ``Detector(method_options={"verbalized":
{"template": ..., "retries": ..., "max_tokens": ...}})`` changes it.

Parsing (:func:`~halluscope.scorers.judging.parse_scale`): the first non-empty line must open with the number
('85', '85%', 'Confidence: 85', '0.85' read as a probability); anything else is unparseable. An unparseable reply is
asked again at temperature 1 with a new seed (``retries``, default 2) and then recorded as missing: the score is
NaN, counted in the run's settings, never 0. Greedy decoding, a few tokens, through the run's cached sampler.
"""

from __future__ import annotations

from .judging import LLMJudge, parse_scale, register_judge

VERBALIZED_TEMPLATE = (
    "Answer the question, then state your confidence, from 0 to 100, that your answer is correct.\n\n"
    "Question: Who was the first president of the United States?\nYour answer: Benjamin Franklin\n"
    "Confidence (0-100): 5\n\n"
    "Question: What is 2+2?\nYour answer: 4\nConfidence (0-100): 99\n\n"
    "Question: {question}\nYour answer: {answer}\nConfidence (0-100):"
)


def parse_confidence(text: str) -> float | None:
    """Confidence in [0, 1] from a 0-100 reply; None when unparseable."""
    return parse_scale(text, 100)


def verbalized_judge(sampler, template: str = VERBALIZED_TEMPLATE, retries: int = 2, max_tokens: int = 6):
    return LLMJudge(sampler, template, retries=retries, max_tokens=max_tokens, parse=parse_confidence)


register_judge("verbalized", verbalized_judge,
               lambda judge, opts: f"1 - stated confidence (0-100) / 100; {judge.id}",
               source="verbalized confidence: Lin et al. 2022; Tian et al. 2023; Xiong et al. 2024",
               formula="1 - c/100, c = the LLM's stated confidence (0-100) that the answer is correct; NaN when the "
                       "reply has no number")
