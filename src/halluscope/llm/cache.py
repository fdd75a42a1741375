"""On-disk cache of generations (SQLite): a re-run costs nothing, an interrupted run resumes where it stopped.

The key is a SHA-256 of (backend id, model, prompt, parameters, sample index): the sample index keeps N samples of
the same prompt apart even when the backend ignores seeds. Values are the generation as JSON (text, tokens and
log-probs, token counts, cost). API keys never reach the cache: backends identify themselves by kind, model and
base URL only.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from .base import Generation, GenParams


def default_cache_path() -> Path:
    """Where generations are cached unless ``--cache`` says otherwise: ``$HALLUSCOPE_CACHE``, else
    ``generations.sqlite`` in the user's cache directory (:func:`halluscope.userdirs.user_cache_dir`), never the
    working directory."""
    import os

    from ..userdirs import user_cache_dir

    if os.environ.get("HALLUSCOPE_CACHE"):
        return Path(os.environ["HALLUSCOPE_CACHE"]).expanduser()
    return user_cache_dir() / "generations.sqlite"


def cache_key(backend_id: str, prompt: str, params: GenParams, index: int) -> str:
    payload = json.dumps([backend_id, prompt, params.to_dict(), index], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class GenerationCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, backend TEXT, prompt TEXT, "
            "params TEXT, idx INTEGER, value TEXT, created REAL)"
        )
        self._db.commit()
        self.hits = 0
        self.misses = 0

    def get(self, backend_id: str, prompt: str, params: GenParams, index: int) -> Generation | None:
        key = cache_key(backend_id, prompt, params, index)
        with self._lock:
            row = self._db.execute("SELECT value FROM generations WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        g = Generation.from_dict(json.loads(row[0]))
        g.cached = True
        return g

    def put(self, backend_id: str, prompt: str, params: GenParams, index: int, gen: Generation) -> None:
        key = cache_key(backend_id, prompt, params, index)
        value = json.dumps(gen.to_dict(), ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO generations VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key, backend_id, prompt, json.dumps(params.to_dict()), index, value, time.time()),
            )
            self._db.commit()  # each generation is durable at once: an interrupted run loses nothing

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM generations").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
