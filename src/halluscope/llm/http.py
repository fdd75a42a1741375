"""OpenAI-compatible HTTP backend: OpenAI, vLLM, Ollama, the llama.cpp server, LiteLLM proxies.

- ``/v1/completions`` (default; base models, log-probs in the legacy ``logprobs`` form) or ``/v1/chat/completions``
  (``mode="chat"``; log-probs in the ``logprobs.content`` form).
- Parameters are sent per request; the shared ``httpx.Client`` holds only the connection pool and headers.
- Retries (tenacity): on HTTP 429 and 5xx, timeouts, connection errors, and bodies that are truncated or not the
  JSON expected; exponential backoff with jitter, or the server's ``Retry-After`` when it sends one; bounded by
  ``max_retries``. Any other 4xx fails at once (a retry would not help).
- The API key comes from an environment variable (``OPENAI_API_KEY`` by default) and is only ever put in the
  ``Authorization`` header: not in logs, results, errors or the cache (whose id is kind, base URL and model).
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
import warnings
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from .base import Backend, Generation, GenParams, LLMError, TokenLogprob, UnreachableError


class RetryableError(LLMError):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(resp: httpx.Response) -> float | None:
    v = resp.headers.get("retry-after")
    if not v:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(v).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


_SECRET = re.compile(r"(Bearer\s+|\bsk-)[\w.\-]{4,}")  # a token in an error text: kept out of results


class OpenAIBackend(Backend):
    kind = "openai-http"

    def __init__(
        self,
        model: str,
        base_url: str = "https://api.openai.com/v1",
        api_key_env: str = "OPENAI_API_KEY",
        mode: str = "completions",
        timeout: float = 60.0,
        max_retries: int = 6,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        prices: tuple[float, float] | None = None,
    ):
        if mode not in ("completions", "chat"):
            raise ValueError("mode must be 'completions' or 'chat'")
        if not base_url.lower().startswith(("http://", "https://")):  # else httpx's error, retried for minutes
            raise ValueError(f"base URL {base_url!r}: give its scheme, e.g. http://{base_url.rstrip('/')}/v1")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.mode = mode
        self.max_retries = max_retries
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.prices = prices  # (input, output) in currency per 1M tokens, when known
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(api_key_env) if api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        # what a refusal (401, 403) says of the key: never the key itself
        self._key = key  # only to take it out of a server's error text (_redact)
        self._key_note = (f"the key in ${api_key_env} was refused" if key else
                          f"no key was sent: ${api_key_env} is not set" if api_key_env else "no key was sent")
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)
        self.retries = 0  # how many retries this backend made (for tests and reports)
        self._count_lock = threading.Lock()
        self._reached = False  # has the server answered once? Before that, a refused connection is not retried

    def _redact(self, text: str) -> str:
        """A server's error text without the key: a server may echo what it was sent ("Incorrect API key provided:
        Bearer sk-..."), and the text goes into results and onto the terminal."""
        if self._key:
            text = text.replace(self._key, "***")
        return _SECRET.sub(lambda m: m[1] + "***", text)

    def cache_id(self) -> str:
        return f"{self.kind}:{self.base_url}:{self.model}:{self.mode}"

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ one request, with bounded retries
    def complete(self, prompt: str, params: GenParams) -> Generation:
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type((RetryableError, httpx.TimeoutException, httpx.TransportError)),
            reraise=True,
            before_sleep=self._count,
        )
        try:
            for attempt in retrying:
                with attempt:
                    try:
                        gen = self._once(prompt, params)
                    except httpx.ConnectError as e:
                        if not self._reached:
                            raise UnreachableError(f"cannot connect to {self.base_url}: {e} (is the server running, "
                                                   "and is the URL right?)") from None
                        raise
                    return gen
        except httpx.ConnectError as e:  # it answered before, refuses now: gone, for this request and every other
            raise UnreachableError(f"{self.base_url} stopped answering: gave up after {self.max_retries + 1} "
                                   f"attempts: {e}") from e
        except (RetryableError, httpx.TimeoutException, httpx.TransportError) as e:
            raise LLMError(f"{self.base_url}: gave up after {self.max_retries + 1} attempts: {e}") from e
        raise LLMError("unreachable")  # pragma: no cover

    def _count(self, state: RetryCallState) -> None:
        with self._count_lock:  # requests retry on several threads at once
            self.retries += 1
            first = self.retries == 1
        if first:  # said once, so a slow or failing server is not minutes of silence
            exc = state.outcome.exception() if state.outcome else None
            what = (f"no answer in {self._client.timeout.read:g} s" if isinstance(exc, httpx.TimeoutException)
                    else str(exc) or type(exc).__name__)
            warnings.warn(f"{self.base_url}: {what}; retrying (up to {self.max_retries + 1} attempts a request; "
                          "HALLUSCOPE_TIMEOUT and HALLUSCOPE_MAX_RETRIES set them)", stacklevel=2)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        ra = getattr(exc, "retry_after", None)
        if ra is not None:
            return min(ra, self.backoff_max)
        base = min(self.backoff_max, self.backoff_initial * 2 ** (state.attempt_number - 1))
        return random.uniform(0, base)  # full jitter

    def _payload(self, prompt: str, params: GenParams) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "temperature": params.temperature, "max_tokens": params.max_tokens}
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        if self.mode == "completions":
            body["prompt"] = prompt
            if params.top_logprobs:
                body["logprobs"] = params.top_logprobs
        else:
            body["messages"] = [{"role": "user", "content": prompt}]
            if params.top_logprobs:
                body["logprobs"] = True
                body["top_logprobs"] = params.top_logprobs
        return body

    def _once(self, prompt: str, params: GenParams) -> Generation:
        path = "/completions" if self.mode == "completions" else "/chat/completions"
        resp = self._client.post(path, json=self._payload(prompt, params))
        self._reached = True
        if resp.status_code == 429 or resp.status_code >= 500:
            raise RetryableError(f"HTTP {resp.status_code}", _retry_after(resp))
        if resp.status_code >= 400:
            note = f" ({self._key_note})" if resp.status_code in (401, 403) else ""
            raise LLMError(f"HTTP {resp.status_code} from {self.base_url}{path}{note}: {self._redact(resp.text[:300])}",
                           refused=resp.status_code in (401, 403, 404))  # the key or the model; a 400 is the request's
        try:
            data = resp.json()
            choice = data["choices"][0]
            text = choice["text"] if self.mode == "completions" else choice["message"]["content"]
            if not isinstance(text, str):
                raise TypeError("text is not a string")
        except (json.JSONDecodeError, KeyError, IndexError, TypeError, ValueError) as e:
            raise RetryableError(f"malformed response body ({type(e).__name__}): {resp.text[:120]!r}")
        usage = data.get("usage") or {}
        pt, ct = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        cost = None
        if self.prices:
            cost = (pt * self.prices[0] + ct * self.prices[1]) / 1e6
        tokens = self._tokens(choice) if params.top_logprobs else None
        return Generation(text=text, tokens=tokens, prompt_tokens=pt, completion_tokens=ct, cost=cost,
                          finish_reason=choice.get("finish_reason"), backend=self.kind, model=self.model)

    def _tokens(self, choice: dict) -> list[TokenLogprob] | None:
        return tokens_from_logprobs(choice.get("logprobs"))


