"""A method of one's own, outside the package, as a user writes it (README, "Methods of your own"): the tests load
it through HALLUSCOPE_PLUGINS and on Ray's actors. ``longest_word``: 1 - the share of samples that contain the
sentence's longest word; ``short_scores``: the same with one sentence score too few (a scorer's bug, which the
engine must name)."""

import re

import numpy as np

from halluscope.engine.registry import MethodSpec, register
from halluscope.scorers.base import MethodScores


def _longest(sentence: str) -> str:
    words = re.findall(r"\w+", sentence.lower())
    return max(words, key=len) if words else ""


class LongestWord:
    def __init__(self, names):
        self.names = names

    def score(self, items):
        out = {n: [] for n in self.names}
        for it in items:
            samples = [s.lower() for s in it.evidence]
            s = np.array([1.0 - np.mean([_longest(x) in t for t in samples]) if samples else np.nan
                          for x in it.sentences])
            for n in self.names:
                sent = s[:-1] if n == "short_scores" else s
                out[n].append(MethodScores(sent, float(np.mean(s))))
        return out


register(MethodSpec("longest_word", level="sentence", needs=("sentences",), bounded=True,
                    source="a test plugin", formula="1 - share of samples containing the sentence's longest word"),
         MethodSpec("short_scores", level="sentence", needs=("sentences",), bounded=True, source="a test plugin",
                    formula="longest_word with one sentence score too few"),
         build=lambda names, art: LongestWord(names))
