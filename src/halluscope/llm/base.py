"""The LLM interface every backend implements, and the records it returns.

A backend turns (prompt, parameters) into a :class:`Generation`. Parameters travel with each call (a frozen
:class:`GenParams`): temperature, seed and max tokens are never set on a shared client, so concurrent calls with
different settings cannot leak into each other.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class GenParams:
    temperature: float = 1.0
    max_tokens: int = 128
    seed: int | None = None
    top_logprobs: int = 0  # 0: no log-probs; k > 0: each token's log-prob and the k most likely alternatives
    stop: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


@dataclass
class TokenLogprob:
    """One generated token: its text, log-prob, character offset in the generated text, and the top-k
    alternatives (token -> log-prob) when the backend returned them."""

    token: str
    logprob: float
    offset: int
    top: dict[str, float] | None = None
    full_entropy: float | None = None  # over the whole vocabulary, when a local model computed it
    vocab_size: int = 0

    def entropy(self) -> tuple[float | None, int]:
        """Entropy (nats) of the next-token distribution, and the number of tokens it is over: the full
        vocabulary when known, else the returned top-k renormalized."""
        if self.full_entropy is not None:
            return self.full_entropy, self.vocab_size
        if not self.top:
            return None, 0
        lp = [v for v in self.top.values() if v is not None and math.isfinite(v)]
        if not lp:
            return None, 0
        m = max(lp)
        z = sum(math.exp(v - m) for v in lp)
        ps = [math.exp(v - m) / z for v in lp]
        return -sum(p * math.log(p) for p in ps if p > 0), len(lp)


@dataclass
class Generation:
    text: str
    tokens: list[TokenLogprob] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    finish_reason: str | None = None
    backend: str = ""
    model: str = ""
    cached: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("cached")
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Generation":
        d = dict(d)
        toks = d.pop("tokens", None)
        d.pop("cached", None)
        g = cls(**d)
        g.tokens = [TokenLogprob(**t) for t in toks] if toks is not None else None
        return g


class LLMError(RuntimeError):
    """A generation that failed for good (after the bounded retries), or a bad answer from the server.
    ``refused``: the server said no to every request of this run (401, 403, 404: a refused key, an unknown model),
    which no retry or later request would change; a 400 (a prompt too long) is one request's."""

    def __init__(self, *args, refused: bool = False):
        super().__init__(*args)
        self.refused = refused


def unless_all_failed(results: list) -> list:
    """``results`` of a batch of generations, as they are where some succeeded (a failed one is then missing, never
    guessed); where every one failed (a refused key, a model the server does not have, a server that fails every
    request), the first failure is raised: that is the run's configuration, not a missing judgement. A batch of one
    request that failed after its retries is a missing judgement, unless the server refused it."""
    if results and all(isinstance(r, LLMError) for r in results) and (len(results) > 1 or results[0].refused):
        raise results[0]
    return results


class UnreachableError(LLMError):
    """The server never answered (connection refused, unknown host): retrying every request would only cost time,
    so the run stops at once with this one message."""


class Backend(ABC):
    """An LLM. ``complete`` must be safe to call from several threads (backends that are not serialize inside)."""

    kind: str = "llm"
    model: str = ""

    @abstractmethod
    def complete(self, prompt: str, params: GenParams) -> Generation: ...

    def cache_id(self) -> str:
        """What identifies this backend's outputs in the cache (never a secret)."""
        return f"{self.kind}:{self.model}"

    def close(self) -> None:  # pragma: no cover - default no-op
        pass
