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
(and the response components), so a new method of the package is one new file there (CONTRIBUTING.md). Methods of
your own, outside the package, are *plugins*: modules that call :func:`register` when imported, found by

- ``HALLUSCOPE_PLUGINS``: module names or ``.py`` file paths, separated by commas (for scripts and the CLI:
  ``HALLUSCOPE_PLUGINS=./mymethod.py halluscope score answers.jsonl -m my_method``);
- the entry-point group ``halluscope.methods`` of an installed package (``[project.entry-points."halluscope.methods"]
  my_method = "mypackage.methods"``);
- or an ``import`` in your own program before the :class:`~halluscope.pipeline.Detector` is made.

Ray's actors import the plugins of the methods they score (:func:`plugin_sources`), however they were registered,
except a method registered in ``__main__`` (a script or notebook), which they cannot import: an error says so.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import pkgutil
import re
import sys
import threading
from dataclasses import asdict, dataclass
from typing import Any, Callable

LEVELS = ("sentence", "response")
# what a method may declare it needs; the artefact store computes each once per chunk of records, when asked
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
    """What a method is. ``aggregate`` names the rule by which its scorer turns sentence scores into the response
    score (``mean``, ``max``, ``token-mean``): the scorer computes that score itself (``MethodScores.passage``), and
    the name is what ``halluscope methods`` and the results' settings show; a response-level method scores the whole
    answer and has none. ``needs`` declares the artefacts it reads (listed by ``halluscope methods``; ``llm``,
    ``logprobs`` and ``proxy_lm`` also decide where it can run: Ray's actors load no LLM); its scorer asks the run's
    :class:`~halluscope.engine.store.Artefacts` for them, which computes each once. Scores are hallucination scores:
    higher = more likely hallucinated (a confidence c is reported as 1 - c)."""

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
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):  # --methods lower-cases and splits on commas
            raise ValueError(f"method {self.name!r}: a name is lower-case letters, digits and _, starting with a "
                             "letter (--methods lower-cases what it is given and splits it on commas)")
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
PLUGINS_ENV = "HALLUSCOPE_PLUGINS"
ENTRY_POINTS = "halluscope.methods"
_ORIGIN: dict[str, str] = {}  # method -> the module that registered it
_PLUGIN_FILES: dict[str, str] = {}  # module name -> the .py file it was imported from (HALLUSCOPE_PLUGINS)


def register(*specs: MethodSpec, build: Callable[[list[str], Any], Any]) -> None:
    """Declare methods computed by one ``build(names, artefacts)``; a name is registered once."""
    group = specs[0].group or specs[0].name
    origin = sys._getframe(1).f_globals.get("__name__", "")
    for s in specs:
        spec_ = s if s.group == group else MethodSpec(**{**vars(s), "group": group})
        if s.name in _SPECS and _SPECS[s.name] != spec_:  # the same spec again (a module imported twice) is fine
            raise ValueError(f"method {s.name!r} is registered twice")
        _SPECS[s.name] = spec_
        _ORIGIN.setdefault(s.name, origin)
    _BUILDERS[group] = build


def load_plugins(entries) -> None:
    """Import plugin modules (module names, or paths of ``.py`` files), each once; one that cannot be imported is a
    ValueError naming it."""
    for entry in [e.strip() for e in entries if e and e.strip()]:
        try:
            if entry.endswith(".py") or os.sep in entry:
                path = os.path.abspath(os.path.expanduser(entry))
                stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
                name = f"halluscope_plugin_{stem}_{hashlib.sha1(path.encode()).hexdigest()[:8]}"  # one per file
                if _PLUGIN_FILES.get(name) == path:  # (imported by its name as well, it registers the same again)
                    continue
                spec_ = importlib.util.spec_from_file_location(name, path)
                if spec_ is None or not os.path.isfile(path):
                    raise FileNotFoundError(f"no file {path}")
                module = importlib.util.module_from_spec(spec_)
                if os.path.dirname(path) not in sys.path:  # its own sibling modules import as they do beside it
                    sys.path.append(os.path.dirname(path))
                sys.modules[name] = module
                _PLUGIN_FILES[name] = path
                try:
                    spec_.loader.exec_module(module)
                except BaseException:
                    del sys.modules[name], _PLUGIN_FILES[name]
                    raise
            else:
                importlib.import_module(entry)
        except Exception as e:  # noqa: BLE001 (whatever the plugin raised, said with its name)
            raise ValueError(f"the plugin {entry} cannot be imported: {type(e).__name__}: {e}") from e


def _load_entry_points() -> None:
    """The installed packages' methods (entry-point group ``halluscope.methods``: a module, imported; or a
    ``module:function``, called). A broken one is a warning, not an error: it is installed, not asked for by this
    run, and would otherwise stop every command."""
    import warnings
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINTS):
        try:
            target = ep.load()
            if ep.attr and callable(target):
                target()
        except Exception as e:  # noqa: BLE001 (whatever the package raised, said with its name)
            warnings.warn(f"the {ENTRY_POINTS} entry point {ep.name} ({ep.value}) cannot be loaded, its methods "
                          f"are left out: {type(e).__name__}: {e}", RuntimeWarning, stacklevel=2)


def plugin_sources(names) -> list[str]:
    """What another process must import to have ``names`` registered (for :func:`load_plugins`): the file of a
    plugin imported from a path, or of a top-level module (``import mymethod`` found it beside the script, where
    a worker may not look), else the module's name (a package installed on every node, as halluscope must be)."""
    specs()
    out = []
    for n in names:
        mod = _ORIGIN.get(n, "")
        if not mod or mod.startswith("halluscope."):
            continue
        if mod == "__main__":
            raise ValueError(f"method {n} is registered in __main__ (a script or notebook), which other processes "
                             f"cannot import: register it in a module file and name that file in {PLUGINS_ENV} (or "
                             "import it)")
        file = _PLUGIN_FILES.get(mod) or ("." not in mod and getattr(sys.modules.get(mod), "__file__", None))
        src = file or mod
        if src not in out:
            out.append(src)
    return out


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
        _load_entry_points()
        load_plugins(os.environ.get(PLUGINS_ENV, "").split(","))
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
