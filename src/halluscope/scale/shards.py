"""Input shards and token-sized batches for batch scoring on Ray (plain Python: nothing here imports Ray).

A **shard** is the unit of resumable work: one input file (JSONL, JSON, CSV or Parquet), or one slice of an
in-memory list of records. Each shard is cut into **batches** by approximate token count (the words of the
response and of the samples), and every batch edge falls on an edge of the detector's chunks (``chunk_size`` valid
records, in input order). A record is therefore scored in the same company as when one process scores the same
input, so its scores are the same to the last bit, not merely close: the encoder pads each batch of texts to its
longest, and a different company changes fp32 sums by about 1e-7 and bf16 ones by about 1e-3. The exception is a
text shared by records of different chunks, which one process encodes once and reuses (``scale.actor``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..io import file_names, id_prefix, input_files, read_records, records_from_objects
from ..types import Record, RecordError


@dataclass(frozen=True)
class Shard:
    """One unit of resumable work. ``key`` names its output parts and its manifest entry (stable across runs);
    ``source`` is the file path, or a description of a slice of records; ``records`` holds the records of an
    in-memory slice as JSON (empty for a file, which is read where the shard is split)."""

    key: str
    source: str
    records: str = ""
    stamp: str = ""  # a file's size and modification time when the run planned it: a changed file is scored again
    id_prefix: str = ""  # before the position of a record with no id: "FILE:" in a folder or glob (io.id_prefix)


KEY_DIGEST = 10  # hex digits of a shard key's hash (scale.output reads part names by it)


def digest(text: str, n: int = KEY_DIGEST) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:n]


def shard_key(name: str, identity: str) -> str:
    """A stable key: the name reduced to ``[A-Za-z0-9_]`` (at most 40 characters) and a hash of ``identity``.
    A key holds exactly one '-', so the part files of one shard (``part-KEY-bNNNNN``) never match another's."""
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")[:40] or "shard"
    return f"{stem}-{digest(identity)}"


def file_shards(source: str | Path) -> list[Shard]:
    """One shard per input file, keyed by the file's name and its absolute path, stamped with its size and
    modification time (a file that grows after its shard finished is scored again on resume). A record with no id
    is named as ``score --engine local`` names it (:func:`halluscope.io.id_prefix`)."""
    files = input_files(source)
    names = file_names(files, source)
    return [Shard(shard_key(f.stem, str(f)), str(f), stamp=file_stamp(f), id_prefix=id_prefix(names[f]))
            for f in files]


def file_stamp(f: Path) -> str:
    st = f.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def record_shards(records: Iterable[Any], chunk_size: int, shard_records: int
                  ) -> tuple[list[Shard], list[RecordError]]:
    """Shards of an in-memory list. The records are validated here, all together, so ids and chunk edges are
    those of one process scoring the whole list; each shard holds a whole number of chunks."""
    valid, errors = records_from_objects(list(records))
    size = max(1, math.ceil(shard_records / chunk_size)) * chunk_size
    shards = []
    for start in range(0, len(valid), size):
        part = valid[start : start + size]
        body = json.dumps([record_dict(r) for r in part])
        key = shard_key(f"records{start // size:05d}", "\n".join(r.id for r in part))
        shards.append(Shard(key, f"records[{start}:{start + len(part)}]", body))
    return shards, errors


def record_dict(r: Record) -> dict:
    """A record as a JSON-safe dict that :meth:`Record.from_dict` reads back the same (extra fields kept)."""
    d = {k: v for k, v in r.meta.items() if _json_ok(v)}
    d.update(r.to_dict())
    return d


def _json_ok(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def read_shard(shard: Shard) -> tuple[list[Record], list[RecordError]]:
    """The valid records of a shard and the errors of the others (as ``halluscope score`` reads the file)."""
    if shard.records:
        return records_from_objects(json.loads(shard.records))
    return read_records(Path(shard.source), id_prefix=shard.id_prefix)


def approx_tokens(r: Record) -> int:
    """Approximate tokens of a record: words of the response and of every sample (what the models read)."""
    return len(r.response.split()) + sum(len(s.split()) for s in r.samples)


def plan_batches(records: Sequence[Record], chunk_size: int, batch_tokens: int) -> list[list[Record]]:
    """Consecutive chunks of ``chunk_size`` records grouped into batches of at most ``batch_tokens`` approximate
    tokens (a chunk larger than that is a batch of its own)."""
    batches: list[list[Record]] = []
    current: list[Record] = []
    tokens = 0
    for start in range(0, len(records), chunk_size):
        chunk = list(records[start : start + chunk_size])
        t = sum(approx_tokens(r) for r in chunk)
        if current and tokens + t > batch_tokens:
            batches.append(current)
            current, tokens = [], 0
        current += chunk
        tokens += t
    if current:
        batches.append(current)
    return batches


def split_shard(row: dict, chunk_size: int, batch_tokens: int) -> list[dict]:
    """Ray Data ``flat_map`` function: one shard row in, one row per token batch out. The shard's record errors
    ride on its first batch; a file that cannot be read at all gives one empty batch with ``failed`` set, so the
    shard is not recorded as finished and a re-run tries it again."""
    shard = Shard(row["shard"], row["source"], row.get("records") or "", id_prefix=row.get("id_prefix") or "")
    failed = False
    try:
        records, errors = read_shard(shard)
    except (RecordError, OSError) as e:
        err = e if isinstance(e, RecordError) else RecordError(shard.source, "<file>", str(e))
        records, errors, failed = [], [err], True
    batches = plan_batches(records, chunk_size, batch_tokens) or [[]]
    errs = json.dumps([e.to_dict() for e in errors])
    return [{"shard": shard.key, "batch": i, "n_batches": len(batches), "failed": failed,
             "records": json.dumps([record_dict(r) for r in b]), "errors": errs if i == 0 else "[]"}
            for i, b in enumerate(batches)]
