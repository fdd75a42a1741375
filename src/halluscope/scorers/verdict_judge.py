"""Verdict judge: an LLM says whether the answer to the question is correct (the tunable-ensemble paper's judge).

    confidence = 1 (Correct), 0.5 (I am not sure), 0 (Incorrect),    score = 1 - confidence

Bouchard & Chauhan (2025, seed 003, §3.3), after Chen & Mueller (2023): the judge reads the question and the
proposed answer and replies Correct, Incorrect or I am not sure (:data:`~halluscope.scorers.judging.JUDGE_TEMPLATE`).
This is the ``self_judge`` / ``external_judge`` component of ``halluscope ensemble`` as a method of the engine, so it
runs in ``halluscope score -m verdict_judge`` and beside every other method on the run's LLM;
``Detector(method_options={"verdict_judge": {"template": ..., "retries": ...}})`` changes it. The reply's first
non-empty line must open with the verdict (:func:`~halluscope.scorers.judging.parse_verdict`); an unparseable reply is
asked again (``retries``, default 2) and then recorded as missing: NaN, counted, never 0.
"""

from __future__ import annotations

from .judging import LLMJudge, register_judge


register_judge("verdict_judge", LLMJudge,
               lambda judge, opts: f"1 - verdict (Correct 1, I am not sure 0.5, Incorrect 0); {judge.id}",
               source="Bouchard & Chauhan 2025 (003) §3.3 LLM judge; Chen & Mueller 2023",
               formula="1 - c, c = 1 / 0.5 / 0 for the judge's Correct / I am not sure / Incorrect; NaN when "
                       "unparseable")
