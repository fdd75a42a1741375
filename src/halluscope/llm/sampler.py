"""Drawing the main response and N samples for a prompt, many prompts at once, robustly.

- The main response at temperature 0, sample i at temperature 1.0 (configurable) with seed ``seed + i``.
- Bounded concurrency (a thread pool of ``concurrency`` workers), optional requests-per-minute and
  tokens-per-minute limits (a sliding one-minute window, shared by the workers).
- Every generation goes through the on-disk cache first: a re-run costs nothing, and an interrupted run finds what
  it already drew. A generation that fails after the backend's bounded retries is reported, never guessed.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from .base import Backend, Generation, GenParams, LLMError, UnreachableError, unless_all_failed
from .cache import GenerationCache


class RateLimiter:
    """At most ``rpm`` requests and ``tpm`` tokens in any 60-second window (either may be None)."""

    def __init__(self, rpm: float | None = None, tpm: float | None = None, clock=time.monotonic, sleep=time.sleep):
        self.rpm, self.tpm = rpm, tpm
        self._req: deque[float] = deque()
        self._tok: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep

    def acquire(self, tokens: int = 0) -> None:
        if not self.rpm and not self.tpm:
            return
        while True:
            with self._lock:
                now = self._clock()
                while self._req and now - self._req[0] >= 60:
                    self._req.popleft()
                while self._tok and now - self._tok[0][0] >= 60:
                    self._tok.popleft()
                wait = 0.0
                if self.rpm and len(self._req) >= self.rpm:
                    wait = max(wait, 60 - (now - self._req[0]))
                used = sum(t for _, t in self._tok)
                if self.tpm and self._tok and used + tokens > self.tpm:
                    wait = max(wait, 60 - (now - self._tok[0][0]))
                if wait <= 0:
                    self._req.append(now)
                    if tokens:
                        self._tok.append((now, tokens))
                    return
            self._sleep(min(wait, 1.0))


@dataclass
class Draw:
    """The main response and the samples for one prompt."""

    prompt: str
    main: Generation | None
    samples: list[Generation | None]
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.main is not None and all(s is not None for s in self.samples)

    def to_record(self, index: int | str, prompt: str, backend_id: str = ""):
        """The record to score: the main response, its token log-probs (offsets relative to the stripped text), and
        the samples with content (an empty sample, or one of punctuation alone, says nothing: left out, and ``meta``
        counts it). Raises :class:`~halluscope.types.RecordError` naming the field at fault."""
        from ..types import Record, RecordError, has_content

        if not self.ok:
            raise RecordError(str(index), "samples", "; ".join(self.errors))
        text = self.main.text
        lead = len(text) - len(text.lstrip())
        toks = [dict(vars(t), offset=t.offset - lead) for t in (self.main.tokens or [])]
        samples = [s.text.strip() for s in self.samples]
        used = [x for x in samples if has_content(x)]
        rec = Record.from_dict({"id": str(index), "prompt": prompt, "response": text.strip(), "samples": used}, index)
        rec.meta = {"tokens": toks, "usage": self.usage(), "backend": backend_id, "samples_used": len(used),
                    "samples_empty": len(samples) - len(used)}
        return rec

    def usage(self) -> dict:
        gens = [g for g in [self.main, *self.samples] if g is not None]
        costs = [g.cost for g in gens if g.cost is not None]
        return {
            "prompt_tokens": sum(g.prompt_tokens for g in gens),
            "completion_tokens": sum(g.completion_tokens for g in gens),
            "cost": sum(costs) if costs else None,
            "cached": sum(g.cached for g in gens),
        }


class Sampler:
    def __init__(
        self,
        backend: Backend,
        cache: GenerationCache | str | None = None,
        concurrency: int = 4,
        rpm: float | None = None,
        tpm: float | None = None,
    ):
        self.backend = backend
        self.cache = GenerationCache(cache) if isinstance(cache, str) or hasattr(cache, "__fspath__") else cache
        self.concurrency = max(1, int(concurrency))
        self.limiter = RateLimiter(rpm, tpm)
        # every generation asked of this sampler: new ones (their tokens: the cost) and those from the cache
        self.usage = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached_generations": 0}
        self._usage_lock = threading.Lock()

    def generate(self, prompt: str, params: GenParams, index: int = 0) -> Generation:
        bid = self.backend.cache_id()
        if self.cache is not None:
            hit = self.cache.get(bid, prompt, params, index)
            if hit is not None:
                with self._usage_lock:
                    self.usage["cached_generations"] += 1
                return hit
        self.limiter.acquire(params.max_tokens)
        gen = self.backend.complete(prompt, params)
        with self._usage_lock:
            self.usage["requests"] += 1
            self.usage["prompt_tokens"] += gen.prompt_tokens or 0
            self.usage["completion_tokens"] += gen.completion_tokens or 0
        if self.cache is not None:
            self.cache.put(bid, prompt, params, index, gen)
        return gen

    def run(self, jobs: list[tuple[str, GenParams, int]], progress: Callable[[int], None] | None = None):
        """Generate every (prompt, params, index) job; returns one Generation or LLMError per job, in order. A server
        that never answers raises :class:`UnreachableError` at once (one message, no retries of every job)."""
        out: list[Generation | LLMError | None] = [None] * len(jobs)
        unreachable: list[UnreachableError] = []

        def one(k: int):
            if unreachable:  # the server never answered: the other jobs would fail the same way
                return
            p, params, idx = jobs[k]
            try:
                out[k] = self.generate(p, params, idx)
            except UnreachableError as e:
                unreachable.append(e)
            except LLMError as e:
                out[k] = e
            if progress:
                progress(1)

        if self.concurrency == 1:
            for k in range(len(jobs)):
                one(k)
        else:
            with ThreadPoolExecutor(self.concurrency) as ex:
                list(ex.map(one, range(len(jobs))))
        if unreachable:
            raise unreachable[0]
        return out

    def draw(
        self,
        prompts: list[str],
        n: int = 20,
        temperature: float = 1.0,
        max_tokens: int = 128,
        seed: int = 0,
        top_logprobs: int = 0,
        stop: tuple[str, ...] = (),
        progress: Callable[[int], None] | None = None,
    ) -> list[Draw]:
        """The main response (temperature 0) and ``n`` samples for each prompt; where every generation failed (a
        refused key, a model the server does not have), the first failure is raised."""
        jobs = []
        for p in prompts:
            jobs.append((p, GenParams(0.0, max_tokens, seed, top_logprobs, stop), 0))
            for i in range(1, n + 1):
                jobs.append((p, GenParams(temperature, max_tokens, seed + i, 0, stop), i))
        res = unless_all_failed(self.run(jobs, progress))
        draws = []
        for k, p in enumerate(prompts):
            chunk = res[k * (n + 1) : (k + 1) * (n + 1)]
            errors = [f"{'main' if i == 0 else f'sample {i}'}: {g}" for i, g in enumerate(chunk) if isinstance(g, LLMError)]
            gens = [g if isinstance(g, Generation) else None for g in chunk]
            draws.append(Draw(p, gens[0], gens[1:], errors))
        return draws


def records_from_draws(prompts: list[str], draws: list[Draw], backend_id: str = "", ids: list[str] | None = None):
    """Records of the draws that can be scored, and a :class:`~halluscope.types.RecordError` for each other; a
    record's id is ``ids[i]`` where given, else its position."""
    from ..types import RecordError

    records, errors = [], []
    for i, (p, d) in enumerate(zip(prompts, draws)):
        try:
            records.append(d.to_record(ids[i] if ids else i, p, backend_id))
        except RecordError as e:
            errors.append(e)
    return records, errors


def usage_summary(records, results=None) -> dict:
    """Token counts and cache hits of the records' draws; with ``results`` (of those records), each item's usage is
    kept with it (``evidence['usage']``)."""
    usage = [r.meta["usage"] for r in records]
    for r, it in zip(records, results.items if results is not None else []):
        it.evidence["usage"] = [r.meta["usage"]]
    return {"prompt_tokens": sum(u["prompt_tokens"] for u in usage),
            "completion_tokens": sum(u["completion_tokens"] for u in usage),
            "cached_generations": sum(u["cached"] for u in usage)}