def tokens_from_logprobs(lp: dict | None) -> list[TokenLogprob] | None:
    """Tokens of an OpenAI-style ``logprobs`` object: the chat form (``content``: token, logprob, top_logprobs) or
    the legacy completions form (``tokens``, ``token_logprobs``, ``top_logprobs``, ``text_offset``); None when the
    server sent none. Shared by every backend that speaks this format (HTTP, LangChain)."""
    if not lp:
        return None
    out: list[TokenLogprob] = []
    if "content" in lp and lp["content"] is not None:  # chat form
        offset = 0
        for t in lp["content"]:
            top = {x["token"]: float(x["logprob"]) for x in t.get("top_logprobs") or []}
            out.append(TokenLogprob(t["token"], float(t["logprob"]), offset, top or None))
            offset += len(t["token"])
        return out
    toks, lps = lp.get("tokens") or [], lp.get("token_logprobs") or []
    tops, offs = lp.get("top_logprobs") or [None] * len(toks), lp.get("text_offset")
    base = offs[0] if offs else 0
    offset = 0
    for i, (t, l) in enumerate(zip(toks, lps)):
        o = offs[i] - base if offs else offset
        top = tops[i] if i < len(tops) else None
        out.append(TokenLogprob(t, float(l) if l is not None else float("nan"), int(o),
                                {k: float(v) for k, v in top.items()} if top else None))
        offset += len(t)
    return out
