"""The output folder of a Ray batch run: Parquet part files, the manifest of finished shards, reading back.

    OUT/manifest.json                   finished shards (written atomically after each one), methods, options
    OUT/sentences/part-KEY-bNNNNN.parquet   one row per sentence (the columns of ``Results.to_df("sentence")``)
    OUT/responses/part-KEY-bNNNNN.parquet   one row per response (the columns of ``Results.to_df("passage")``)
    OUT/errors/part-KEY-bNNNNN.jsonl        records that could not be scored (record, field, message, source)
    OUT/errors/duplicates.jsonl             ids found in more than one shard (each scored, in each shard)

Every file is named from its shard and batch and written by atomic rename, so a batch that Ray runs twice (a worker
killed, its batch retried) replaces its file rather than adding a second one, and a reader never sees half a file.
Nothing here imports Ray.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..io import write_atomic  # the one atomic writer (finish.py and ray_batch.py call output.write_atomic)
from .shards import KEY_DIGEST

LEVELS = {"sentence": "sentences", "passage": "responses"}
MANIFEST = "manifest.json"
# part_name(shard_key(...), batch) + suffix, and nothing else (batch numbers grow past 5 digits)
OURS = re.compile(rf"part-[A-Za-z0-9_]+-[0-9a-f]{{{KEY_DIGEST}}}-b\d{{5,}}\.(parquet|jsonl)")
RUN_ERRORS = ("duplicates.jsonl", "part-input.jsonl")  # the run's error files that are not of a batch


def ours(folder: Path, suffix: str = "*") -> list[Path]:
    """This folder's part files written by a run (a foreign ``part-00000-spark.parquet`` is neither read nor
    removed), sorted."""
    return sorted(f for f in folder.glob(f"part-*.{suffix}") if OURS.fullmatch(f.name))


def part_name(shard: str, batch: int) -> str:
    return f"part-{shard}-b{batch:05d}"


def write_batch(out: Path, row: dict, source: str | None = None) -> None:
    """The files of one scored batch (a row returned by the scoring actors); ``source``: the shard's input file,
    written on each error line (its ``record`` is a line or row number of that file, or an id)."""
    name = part_name(row["shard"], int(row["batch"]))
    for level, folder in LEVELS.items():
        data = row[level]
        if data:
            write_atomic(out / folder / f"{name}.parquet", data)
    errors = [{**e, "source": source} if source else e for e in json.loads(row["errors"])]
    if errors:
        write_atomic(out / "errors" / f"{name}.jsonl", "".join(json.dumps(e) + "\n" for e in errors).encode())


def parts_missing(out: Path, shard: str, batches: int, empty: list[int] | None = None) -> bool:
    """Whether a finished shard lost files since: each batch that scored records wrote its responses and its
    sentences; one that scored none (``empty``, as the manifest records them) wrote its errors. A manifest written
    before it recorded ``empty`` (None) is held to the looser rule: responses or errors."""
    for b in range(batches):
        name = part_name(shard, b)
        has = [(out / LEVELS[lv] / f"{name}.parquet").is_file() for lv in ("passage", "sentence")]
        if has[0] != has[1]:
            return True
        errors = (out / "errors" / f"{name}.jsonl").is_file()
        if not (errors if empty is not None and b in empty else has[0] or (empty is None and errors)):
            return True
    return False


def shard_of(part: Path) -> str:
    """The shard key of a part file's name (``part-KEY-bNNNNN``; a key holds exactly one '-')."""
    return part.stem.split("-")[1] + "-" + part.stem.split("-")[2]


