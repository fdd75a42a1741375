"""The output folder of a Ray batch run: Parquet part files, the manifest of finished shards, reading back.

    OUT/manifest.json                   finished shards (written atomically after each one), methods, options
    OUT/sentences/part-KEY-bNNNNN.parquet   one row per sentence (the columns of ``Results.to_df("sentence")``)
    OUT/responses/part-KEY-bNNNNN.parquet   one row per response (the columns of ``Results.to_df("passage")``)
    OUT/errors/part-KEY-bNNNNN.jsonl        records that could not be scored (record, field, message)

Every file is named from its shard and batch and written by atomic rename, so a batch that Ray runs twice (a worker
killed, its batch retried) replaces its file rather than adding a second one, and a reader never sees half a file.
Nothing here imports Ray.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..io import write_atomic  # the one atomic writer (finish.py and ray_batch.py call output.write_atomic)

LEVELS = {"sentence": "sentences", "passage": "responses"}
MANIFEST = "manifest.json"


def part_name(shard: str, batch: int) -> str:
    return f"part-{shard}-b{batch:05d}"


def write_batch(out: Path, row: dict) -> None:
    """The files of one scored batch (a row returned by the scoring actors)."""
    name = part_name(row["shard"], int(row["batch"]))
    for level, folder in LEVELS.items():
        data = row[level]
        if data:
            write_atomic(out / folder / f"{name}.parquet", data)
    errors = json.loads(row["errors"])
    if errors:
        write_atomic(out / "errors" / f"{name}.jsonl", "".join(json.dumps(e) + "\n" for e in errors).encode())


def remove_parts(out: Path, shard: str) -> int:
    """Delete the files of an unfinished shard before it is scored again (its batches may be cut differently
    this time); returns how many were removed."""
    n = 0
    for folder in (*LEVELS.values(), "errors"):
        for f in (out / folder).glob(f"part-{shard}-b*"):
            f.unlink()
            n += 1
    return n


def clear(out: Path) -> None:
    """Remove the manifest and every part file of a previous run (a run with ``resume=False``)."""
    for folder in (*LEVELS.values(), "errors"):
        for f in (out / folder).glob("part-*"):
            f.unlink()
    (out / MANIFEST).unlink(missing_ok=True)


def load_manifest(out: Path) -> dict[str, Any]:
    path = out / MANIFEST
    if not path.is_file():
        return {"format": 1, "shards": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def save_manifest(out: Path, manifest: dict[str, Any]) -> None:
    write_atomic(out / MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode("utf-8"))


def check_same_run(manifest: dict[str, Any], run: dict[str, Any]) -> None:
    """A resumed run must score with the same methods and options as the run whose shards it keeps."""
    for k in ("methods", "options"):
        if manifest.get(k) is not None and manifest[k] != run[k]:
            raise ValueError(f"the output folder holds a run with other {k} ({manifest[k]} there, {run[k]} now): "
                             "use another folder, or resume=False (--no-resume) to start it again")


def part_files(out: str | Path, level: str = "sentence") -> list[Path]:
    if level not in LEVELS:
        raise ValueError(f"level must be 'sentence' or 'passage', got {level!r}")
    return sorted((Path(out) / LEVELS[level]).glob("part-*.parquet"))


def read_output(out: str | Path, level: str = "sentence"):
    """All part files of one level as one pandas DataFrame (shard order, then batch order), one row per sentence
    (``id``, ``sentence_index``) or per response (``id``): a row written twice is kept once, the last."""
    import pandas as pd

    files = part_files(out, level)
    if not files:
        return pd.DataFrame()
    frames = [pd.read_parquet(f) for f in files]
    cols = list(dict.fromkeys(c for df in frames for c in df.columns))
    df = pd.concat(frames, ignore_index=True)[cols]
    keys = ["id", "sentence_index"] if level == "sentence" else ["id"]
    return df.drop_duplicates(subset=keys, keep="last").reset_index(drop=True)
