"""A panel of LLM judges whose verdicts are combined (uqlm's ``LLMPanel``, Bouchard & Chauhan 2025).

Each judge gives a confidence c_j in [0, 1] that the answer is correct, or none (unparseable after its retries);
over the J' judges that gave one:

    mean:      confidence = (1/J') sum_j c_j
    min, max, median: of the c_j (uqlm's other aggregations; min is the strictest judge)
    majority:  a judge votes 'correct' when c_j > 0.5 and 'incorrect' when c_j < 0.5 (0.5 abstains);
               confidence = 1 if more vote correct than incorrect, 0 if fewer, 0.5 on a tie
    score = 1 - confidence;  NaN when no judge gave a verdict (never 0)

uqlm offers avg / min / max / median over its judges; we offer those and the majority vote. A judge is a kind
with its template and parser (``verdict``: Correct / Incorrect / I am not sure, Chen & Mueller 2023 as in
:mod:`halluscope.scorers.judging`; ``likert``; ``continuous``; ``verbalized``) on a backend: different backends or
models, or the same model with different templates. The default panel is the run's LLM with the ``verdict``,
``likert`` and ``continuous`` templates (their generations are the cached ones of those methods, so running the
panel beside them costs nothing more). Configuration::

    Detector(methods=["judge_panel"], llm=sampler, method_options={"judge_panel": {
        "combine": "majority",
        "judges": ["verdict", {"kind": "likert", "llm": other_sampler}, {"kind": "continuous", "scale": 1}]}})

A judge entry is a kind name, a dict (``kind``, optional ``llm``, ``name``, ``template`` and the kind's other
settings such as ``retries``), or any object with ``judge(pairs) -> [Verdict]`` (e.g. an
:class:`~halluscope.scorers.judging.LLMJudge`). Each judge's confidence is kept in the answer's evidence.
"""

from __future__ import annotations

import math

import numpy as np

from .judging import JudgeMethod, LLMJudge, Verdict, method_options, question_answer
from .continuous_judge import continuous_judge
from .likert_judge import likert_judge
from .verbalized import verbalized_judge

KINDS = {"verdict": lambda sampler, **kw: LLMJudge(sampler, **kw), "likert": likert_judge,
         "continuous": continuous_judge, "verbalized": verbalized_judge}
DEFAULT_PANEL = ("verdict", "likert", "continuous")
COMBINE = ("mean", "min", "max", "median", "majority")


def combine_confidences(values: list[float], how: str = "mean") -> float:
    """The panel's confidence from its judges' (NaN = missing), by one of :data:`COMBINE` (see the module)."""
    if how not in COMBINE:
        raise ValueError(f"judge_panel: combine must be one of {COMBINE}, got {how!r}")
    v = [x for x in values if not math.isnan(x)]
    if not v:
        return float("nan")
    if how in ("mean", "min", "max", "median"):
        return float({"mean": np.mean, "min": np.min, "max": np.max, "median": np.median}[how](v))
    yes, no = sum(x > 0.5 for x in v), sum(x < 0.5 for x in v)
    return 1.0 if yes > no else 0.0 if no > yes else 0.5


class JudgePanel:
    """Several judges of (question, answer), combined per answer."""

    def __init__(self, judges: dict, combine: str = "mean"):
        combine_confidences([], combine)  # checks the name
        if not judges:
            raise ValueError("judge_panel: the panel needs at least one judge")
        self.judges, self.combine = dict(judges), combine

    def judge(self, pairs: list[tuple[str, str]], progress=None) -> list[Verdict]:
        per = {name: j.judge(pairs, progress) for name, j in self.judges.items()}
        out = []
        for i in range(len(pairs)):
            conf = {name: per[name][i].confidence for name in per}
            out.append(Verdict(combine_confidences(list(conf.values()), self.combine),
                               [f"{name}: {r}" for name in per for r in per[name][i].replies],
                               {"judges": conf, "combine": self.combine,
                                "missing_judges": [name for name, c in conf.items() if math.isnan(c)]}))
        return out


def build_panel(judges=None, combine: str = "mean", llm=None) -> JudgePanel:
    """A panel from its configuration (see the module); ``llm`` is the sampler of judges that name none."""
    built: dict = {}
    for entry in judges or DEFAULT_PANEL:
        if hasattr(entry, "judge"):
            name, judge = type(entry).__name__.lower(), entry
        else:
            cfg = {"kind": entry} if isinstance(entry, str) else dict(entry)
            kind = cfg.pop("kind", "verdict")
            if kind not in KINDS:
                raise ValueError(f"judge_panel: unknown judge kind {kind!r}; choose from {sorted(KINDS)}")
            sampler = cfg.pop("llm", None) or llm
            if sampler is None:
                raise ValueError(f"judge_panel: the {kind!r} judge has no LLM: give it 'llm' or pass Detector(llm=...)")
            name, judge = cfg.pop("name", kind), KINDS[kind](sampler, **cfg)
        k, base = 2, name
        while name in built:
            name, k = f"{base}_{k}", k + 1
        built[name] = judge
    return JudgePanel(built, combine)


def _build(names, art):
    opts = method_options(art, "judge_panel")
    panel = build_panel(opts.get("judges"), opts.get("combine", "mean"), art.option("llm"))
    return JudgeMethod("judge_panel", lambda items: panel.judge(question_answer(items)),
                       f"1 - {panel.combine} of the judges' confidences ({', '.join(panel.judges)})",
                       tally="missing_judges")  # a judge that never answers: its count, not "0 missing"


def _register() -> None:
    from ..engine.registry import MethodSpec, register

    register(MethodSpec("judge_panel", level="response", needs=("llm",), bounded=True, aggregate=None,
                        source="uqlm LLMPanel (Bouchard & Chauhan 2025); verdict judge: Chen & Mueller 2023",
                        formula="1 - the mean (or min, max, median, majority vote) of several LLM judges' "
                                "confidences (verdict, Likert, continuous by default; any backends); NaN when no "
                                "judge gave a verdict",
                        options=("judges", "combine")),
             build=_build)


_register()
