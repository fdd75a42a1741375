"""A test plugin: ``picky`` scores 0.5 for every sentence, and raises on a record whose response says "unreadable" (a
method that cannot take one record): the engine, the service's loop and Ray's actors must report that record alone."""

import numpy as np

from halluscope.engine.registry import MethodSpec, register
from halluscope.scorers.base import MethodScores


class Picky:
    def score(self, items):
        if any("unreadable" in it.record.response for it in items):
            raise RuntimeError("cannot read an unreadable answer")
        return {"picky": [MethodScores(np.full(len(it.sentences), 0.5), 0.5) for it in items]}


register(MethodSpec("picky", level="sentence", needs=("sentences",), bounded=True, source="a test plugin",
                    formula="0.5, except on an answer that says 'unreadable': an error"),
         build=lambda names, art: Picky())
