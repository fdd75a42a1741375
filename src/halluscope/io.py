"""Reading records (JSONL, JSON, CSV, Python objects) and writing results (JSON, JSONL, CSV, Parquet).

Reading never stops at the first bad record: every record is validated on its own, the valid ones are returned, and
each invalid one becomes a :class:`RecordError` that names the record and the field.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import fnmatch
import glob
import json
import math
import os
import uuid
import warnings
from pathlib import Path, PurePath
from typing import Any, Callable, Iterable, Mapping, Sequence

from .types import ItemResult, Record, RecordError, Results, json_safe  # noqa: F401 (json_safe: io's name too)

# The WikiBio GPT-3 file (SelfCheckGPT) uses its own field names: map them onto ours (SAC3's: sac3_fields).
WIKIBIO_ALIASES = {
    "gpt3_text": "response",
    "gpt3_text_samples": "samples",
    "gpt3_sentences": "sentences",
    "annotation": "labels",
    "wiki_bio_text": "reference",
    "wiki_bio_test_idx": "id",
}


def sac3_fields(d: Mapping[str, Any]) -> dict:
    """A SAC3 NQ-Open record (``question``, ``generated_answer``, ``self_evaluations``, ``label``) in our field
    names: the first generated answer is the response, the self-evaluations are the samples, and the label "True" /
    "False" (the answer is right) is ``correct``; other fields are kept."""
    out = {k: v for k, v in d.items() if k not in ("generated_answer", "self_evaluations", "label")}
    ans = d["generated_answer"]
    out["response"] = ans[0] if isinstance(ans, list) and ans else ans
    if "self_evaluations" in d:
        out["samples"] = d["self_evaluations"]
    if "label" in d:
        label = d["label"]
        out["correct"] = {"true": True, "false": False}.get(label.lower(), label) if isinstance(label, str) else label
    return out


def _normalize_keys(d: Mapping[str, Any]) -> dict:
    if "response" not in d and "generated_answer" in d:
        return sac3_fields(d)
    if "response" in d or "gpt3_text" not in d:
        return dict(d)
    out = {}
    for k, v in d.items():
        key = WIKIBIO_ALIASES.get(k, k)
        if key in ("samples", "sentences", "labels") and isinstance(v, str) and v.startswith("["):
            v = ast.literal_eval(v)  # some copies store lists as Python literals
        out[key] = v
    return out


_BAD = object()  # a line that could not be read (already reported): keeps the numbering
INPUT_TYPES = (".jsonl", ".json", ".csv", ".parquet")


def plain_value(v: Any) -> Any:
    """A Parquet (or pandas) cell as a plain Python value: arrays become lists, a missing value None."""
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _parquet_rows(path: Path) -> list[dict]:
    import pandas as pd

    try:
        rows = pd.read_parquet(path).to_dict("records")
    except Exception as e:  # pyarrow raises its own types for a damaged or foreign file
        raise RecordError(str(path), "<file>", f"cannot read Parquet: {e}") from e
    if not rows:
        raise RecordError(str(path), "<file>", "no records in the file")
    return [{k: plain_value(v) for k, v in row.items()} for row in rows]


def records_from_objects(objs: Iterable[Any], need_samples: bool = True, id_prefix: str = ""
                         ) -> tuple[list[Record], list[RecordError]]:
    """Validate raw dicts (or :class:`Record` objects) one by one; return the valid records and the errors. A record
    with no id is given its position (from 0), after ``id_prefix`` (a file's name where the input is several)."""
    records: list[Record] = []
    errors: list[RecordError] = []
    seen: dict[str, int] = {}  # id -> position of the record that has it
    auto: set[str] = set()  # ids given by position to records with none
    for i, obj in enumerate(objs):
        if obj is _BAD:  # a line that could not be read (already reported): keeps the numbering
            continue
        fields = _record_fields(obj) if isinstance(obj, Record) else obj  # a Record is checked as a dict is
        try:
            rec = Record.from_dict(_normalize_keys(fields) if isinstance(fields, Mapping) else fields,
                                   index=f"{id_prefix}{i}" if id_prefix else i, need_samples=need_samples)
        except RecordError as e:
            errors.append(e)
            continue
        given = not (isinstance(fields, Mapping) and fields.get("id") in (None, ""))
        if rec.id in seen:
            errors.append(RecordError(rec.id, "id", _duplicate(i, seen[rec.id], rec.id in auto, given)))
            continue
        seen[rec.id] = i
        if not given:
            auto.add(rec.id)
        records.append(rec)
    return records, errors


def _record_fields(rec: Record) -> dict:
    """A :class:`Record`'s fields as the dict it would be read from (its ``meta`` as the extra keys), so that one made
    in code is validated as one read from a file (a ``samples`` string, an empty response, sentences not in it)."""
    known = {f.name: getattr(rec, f.name) for f in dataclasses.fields(rec) if f.name != "meta"}
    return {**rec.meta, **{k: v for k, v in known.items() if v is not None}}


def _duplicate(i: int, first: int, first_auto: bool, given: bool) -> str:
    """What a duplicate id says: where both records are (positions from 0, the numbers given as id to records with
    none), and which of them had no id of its own."""
    where = f"duplicate id: the record at position {i} has the id of the one at {first} (positions from 0)"
    if first_auto:
        return f"{where}, which had no id and was given its position: give every record an id"
    if not given:
        return f"{where}; this one had no id and was given its position: give every record an id"
    return f"{where}; ids must be unique within a file or job, and the first is kept"


def _csv_rows(path: Path) -> tuple[list[Any], list[RecordError]]:
    """The rows of a CSV file as raw dicts, and the rows that cannot be read, each an error naming its line: a row
    with more or fewer fields than the header (its data would land in the wrong columns), or a quote out of place
    (``"Paris" is big.``). A quote left open would swallow every later row into one field: an error of the file."""
    objs: list[Any] = []
    bad: list[RecordError] = []
    with path.open(newline="", encoding="utf-8-sig") as f:  # -sig: a byte-order mark (Excel's UTF-8) is not a name
        read = [0]  # lines read so far (the reader's line_num leaves out a line it could not parse)

        def lines():
            for line in f:
                read[0] += 1
                yield line

        reader = csv.DictReader(lines(), strict=True)
        width, last = len(reader.fieldnames or ()), read[0]  # last: the line the previous row ended on
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as e:
                if "unexpected end of data" in str(e):
                    raise csv.Error(f"the row from line {last + 1}: a quote is left open (a quoted field must end "
                                    "with a quote, and a quote inside it is written twice)") from e
                bad.append(RecordError(f"line {read[0]}", "<row>", f"{e} (a quote inside a field is written twice, "
                                       "and the field quoted whole)"))
                last = read[0]
                objs.append(_BAD)
                continue
            values = [v for k, v in row.items() if k is not None] + list(row.get(None) or ())
            where = f"line {read[0] - sum(v.count(chr(10)) for v in values if isinstance(v, str))}"
            last = read[0]
            n = width + len(row.get(None) or ()) - sum(v is None for k, v in row.items() if k is not None)
            if n != width:
                bad.append(RecordError(where, "<row>", f"{n} fields where the header has {width}"))
                objs.append(_BAD)
                continue
            objs.append(_csv_record(row))
    return objs, bad


def _csv_record(row: dict) -> dict:
    """One CSV row as a record's fields: JSON lists parsed, ``sample_1..sample_N`` columns gathered, blanks None."""
    out: dict[str, Any] = {}
    sample_cols = sorted((k for k in row if k.startswith("sample_") and k[7:].isdigit()), key=lambda k: int(k[7:]))
    for k, v in row.items():
        if k in sample_cols:
            continue
        if k in ("samples", "sentences", "labels") and v:
            try:
                v = json.loads(v)
            except json.JSONDecodeError:
                v = v  # left as a string: validation names the field
        out[k] = v if v != "" else None
    if sample_cols:
        out["samples"] = [row[k] for k in sample_cols if row[k]]
    return out


def _jsonl_objects(raw: bytes) -> tuple[list[Any], list[RecordError]]:
    """One object per line, each line decoded and parsed on its own: invalid UTF-8, invalid JSON and a line that
    is not an object become errors naming the line; blank lines are skipped."""
    objs: list[Any] = []
    bad: list[RecordError] = []
    for lineno, line in enumerate(raw.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):  # less a UTF-8 BOM
        if not line.strip():
            continue
        where = f"line {lineno}"
        try:
            obj = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as e:
            bad.append(RecordError(where, "<text>", f"not valid UTF-8 (byte {e.start})"))
            objs.append(_BAD)
            continue
        except json.JSONDecodeError as e:
            bad.append(RecordError(where, "<json>", f"not valid JSON: {e.msg}"))
            objs.append(_BAD)
            continue
        if not isinstance(obj, Mapping):
            bad.append(RecordError(where, "<record>", f"expected an object, got {json.dumps(obj)[:40]}"))
            objs.append(_BAD)
            continue
        objs.append(obj)
    return objs, bad


def read_records(path: str | Path, need_samples: bool = True, id_prefix: str = ""
                 ) -> tuple[list[Record], list[RecordError]]:
    """Read records from a ``.jsonl``, ``.json``, ``.csv`` or ``.parquet`` file.

    JSONL: one object per line. JSON: a list of objects, or ``{"records": [...]}``. CSV: columns ``response``,
    ``samples`` (a JSON list) or ``sample_1..sample_N``, optional ``id``, ``prompt`` (or ``question``),
    ``sentences``/``labels`` (JSON lists). Parquet: the same columns, lists as list columns. Every line or record
    that cannot be used becomes an error naming it and the field; the other records are still returned. A file with
    no record at all is an error of its own. A record with no id is named by its position, after ``id_prefix``.
    """
    path = Path(path)
    if not path.is_file():
        raise RecordError(str(path), "<file>", "file does not exist")
    suffix = path.suffix.lower()
    if suffix not in INPUT_TYPES:
        raise RecordError(str(path), "<file>", f"unknown file type {suffix!r} (use {', '.join(INPUT_TYPES)})")
    if suffix == ".parquet":
        return records_from_objects(_parquet_rows(path), need_samples, id_prefix)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise RecordError(str(path), "<file>", f"cannot read file: {e}") from e
    if not raw.strip():
        raise RecordError(str(path), "<file>", "the file is empty: no records to score")
    if suffix == ".csv":
        try:
            rows, bad = _csv_rows(path)
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            raise RecordError(str(path), "<file>", f"cannot read CSV: {e}") from e
        if not rows:
            raise RecordError(str(path), "<file>", "no records in the file (a header and no row)")
        recs, errs = records_from_objects(rows, need_samples, id_prefix)
        return recs, bad + errs
    if suffix == ".jsonl":
        objs, bad = _jsonl_objects(raw)
        recs, errs = records_from_objects(objs, need_samples, id_prefix)
        return recs, bad + errs
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise RecordError(str(path), "<file>", f"not valid UTF-8 (byte {e.start})") from e
    except json.JSONDecodeError as e:
        raise RecordError(str(path), "<file>", f"not valid JSON: {e.msg} at line {e.lineno}") from e
    if isinstance(data, Mapping) and "records" in data:
        data = data["records"]
    if not isinstance(data, list):
        raise RecordError(str(path), "<file>", "a JSON file must hold a list of records or {'records': [...]}")
    if not data:
        raise RecordError(str(path), "<file>", "no records in the file (an empty list)")
    return records_from_objects(data, need_samples, id_prefix)


def _many(source) -> bool:
    """Whether ``source`` is several paths (a list or tuple of files, folders or globs, e.g. a glob the shell
    expanded) rather than one."""
    return isinstance(source, (list, tuple))


def describe(source) -> str:
    """A source as a message names it: the path, or several paths joined by spaces."""
    return " ".join(str(s) for s in source) if _many(source) else str(source)


def input_files(source: str | Path | Sequence[str | Path]) -> list[Path]:
    """The input files of a path: the file itself, every input file in a folder, or the input files a glob matches
    (sorted, so they come in the same order on every run; hidden files, such as macOS's ``._a.jsonl``, left out);
    of several paths, theirs in the order given, each file once."""
    if _many(source):
        if not source:
            raise FileNotFoundError("no input given")
        return list(dict.fromkeys(f for s in source for f in input_files(s)))
    p = Path(source)
    if p.is_dir() or _is_glob(source):
        files = sorted(f for f in _candidates(source) if f.suffix.lower() in INPUT_TYPES)
    else:
        if not p.is_file():
            raise FileNotFoundError(f"{source}: no such file or folder")
        files = [p]
    if not files:
        raise FileNotFoundError(f"{source}: no input files ({', '.join(INPUT_TYPES)})")
    return [f.resolve() for f in files]


def _is_glob(source: str | Path) -> bool:
    return any(c in str(source) for c in "*?[") and not Path(source).exists()


def _candidates(source: str | Path) -> list[Path]:
    """The files a folder holds or a glob matches, hidden ones left out."""
    p = Path(source)
    found = p.iterdir() if p.is_dir() else (Path(x) for x in glob.glob(str(source), recursive=True))
    return [f for f in found if f.is_file() and not f.name.startswith(".")]


def ignored_files(source: str | Path | Sequence[str | Path]) -> list[Path]:
    """The files of a folder or a glob that are not input files (e.g. ``.jsonl.gz``, ``README.txt``): said, not
    read."""
    if _many(source):
        return list(dict.fromkeys(f for s in source for f in ignored_files(s)))
    if not (Path(source).is_dir() or _is_glob(source)):
        return []
    return sorted(f for f in _candidates(source) if f.suffix.lower() not in INPUT_TYPES)


def several_files(source: str | Path | Sequence[str | Path]) -> bool:
    """Whether a source names its input files by a folder, a glob or several paths (a record with no id is then
    named FILE:N)."""
    if _many(source):
        return len(source) != 1 or several_files(source[0])
    return not Path(source).is_file()


def file_names(files: list[Path], source: str | Path | Sequence[str | Path]) -> dict[Path, str]:
    """How each input file is named in ids and errors: nothing for a single file; else its path relative to the
    files' common folder (``day1.jsonl``; ``day2/answers.jsonl`` where a recursive glob finds files of one name in
    several folders)."""
    if not several_files(source):
        return {f: "" for f in files}
    root = Path(os.path.commonpath([str(f.parent) for f in files]))
    return {f: f.relative_to(root).as_posix() for f in files}


def id_prefix(name: str) -> str:
    """What goes before the position of a record with no id: the file's name and ':' where the input is several
    files (``day1.jsonl:7``), so the records of different files keep different ids; nothing for a single file."""
    return f"{name}:" if name else ""


def read_inputs(source: str | Path | Sequence[str | Path], need_samples: bool = True
                ) -> tuple[list[Record], list[RecordError]]:
    """The records of a file, a folder of input files, a glob or several of them, in file order, and the errors of
    the others.

    A file that cannot be read at all, a bad record and an id already met in an earlier file are errors carrying
    the file's name (``source``); the other files are still read. A source none of whose files can be read raises
    (as an unreadable single file does); files read with no valid record give no records and their errors."""
    files = input_files(source)
    if not several_files(source):
        return read_records(source[0] if _many(source) else source, need_samples)  # named as given in its errors
    names = file_names(files, source)
    records: list[Record] = []
    errors: list[RecordError] = []
    first: dict[str, str] = {}  # id -> the file that holds it first
    unreadable = 0
    for f in files:
        try:
            recs, errs = read_records(f, need_samples, id_prefix(names[f]))
        except RecordError as e:
            errs, recs, unreadable = [e], [], unreadable + 1
        for e in errs:
            e.source = names[f]
        errors += errs
        for r in recs:
            if r.id in first:
                errors.append(RecordError(r.id, "id", f"duplicate id: already in {first[r.id]}, whose record is "
                                          "scored (ids must be unique across the files)", names[f]))
                continue
            first[r.id] = names[f]
            records.append(r)
    if unreadable == len(files):
        raise RecordError(describe(source), "<file>", f"no input file could be read ({len(files)} tried; the first: "
                          f"{errors[0]})")
    return records, errors


def pick(items: list, positions: list[int] | None, what: str = "the records") -> list:
    """``items`` at ``positions`` (all of them for None); a position past the end is an error that says how many
    there are."""
    if positions is None:
        return list(items)
    past = [i for i in positions if i >= len(items)]
    if past:
        raise ValueError(f"position {past[0]} is past the end of {what}: {len(items)} records"
                         + (f", positions 0-{len(items) - 1}" if items else ""))
    return [items[i] for i in positions]


def write_errors(errors: list[RecordError], path: str | Path) -> Path:
    """The skipped records of a run as JSON lines (record, field, message): the sidecar a pipeline reads."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e.to_dict()) + "\n" for e in errors), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------------- results


def plain_mode() -> int:
    """The mode a plain write gives a new file: 0666 less the process's umask, read from /proc where it can be (so
    that no other thread makes a file meanwhile under a cleared umask)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: through a temporary file in the same folder, flushed, then
    renamed over it, so an interruption or an error leaves the earlier file as it was (and no temporary file). The
    file gets the mode a plain write would give it: the earlier file's, else the umask's (not mkstemp's 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as to any new file
    try:
        with os.fdopen(fd, "wb") as f:
            if path.is_file():
                os.chmod(f.fileno(), path.stat().st_mode & 0o7777)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ResultWriter:
    """Appends one JSON line per scored record as soon as it is done, so an interrupted run loses nothing.

    With ``resume=True`` the ids already in the file are read back and can be skipped by the caller; ``keep``
    says which of them stay (the others are taken out of the file, to be scored again; it may raise to refuse the
    file). While it is open, ``PATH.lock`` holds an exclusive lock: a second run on the same output (a cron job that
    started before the last one ended) is refused at once instead of writing every record twice.
    """

    def __init__(self, path: str | Path, resume: bool = False, keep: Callable[[ItemResult], bool] | None = None):
        self.path = Path(path)
        self.done: dict[str, ItemResult] = {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = OutputLock(self.path)
        try:
            self._start(resume, keep)
        except BaseException:
            self._lock.release()  # a refused file (keep raised) or an unreadable one: the lock goes at once
            raise

    def _start(self, resume: bool, keep: Callable[[ItemResult], bool] | None) -> None:
        """Read back an earlier run's results (resume), or start the file empty."""
        if resume and self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by an interruption: that record is scored again
                if "sentence_scores" in d:
                    it = ItemResult.from_dict(d)
                    if keep is None or keep(it):
                        self.done[it.id] = it
            # rewritten without a half-written tail line or a result to score again
            write_atomic(self.path, "".join(json.dumps(it.to_dict()) + "\n" for it in self.done.values()).encode())
        else:
            self.path.write_text("")

    def write(self, item: ItemResult) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(item.to_dict()) + "\n")
            f.flush()

    def close(self) -> None:
        """Release the output's lock (also done when the writer is collected, or by the system when the process
        ends)."""
        self._lock.release()

    def __del__(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is not None:
            lock.release()


class OutputInUse(OSError):
    """The output is being written by another run (its lock is held)."""


class OutputLock:
    """An exclusive, non-blocking lock on ``PATH.lock`` (``flock``: released by the system if the process dies, so a
    killed run leaves no stale lock). The file holds the holder's process id and is removed on release; a lock taken
    on a file another run removed meanwhile is taken again on the new one."""

    def __init__(self, path: Path):
        import fcntl

        real = path.resolve()  # a link and its target share one lock
        self.file = real.with_name(real.name + ".lock")
        self.file.parent.mkdir(parents=True, exist_ok=True)  # the output's folder, made as its writer would make it
        self.fd: int | None = None
        while True:
            fd = os.open(self.file, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise OutputInUse(f"another run is writing {path} (process {holder}, lock {self.file}): wait for it "
                                  "to end, or write to another file") from None
            except OSError as e:  # a file system without flock (some NFS or FUSE mounts): written unlocked
                os.close(fd)
                warnings.warn(f"{self.file}: the output cannot be locked here ({e}); a second run on it is not "
                              "refused", stacklevel=3)
                return
            try:
                same = os.fstat(fd).st_ino == os.stat(self.file).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the file was removed by the run that held it: lock the new one
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            self.file.unlink(missing_ok=True)
            os.close(self.fd)  # closing the descriptor releases the lock
            self.fd = None

    def __enter__(self) -> "OutputLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def read_results(path: str | Path) -> Results:
    """Read results written by :func:`write_results` as JSON or JSONL (the CSV and Parquet tables hold one row per
    sentence: read them with pandas)."""
    path = Path(path)
    if path.suffix.lower() not in (".json", ".jsonl"):
        raise ValueError(f"{path}: results are read back from .json or .jsonl (a {path.suffix or 'suffix-less'} "
                         "file is a table: pandas reads it)")
    text = path.read_text(encoding="utf-8")

    def item(x, where: str) -> ItemResult:  # a line of another file (ensemble score's, records) named, not a KeyError
        if not isinstance(x, dict) or "sentences" not in x or "sentence_scores" not in x:
            raise ValueError(f"{path}: {where} is not a result of `halluscope score` (no sentences and "
                             "sentence_scores): give the -o file of score, check, evaluate or reproduce")
        return ItemResult.from_dict(x)

    if path.suffix.lower() == ".jsonl":
        items = [item(json.loads(l), f"line {k}") for k, l in enumerate(text.splitlines(), 1) if l.strip()]
        methods = list(dict.fromkeys(m for it in items[:1] for m in (*it.sentence_scores, *it.passage_scores)))
        return Results(items=items, methods=methods)
    d = json.loads(text)
    if not isinstance(d, dict) or "items" not in d:
        raise ValueError(f"{path}: not the results of `halluscope score` (no items)")
    items = [item(x, f"item {k}") for k, x in enumerate(d["items"])]
    errs = [RecordError(e["record"], e["field"], e.get("message", e.get("error"))) for e in d.get("errors", [])]
    return Results(items=items, errors=errs, methods=d.get("methods", []), settings=d.get("settings", {}))


def write_results(results: Results, path: str | Path) -> Path:
    """Write results; the format follows the suffix: .json, .jsonl, .csv (one row per sentence), .parquet."""
    path = check_output(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".json":
        data = json.dumps(results.to_dict(), indent=1).encode()
    elif suffix == ".jsonl":
        data = "".join(json.dumps(it.to_dict()) + "\n" for it in results.items).encode()
    elif suffix == ".csv":
        data = sentence_table(results).to_csv(index=False).encode()
    else:
        data = sentence_table(results).to_parquet(None, index=False)
    write_atomic(path, data)
    return path


def sentence_table(results: Results):
    """The table a .csv or .parquet output holds: one row per sentence (``Results.to_df()``), and beside each its
    answer's scores and flag as ``answer_{method}`` / ``answer_flagged``, its sample count and grade, so one file
    says what the JSON says of both levels."""
    sent = results.to_df("sentence")
    answer = results.to_df("passage").drop(columns=["num_sentences", "label"], errors="ignore")
    keep = {"id", "num_samples", "correct"}
    answer = answer.rename(columns={c: f"answer_{c}" for c in answer.columns if c not in keep})
    return sent.merge(answer, on="id", how="left", validate="many_to_one") if len(sent) else sent


OUTPUT_TYPES = (".json", ".jsonl", ".csv", ".parquet")


def _read_as_input(path: Path, source: str | Path | Sequence[str | Path]) -> bool:
    """Whether a file at ``path`` would be among the input files of a folder or a glob ``source`` (both compared as
    absolute paths; a recursive ``**`` matched across folders)."""
    if _many(source):
        return any(_read_as_input(path, s) for s in source)
    if Path(source).is_dir():
        return path.resolve().parent == Path(source).resolve()
    if not _is_glob(source):
        return False
    out, pattern = os.path.abspath(path), os.path.abspath(source)
    return PurePath(out).match(pattern) or ("**" in pattern and fnmatch.fnmatch(out, pattern))


def check_output(path: str | Path, source: str | Path | Sequence[str | Path] | None = None) -> Path:
    """An output path that can be written, checked before any work: a known type, not a folder, not the input
    file, in a place this user can write to, and for .parquet an engine to write it; raises ValueError saying what
    is wrong."""
    path = Path(path)
    if path.suffix.lower() not in OUTPUT_TYPES:
        raise ValueError(f"unknown output type {path.suffix.lower()!r} for {path} (use .json, .jsonl, .csv or "
                         ".parquet)")
    if path.is_dir():
        raise ValueError(f"the output {path} is a folder: name a file in it")
    if source is not None and path.exists() and any(path.resolve() == Path(s).resolve()
                                                    for s in (source if _many(source) else [source])):
        raise ValueError(f"the output {path} is the input file: write the results to another file")
    if source is not None and path.suffix.lower() in INPUT_TYPES and _read_as_input(path, source):
        raise ValueError(f"the output {path} would be read as input by the next run on {source}: write it "
                         "elsewhere")
    folder = next((p for p in (path.parent, *path.parent.parents) if p.exists()), Path("."))
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise ValueError(f"the output {path} cannot be written: {folder} is not a folder this user can write to")
    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ValueError("a .parquet output needs pyarrow (pip install pyarrow), or write .jsonl/.csv") from None
    return path


def merge_results(parts: list[Results]) -> Results:
    """Results of the same records scored by different runs: one item per id (the first file's order), with the
    methods of every file. A record missing from a later file is an error."""
    base = parts[0]
    for other in parts[1:]:
        by_id = {it.id: it for it in other.items}
        for it in base.items:
            o = by_id.get(it.id)
            if o is None:
                raise ValueError(f"record {it.id} is missing from one of the results files")
            it.sentence_scores.update(o.sentence_scores)
            it.passage_scores.update(o.passage_scores)
            it.evidence.update(o.evidence)
        base.methods = list(dict.fromkeys([*base.methods, *other.methods]))
    return base


def keep_methods(results: Results, keep: list[str]) -> Results:
    """The results with only the methods ``keep`` (in that order); a method with no scores is an error."""
    missing = [m for m in keep if results.items and m not in results.items[0].passage_scores]
    if missing:
        raise ValueError(f"no scores for {missing} in these results")
    for it in results.items:
        it.sentence_scores = {m: it.sentence_scores[m] for m in keep if m in it.sentence_scores}
        it.passage_scores = {m: it.passage_scores[m] for m in keep}
        it.evidence = {m: v for m, v in it.evidence.items() if m in keep}
    results.methods = list(keep)
    return results


def read_prompts(path: str | Path) -> list[tuple[str | None, str]]:
    """Prompts from a file, as (id, prompt): one per line (no id), or JSON Lines with a 'prompt' (or 'question')
    field and an optional 'id' (kept: the results carry it)."""
    out = []
    for k, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines()):
        line = line.strip()
        if not line:
            continue
        rid = None
        if line.startswith("{"):
            d = json.loads(line)
            if not isinstance(d.get("prompt", d.get("question")), str):
                raise ValueError(f"{path}: line {k + 1}: field 'prompt' missing or not a string")
            line, rid = d.get("prompt", d.get("question")), d.get("id")
            rid = None if rid is None else str(rid)
        out.append((rid, line))
    return out
