"""The method registry: every method of both levels, declared once, next to its implementation.

A method is declared with a :class:`MethodSpec` (a stable name, its level, the artefacts it needs, whether its score
is bounded, how sentence scores become the response score, its formula and source, and whether it also scores the
claims of a response: ``claims=True`` for a sentence method that applies to any short standalone text, see
:mod:`halluscope.claims`; claims are a level of the results, scored by these sentence methods, not a third kind of
method) and a *build* function. A build
function receives the names asked for and the run's :class:`~halluscope.engine.store.Artefacts` and returns a scorer
whose ``score(items)`` gives ``{name: [MethodScores per item]}``. Methods that read the same pass (the ten n-gram
variants, the two NLI readings, the response components) share one build function and are built once per run.

    from halluscope.engine.registry import MethodSpec, register

    register(MethodSpec("my_method", level="sentence", needs=("sentences", "sample_sentences"), bounded=True,
                        source="Author et al. 2025, Eq. 3", formula="1 - share of samples that ..."),
             build=lambda names, art: MyScorer())

Registration happens when the module is imported: :func:`specs` imports every module of ``halluscope.scorers``
(and the response components), so a new method is one new file there (CONTRIBUTING.md).
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from dataclasses import asdict, dataclass
from typing import Any, Callable

LEVELS = ("sentence", "response")
# what a method may declare it needs; the artefact store computes each once per chunk of records
NEEDS = {
    "sentences": "the response split into sentences (cached per text)",
    "sample_sentences": "each sample split into sentences (cached per text)",
    "token_embeddings": "encoder token embeddings of sentences and samples (one batched pass, cached per text)",
    "sentence_embeddings": "mean-pooled encoder embeddings (the same pass as token_embeddings)",
    "nli": "NLI probabilities (entail, neutral, contradict) of (premise, hypothesis) pairs, cached per pair",
    "entities": "spaCy named entities of the response sentences",
    "llm": "generations of an LLM backend (prompts, questions, judges), cached on disk",
    "logprobs": "the main response's token log-probabilities (from `halluscope check`)",
    "proxy_lm": "a local causal LM teacher-forced over the response",
    "ngram_model": "an n-gram model fitted on the samples and the response",
    "mqag_models": "the MQAG question generation / answering models (or LLM prompts in their place)",
}


@dataclass(frozen=True)
class MethodSpec:
    """What a method is. ``aggregate`` says how its sentence scores become the response score (``mean`` or
    ``max``); a response-level method scores the whole answer and has none. Scores are hallucination scores: higher =
    more likely hallucinated (a confidence c is reported as 1 - c)."""

    name: str
    level: str
    needs: tuple[str, ...]
    bounded: bool
    source: str
    formula: str
    aggregate: str | None = "mean"
    group: str = ""  # methods of one group are computed in one pass (one build per run)
    claims: bool = False  # a sentence method that scores any short standalone text, so also claims (claims.py)
    options: tuple[str, ...] = ()  # the keys it takes in Detector(method_options={name: {...}})

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"method {self.name}: level must be one of {LEVELS}")
        unknown = [n for n in self.needs if n not in NEEDS]
        if unknown:
            raise ValueError(f"method {self.name}: unknown needs {unknown}; declare them in NEEDS")
        if self.level == "response" and self.aggregate is not None:
            raise ValueError(f"method {self.name}: a response-level method has no sentence aggregate")
        if self.claims and self.level != "sentence":
            raise ValueError(f"method {self.name}: only a sentence method scores claims")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["needs"] = list(self.needs)
        d["options"] = list(self.options)
        d.pop("group")
        return d


_SPECS: dict[str, MethodSpec] = {}
_BUILDERS: dict[str, Callable[[list[str], Any], Any]] = {}
_LOADED = False
# modules outside halluscope.scorers that register methods
_OTHER_MODULES = ("halluscope.engine.components",)
_LOAD_LOCK = threading.RLock()  # re-entrant: a module being imported may ask the registry


def register(*specs: MethodSpec, build: Callable[[list[str], Any], Any]) -> None:
    """Declare methods computed by one ``build(names, artefacts)``; a name is registered once."""
    group = specs[0].group or specs[0].name
    for s in specs:
        if s.name in _SPECS and _SPECS[s.name] != s:
            raise ValueError(f"method {s.name!r} is registered twice")
        _SPECS[s.name] = s if s.group == group else MethodSpec(**{**vars(s), "group": group})
    _BUILDERS[group] = build


def _load() -> None:
    """Import every module that registers methods, once; a thread that comes meanwhile waits for the whole set (it
    saw a half-filled registry: "unknown method")."""
    global _LOADED
    if _LOADED:
        return
    with _LOAD_LOCK:
        if _LOADED:
            return
        import halluscope.scorers as pkg

        for mod in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
        for name in _OTHER_MODULES:
            importlib.import_module(name)
        _LOADED = True


def specs() -> dict[str, MethodSpec]:
    """Every registered method by name, in registration order."""
    _load()
    return dict(_SPECS)


def spec(name: str) -> MethodSpec:
    all_ = specs()
    if name not in all_:
        raise ValueError(f"unknown method {name!r}; `halluscope methods` lists them")
    return all_[name]


def build(names: list[str], artefacts: Any) -> list[Any]:
    """One scorer per group of the given methods, each built once, in the order the groups were first named."""
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(spec(n).group, []).append(n)
    return [_BUILDERS[g](ns, artefacts) for g, ns in groups.items()]
