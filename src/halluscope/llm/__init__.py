"""LLM backends (one interface), the on-disk generation cache, and the sampler that draws responses and samples."""

from .base import Backend, Generation, GenParams, LLMError, TokenLogprob
from .cache import GenerationCache
from .sampler import Draw, RateLimiter, Sampler

__all__ = ["Backend", "Generation", "GenParams", "LLMError", "TokenLogprob", "GenerationCache", "Draw",
           "RateLimiter", "Sampler", "make_backend", "OpenAIBackend", "LlamaCppBackend", "TransformersBackend"]

_BACKENDS = {"OpenAIBackend": "http", "LlamaCppBackend": "local", "TransformersBackend": "local"}


def __getattr__(name: str):
    """The three backends, imported when first asked for (``from halluscope.llm import OpenAIBackend``), so that
    importing this package loads neither httpx's client nor llama.cpp."""
    if name in _BACKENDS:
        import importlib

        return getattr(importlib.import_module(f".{_BACKENDS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

DEFAULT_TEMPLATE_COMPLETIONS = "Question: {prompt}\nAnswer:"


def env_number(var: str, kind=float, low: float = 0.0):
    """The number an environment variable holds (``kind``: float or int, at least ``low``), or None where it is
    unset or empty; anything else is a ValueError naming it."""
    import os

    raw = os.environ.get(var, "").strip()
    if not raw:
        return None
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"${var}={raw!r}: not a{'' if kind is float else ' whole'} number") from None
    if value < low:
        raise ValueError(f"${var}={raw!r}: must be at least {low:g}")
    return value


def make_backend(model: str | None = None, base_url: str | None = None, chat: bool = False,
                 api_key_env: str = "OPENAI_API_KEY", kind: str | None = None, **kw) -> Backend:
    """A backend from user settings: ``base_url`` (or ``$HALLUSCOPE_BASE_URL``) selects the OpenAI-compatible
    HTTP client (its timeout and retries from ``$HALLUSCOPE_TIMEOUT``, in seconds, and ``$HALLUSCOPE_MAX_RETRIES``
    where ``kw`` does not set them); ``kind="transformers"`` a transformers model by id/path; otherwise a local GGUF
    (``model`` path, or the packaged ``gemma``)."""
    import os

    base_url = base_url or os.environ.get("HALLUSCOPE_BASE_URL")
    model = model or os.environ.get("HALLUSCOPE_MODEL")
    if base_url:
        from .http import OpenAIBackend

        for key, var, kind, low in (("timeout", "HALLUSCOPE_TIMEOUT", float, 0.1),
                                    ("max_retries", "HALLUSCOPE_MAX_RETRIES", int, 0)):
            if key not in kw and (value := env_number(var, kind, low)) is not None:
                kw[key] = value
        return OpenAIBackend(model or "default", base_url=base_url, mode="chat" if chat else "completions",
                             api_key_env=api_key_env, **kw)
    if kind == "transformers":
        from .local import TransformersBackend

        if not model:
            raise ValueError("the transformers backend needs --model (a Hugging Face id or a local path)")
        return TransformersBackend(model)
    from .local import LlamaCppBackend

    return LlamaCppBackend(model)
