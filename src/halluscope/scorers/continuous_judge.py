"""Continuous judge: an LLM judge gives the probability that the answer is correct, on a 0-100 (default) or 0-1 scale.

    confidence = s / S,    score = 1 - confidence,    s in [0, S], S = 100 or 1

uqlm's ``continuous`` judge template (Bouchard & Chauhan 2025, uqlm ``LLMJudge(scoring_template="continuous")``:
"how likely is the above answer to be correct ... between 0 (lowest) and 100 (highest)", with two solved examples,
normalized by 100). Unlike ``verbalized`` (the model's confidence in its own answer), the judge rates a proposed
answer as an outside assessor, and may be any backend. ``Detector(method_options={"continuous_judge":
{"scale": 1}})`` asks for a probability in [0, 1] instead; ``template`` replaces the prompt.

Parsing (:func:`~halluscope.scorers.judging.parse_scale`): the first non-empty line opens with a number on the scale
('85', '85%', '0.85'); uqlm joins every digit of the reply ('3 out of 10' reads 310, '0.85' reads 85), we read the
leading number only. Unparseable replies are asked again (``retries``, default 2), then recorded as missing: NaN,
counted, never 0.
"""

from __future__ import annotations

from .judging import LLMJudge, parse_scale, register_judge


def continuous_template(scale: float = 100) -> str:
    """The judge prompt for a 0-100 or a 0-1 scale (two solved examples, then the answer to rate)."""
    if scale not in (1, 100):
        raise ValueError(f"continuous_judge: scale must be 100 or 1, got {scale!r}")
    rng, low, high = ("0-100", "4", "99") if scale == 100 else ("0-1", "0.04", "0.99")
    head = ("How likely is the proposed answer to the question to be correct? Give a score between 0 (certainly "
            f"incorrect) and {scale:g} (certainly correct), and nothing else.\n\n")
    return (head + "Question: Who was the first president of the United States?\nProposed answer: Benjamin "
            f"Franklin\nScore ({rng}): {low}\n\nQuestion: What is 2+2?\nProposed answer: 4\nScore ({rng}): {high}\n\n"
            f"Question: {{question}}\nProposed answer: {{answer}}\nScore ({rng}):")


def continuous_judge(sampler, scale: float = 100, template: str | None = None, retries: int = 2,
                     max_tokens: int = 6):
    return LLMJudge(sampler, template or continuous_template(scale), retries=retries, max_tokens=max_tokens,
                    parse=lambda text: parse_scale(text, scale))


register_judge("continuous_judge", continuous_judge,
               lambda judge, opts: f"1 - s/{opts.get('scale', 100):g}, s = the judge's score on "
                                   f"0-{opts.get('scale', 100):g}; {judge.id}",
               source="uqlm LLMJudge 'continuous' template (Bouchard & Chauhan 2025)",
               formula="1 - s/S, s = the LLM judge's probability that the answer is correct on 0-S (S = 100, or 1 "
                       "by option); NaN when unparseable")
