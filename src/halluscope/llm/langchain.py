"""Any LangChain model as an LLM backend: sampling, judges, P(True) and every LLM method, through the one
:class:`~halluscope.llm.base.Backend` interface (and so the cached, rate-limited :class:`~halluscope.llm.Sampler`).

    from langchain_openai import ChatOpenAI
    from halluscope.llm import Sampler
    from halluscope.llm.langchain import LangChainBackend

    sampler = Sampler(LangChainBackend(ChatOpenAI(model="gpt-4o-mini")), cache="gen.sqlite")
    Detector(methods=["p_true", "judge_panel"], llm=sampler).score(records)

- A chat model (``BaseChatModel``) gets the prompt as one human message; a text-completion model (``BaseLLM``,
  e.g. ``langchain_openai.OpenAI``) gets it as it is.
- Temperature, seed, max tokens, stop sequences and log-prob requests travel with each call, bound to that call
  (``model.bind(**kwargs)`` for a chat model, keyword arguments of ``generate`` for a completion model): the shared
  model object is never changed, so concurrent calls with different settings cannot leak into each other (uqlm sets
  ``llm.temperature`` and ``llm.logprobs`` on the user's object). The keyword names are OpenAI's (``temperature``,
  ``max_tokens``, ``seed``, ``stop``, ``logprobs``/``top_logprobs``); a model that names them otherwise takes
  ``kwargs_for=`` (a function of the :class:`~halluscope.llm.base.GenParams`), and ``logprobs=False`` for a model
  that rejects log-prob requests (P(True) then falls back to sampled verdicts).
- Log-probs are read where the model returns them in OpenAI's form (``response_metadata["logprobs"]`` of a chat
  model, ``generation_info["logprobs"]`` of a completion model).
- LangChain is an extra: ``pip install 'halluscope[langchain]'``.
"""

from __future__ import annotations

from typing import Any, Callable

from .base import Backend, Generation, GenParams, LLMError, UnreachableError

MISSING = "LangChain is not installed: pip install 'halluscope[langchain]'"


def _langchain():
    try:
        from langchain_core.language_models import BaseChatModel, BaseLLM
        from langchain_core.messages import HumanMessage
    except ImportError as e:
        raise RuntimeError(MISSING) from e
    return BaseChatModel, BaseLLM, HumanMessage


def default_kwargs(params: GenParams, chat: bool = True, logprobs: bool = True) -> dict[str, Any]:
    """The per-call keyword arguments of a LangChain OpenAI-style model for ``params``."""
    kw: dict[str, Any] = {"temperature": params.temperature, "max_tokens": params.max_tokens}
    if params.seed is not None:
        kw["seed"] = params.seed
    if params.stop:
        kw["stop"] = list(params.stop)
    if params.top_logprobs and logprobs:
        kw.update({"logprobs": True, "top_logprobs": params.top_logprobs} if chat else {"logprobs": params.top_logprobs})
    return kw


def _connection_error(e: Exception) -> bool:
    return any(c.__name__ in ("ModelConnectionError", "APIConnectionError", "ConnectError") for c in type(e).__mro__)


class LangChainBackend(Backend):
    kind = "langchain"

    def __init__(self, model, name: str | None = None, kwargs_for: Callable[[GenParams], dict] | None = None,
                 logprobs: bool = True):
        chat_cls, llm_cls, self._human = _langchain()
        if not isinstance(model, (chat_cls, llm_cls)):
            raise TypeError(f"LangChainBackend needs a LangChain chat or completion model, got {type(model).__name__}")
        self.lc = model
        self.chat = isinstance(model, chat_cls)
        self.model = name or str(getattr(model, "model_name", None) or getattr(model, "model", None)
                                 or type(model).__name__)
        self.kwargs_for = kwargs_for or (lambda p: default_kwargs(p, self.chat, logprobs))
        self._reached = False

    def cache_id(self) -> str:
        """Class, endpoint (when the model has one) and model name; never a key."""
        url = getattr(self.lc, "openai_api_base", None) or getattr(self.lc, "base_url", None) or ""
        return f"{self.kind}:{type(self.lc).__name__}:{url}:{self.model}"

    def complete(self, prompt: str, params: GenParams) -> Generation:
        from .http import tokens_from_logprobs

        kw = self.kwargs_for(params)
        try:
            text, meta, usage = self._chat(prompt, kw) if self.chat else self._completion(prompt, kw)
        except (TypeError, AttributeError):
            raise  # a misuse (a keyword the model does not take): loud, not a missing generation
        except Exception as e:
            if not self._reached and _connection_error(e):
                raise UnreachableError(f"{self.cache_id()}: cannot connect: {e}") from None
            raise LLMError(f"{type(self.lc).__name__}: {type(e).__name__}: {e}") from e
        self._reached = True
        tokens = tokens_from_logprobs(meta.get("logprobs")) if params.top_logprobs else None
        return Generation(text=text, tokens=tokens, prompt_tokens=int(usage.get("input_tokens") or 0),
                          completion_tokens=int(usage.get("output_tokens") or 0), backend=self.kind,
                          model=self.model, finish_reason=meta.get("finish_reason"))

    def _chat(self, prompt: str, kw: dict) -> tuple[str, dict, dict]:
        msg = self.lc.bind(**kw).invoke([self._human(content=prompt)])
        text = msg.content if isinstance(msg.content, str) else msg.text
        text = text() if callable(text) else text  # a method in langchain-core < 1, a property after
        return text, dict(msg.response_metadata or {}), dict(msg.usage_metadata or {})

    def _completion(self, prompt: str, kw: dict) -> tuple[str, dict, dict]:
        stop = kw.pop("stop", None)
        res = self.lc.generate([prompt], stop=stop, **kw)
        gen = res.generations[0][0]
        usage = (res.llm_output or {}).get("token_usage") or {}
        return gen.text, dict(gen.generation_info or {}), {"input_tokens": usage.get("prompt_tokens"),
                                                           "output_tokens": usage.get("completion_tokens")}
