"""API keys with scopes, stored hashed, and per-key rate limits.

A key is ``hs_`` + 32 random URL-safe bytes; only its SHA-256 is stored (a random 256-bit secret needs no slow
hash), with an 8-character prefix to tell keys apart in listings. Scopes: ``submit`` (check and jobs, read results),
``review`` (read results, write reviews), ``admin`` (everything, keys, reload, metrics). A request carries its key as
``Authorization: Bearer <key>`` or ``X-API-Key: <key>``; keys are never logged or stored in clear.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from dataclasses import dataclass

import sqlalchemy as sa

from .db import api_keys, iso, now, write_lock

log = logging.getLogger("halluscope.serve")

SCOPES = ("submit", "review", "admin", "metrics")  # metrics: /metrics only (a scraper's key)


@dataclass(frozen=True)
class Principal:
    """Who made a request: the key's name and scopes (``admin`` implies every scope)."""

    name: str
    scopes: frozenset[str]

    def allows(self, scope: str) -> bool:
        return "admin" in self.scopes or scope in self.scopes


ANONYMOUS_ADMIN = Principal("local (no auth)", frozenset({"admin"}))


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyConflict(ValueError):
    """A key change that would leave the keys ambiguous or the service without an admin (HTTP 409)."""


def create_key(engine: sa.Engine, name: str, scopes: list[str] | tuple[str, ...]) -> dict:
    """A new key with ``scopes``, stored hashed: ``{"id", "name", "scopes", "key"}``, the key in clear this once.
    Names of active keys are unique (reviews are signed with the name); the check and the insert hold the write
    lock, so two servers or admins at once cannot both pass it."""
    bad = [s for s in scopes if s not in SCOPES]
    if bad or not scopes:
        raise ValueError(f"scopes must be among {', '.join(SCOPES)}; got {list(scopes)}")
    key = "hs_" + secrets.token_urlsafe(32)
    with engine.begin() as c:
        write_lock(c)
        same = c.execute(sa.select(api_keys.c.id).where(api_keys.c.name == name,
                                                        api_keys.c.revoked_at.is_(None))).scalar()
        if same is not None:
            raise KeyConflict(f"an active key is named {name!r} already (id {same}): choose another name, or revoke "
                              "that one first")
        kid = c.execute(api_keys.insert().values(name=name, prefix=key[3:11], key_hash=_hash(key),
                                                 scopes=",".join(sorted(set(scopes))), created_at=now())
                        ).inserted_primary_key[0]
    log.info("API key %r created (id %s, prefix %s, scopes %s)", name, kid, key[3:11], ",".join(sorted(set(scopes))))
    return {"id": kid, "name": name, "scopes": sorted(set(scopes)), "key": key}


def list_keys(engine: sa.Engine) -> list[dict]:
    with engine.connect() as c:
        rows = c.execute(sa.select(api_keys).order_by(api_keys.c.id)).mappings().all()
    return [{"id": r["id"], "name": r["name"], "prefix": r["prefix"], "scopes": r["scopes"].split(","),
             "created_at": iso(r["created_at"]), "revoked": r["revoked_at"] is not None} for r in rows]


def revoke_key(engine: sa.Engine, key_id: int) -> bool:
    """Revoke an active key (False where there is none); the last active admin key is refused (the service would
    have no admin left: only `halluscope keys create` on the database's host could make one)."""
    with engine.begin() as c:
        write_lock(c)
        admins = c.execute(sa.select(api_keys.c.id).where(api_keys.c.revoked_at.is_(None),
                                                          api_keys.c.scopes.contains("admin"))).scalars().all()
        if admins == [key_id]:
            raise KeyConflict(f"key {key_id} is the last active admin key: create another admin key first")
        n = c.execute(api_keys.update().where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
                      .values(revoked_at=now())).rowcount
    if n:
        log.info("API key %d revoked", key_id)
    return n > 0


def has_keys(engine: sa.Engine) -> bool:
    with engine.connect() as c:
        return c.execute(sa.select(sa.func.count()).select_from(api_keys)).scalar_one() > 0


def ensure_admin_key(engine: sa.Engine) -> str | None:
    """On first start (no key at all), create an admin key and return it (to be shown once); else None."""
    if has_keys(engine):
        return None
    try:
        return create_key(engine, "admin (first start)", ["admin"])["key"]
    except KeyConflict:  # another server on the same database made it a moment ago
        return None


class KeyStore:
    """Looks keys up by hash, with a short in-process cache so a busy client does not hit the database each time."""

    def __init__(self, engine: sa.Engine, ttl: float = 30.0):
        self.engine, self.ttl = engine, ttl
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._lock = threading.Lock()

    def lookup(self, key: str) -> Principal | None:
        h = _hash(key)
        t = time.monotonic()
        with self._lock:
            hit = self._cache.get(h)
            if hit and t - hit[0] < self.ttl:
                return hit[1]
        with self.engine.connect() as c:
            row = c.execute(sa.select(api_keys.c.name, api_keys.c.scopes).where(
                api_keys.c.key_hash == h, api_keys.c.revoked_at.is_(None))).first()
        p = Principal(row.name, frozenset(row.scopes.split(","))) if row else None
        with self._lock:
            self._cache[h] = (t, p)
        return p

    def forget(self) -> None:
        with self._lock:
            self._cache.clear()


class RateLimiter:
    """A token bucket per key: ``per_minute`` requests a minute with bursts up to ``burst``. ``take`` returns 0 when
    the request may go, else the seconds to wait (the Retry-After of a 429)."""

    def __init__(self, per_minute: float, burst: int | None = None, clock=time.monotonic):
        self.rate = per_minute / 60.0
        self.burst = float(burst or max(1, int(per_minute)))
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, who: str) -> float:
        if self.rate <= 0:
            return 0.0
        t = self.clock()
        with self._lock:
            tokens, last = self._buckets.get(who, (self.burst, t))
            tokens = min(self.burst, tokens + (t - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[who] = (tokens - 1.0, t)
                return 0.0
            self._buckets[who] = (tokens, t)
            return (1.0 - tokens) / self.rate
