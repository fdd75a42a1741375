"""Where models are loaded (one place, each once, lazily) and where a run's artefacts are kept.

:func:`encoder`, :func:`nli` and :func:`proxy_lm` return the process's one instance per setting: the detector, the
response components, the ensemble commands and the service all ask here, so they share one model and its
content-keyed caches (an NLI pair, a text's embeddings: each computed once, whoever asks). :class:`Artefacts` is
what a run's methods receive: the run's options and accessors to those models. Methods ask it for artefacts; they
never load a model themselves.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

_LOCK = threading.Lock()
_MODELS: dict[tuple, Any] = {}


def _shared(key: tuple, make):
    with _LOCK:
        if key not in _MODELS:
            _MODELS[key] = make()
        return _MODELS[key]


def encoder(name: str | None = None, layer: int | None = None, precision: str = "auto"):
    """The shared BERTScore / embedding encoder (default: the packaged MiniLM)."""
    from ..models.encoder import Encoder

    return _shared(("encoder", name, layer, precision), lambda: Encoder(name, layer=layer, precision=precision))


def nli(name: str | None = None, precision: str = "auto"):
    """The shared NLI model (default: halluscope-nli)."""
    from ..models.nli import load_nli

    kw = {} if precision == "auto" else {"precision": precision}
    return _shared(("nli", name, precision), lambda: load_nli(name, **kw))


def proxy_lm(path: str | None = None):
    """The shared local causal LM of the proxy (grey-box) methods."""
    from ..llm.local import LlamaCppLM

    return _shared(("proxy", path), lambda: LlamaCppLM(path))


def loaded() -> list[tuple]:
    """Keys of the models loaded so far (for tests and the run's settings)."""
    return list(_MODELS)


def clear() -> None:
    """Forget every loaded model (tests that need a fresh cache)."""
    with _LOCK:
        _MODELS.clear()


@dataclass
class Artefacts:
    """A run's options and its access to the shared models. Built by the :class:`~halluscope.pipeline.Detector`;
    a method's build function reads the options it needs (``art.option("nli_evidence")``) and asks for models
    through :meth:`encoder` / :meth:`nli`, so two methods needing the same artefact read the same cache."""

    options: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)  # the models this run used (or was given), by kind

    def option(self, name: str, default: Any = None) -> Any:
        return self.options.get(name, default)

    def _model(self, kind: str, load):
        if kind not in self.models:
            self.models[kind] = load()
        return self.models[kind]

    def encoder(self):
        return self._model("encoder", lambda: encoder(self.option("encoder"), self.option("layer"),
                                                      self.option("precision", "auto")))

    def nli(self):
        return self._model("nli", lambda: nli(self.option("nli"), self.option("nli_precision", "auto")))

    def proxy_lm(self):
        return self._model("proxy", lambda: proxy_lm(self.option("proxy_lm")))

    def llm(self, method: str):
        llm = self.option("llm")
        if llm is None:
            raise ValueError(f"the '{method}' method needs an LLM: pass Detector(llm=Sampler(backend)) or use "
                             "`halluscope check`")
        return llm
