"""A test plugin: ``picky`` scores 0.5 for every sentence, and raises on a record whose response says "unreadable" (a
method that cannot take one record): the engine, the service's loop and Ray's actors must report that record alone. A
response that says "unjudgeable" gets no score (NaN), as an LLM judge's unparseable verdict does."""

import numpy as np

from halluscope.engine.registry import MethodSpec, register
from halluscope.scorers.base import MethodScores


class Picky:
    def score(self, items):
        if any("unreadable" in it.record.response for it in items):
            raise RuntimeError("cannot read an unreadable answer")
        return {"picky": [MethodScores(np.full(len(it.sentences), v), v) for it in items
                          for v in [np.nan if "unjudgeable" in it.record.response else 0.5]]}


register(MethodSpec("picky", level="sentence", needs=("sentences",), bounded=True, source="a test plugin",
                    formula="0.5, except on an answer that says 'unreadable': an error"),
         build=lambda names, art: Picky())