def duplicate_ids(out: Path) -> dict[str, list[str]]:
    """The ids that more than one shard's responses hold, with those shards: ids must be unique across an input,
    and each shard checks its own (a record whose id an earlier record of the same shard has is an error)."""
    import pyarrow.parquet as pq

    shards_of: dict[str, set[str]] = {}
    for f in part_files(out, "passage"):
        for rid in pq.read_table(f, columns=["id"]).column("id").to_pylist():
            shards_of.setdefault(str(rid), set()).add(shard_of(f))
    return {rid: sorted(s) for rid, s in shards_of.items() if len(s) > 1}


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
        for f in ours(out / folder):
            f.unlink()
    for name in RUN_ERRORS:
        (out / "errors" / name).unlink(missing_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)


def load_manifest(out: Path) -> dict[str, Any]:
    path = out / MANIFEST
    if not path.is_file():
        return {"format": 1, "shards": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def save_manifest(out: Path, manifest: dict[str, Any]) -> None:
    write_atomic(out / MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode("utf-8"))


def check_same_run(manifest: dict[str, Any], run: dict[str, Any]) -> None:
    """A resumed run must score with the same methods and options as the run whose shards it keeps; the error
    names what differs."""
    was, now = manifest.get("options"), run["options"]
    diff = [] if manifest.get("methods") in (None, run["methods"]) else [
        f"methods: {','.join(manifest['methods'])} there, {','.join(run['methods'])} now"]

    def show(v: Any) -> str:
        return "the default" if v is None else repr(v)

    if was is not None:
        diff += [f"{k}: {show(was.get(k))} there, {show(now.get(k))} now" for k in sorted(set(was) | set(now))
                 if was.get(k) != now.get(k)]
    if diff:
        raise ValueError(f"the output folder holds a run with other settings ({'; '.join(diff)}): resume with "
                         "those, use another folder, or start this one again (resume=False; on the command line, "
                         "without --resume)")


def part_files(out: str | Path, level: str = "sentence") -> list[Path]:
    if level not in LEVELS:
        raise ValueError(f"level must be 'sentence', 'passage' or 'errors', got {level!r}")
    return ours(Path(out) / LEVELS[level], "parquet")


def read_output(out: str | Path, level: str = "sentence"):
    """All part files of one level as one pandas DataFrame (shard order, then batch order), one row per sentence
    (``id``, ``sentence_index``) or per response (``id``), or (``"errors"``) one row per record that could not be
    scored (``record``, ``field``, ``message``, ``source``) and per id found in several shards. A row written
    twice is kept once, the last, with a warning where the two came from different shards (the same id in two
    input files, or a shard scored again from a moved input: ``errors/duplicates.jsonl`` lists them)."""
    import warnings

    import pandas as pd

    if level == "errors":
        folder = Path(out) / "errors"
        files = ours(folder, "jsonl") + [folder / n for n in RUN_ERRORS if (folder / n).is_file()]
        lines = [json.loads(x) for f in files for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
        return pd.DataFrame(lines, columns=list(dict.fromkeys(["record", "field", "message", "source",
                                                               *(k for x in lines for k in x)])))
    files = part_files(out, level)
    if not files:
        return pd.DataFrame()
    frames = [pd.read_parquet(f).assign(_shard=shard_of(f)) for f in files]
    cols = list(dict.fromkeys(c for df in frames for c in df.columns))
    df = pd.concat(frames, ignore_index=True)[cols]
    last = df.groupby("id", sort=False)["_shard"].agg(["last", "nunique"])  # the shard whose answer an id keeps
    if (last["nunique"] > 1).any():
        warnings.warn(f"{int((last['nunique'] > 1).sum())} ids are in more than one shard of {out} (e.g. "
                      f"{last.index[last['nunique'] > 1][0]!r}): the last shard's rows are kept (see "
                      "errors/duplicates.jsonl)", stacklevel=2)
        df = df[df["_shard"].to_numpy() == last["last"].reindex(df["id"]).to_numpy()]  # one answer, not a splice
    keys = ["id", "sentence_index"] if level == "sentence" else ["id"]
    return df[~df.duplicated(subset=keys, keep="last")].drop(columns="_shard").reset_index(drop=True)
