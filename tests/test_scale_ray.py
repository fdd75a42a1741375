"""Batch scoring on Ray (issue 16), on a real local Ray cluster (2 CPUs) over a WikiBio slice.

The scores of a Ray run must equal those of one process to 1e-6 for every method, a worker killed in the middle of a
batch must leave nothing lost and nothing written twice, a re-run must skip the finished shards, and without Ray the
message must say how to install it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from halluscope.pipeline import DEFAULT_METHODS, Detector
from halluscope.scale import RAY_MISSING, read_output
from halluscope.scale.output import part_files
from halluscope.scale.shards import plan_batches, record_dict

ray = pytest.importorskip("ray", reason="the ray extra: pip install 'halluscope[ray]'")

from halluscope.scale import score_with_ray  # noqa: E402

CHEAP = ["ngram1_max", "bertscore"]  # one model (the encoder): quick to load in each actor


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster for the module (2 CPUs, no dashboard), always shut down."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def slice4(wikibio):
    """WikiBio passages 0-3 with 4 samples each."""
    recs = wikibio[:4]
    for r in recs:
        r.samples = r.samples[:4]
    return recs


def one_process(recs, methods, **options):
    """The single-process reference, on freshly loaded models: the encoder caches each text's vectors from the
    batch it was first encoded in, so a warm cache from another test's batches would make this reference differ
    from any run with these batches (by up to 1e-3 in bf16), in one process as on Ray."""
    from halluscope.engine import store

    store.clear()
    return Detector(methods=methods, **options).score(recs)


def assert_same(reference, out: Path, tol: float = 1e-6) -> None:
    """Both levels: the same columns, the same rows in the same order, every score within ``tol``."""
    for level in ("sentence", "passage"):
        a, b = reference.to_df(level), read_output(out, level)
        assert list(b.columns) == list(a.columns), level
        assert b["id"].tolist() == a["id"].tolist(), level
        for c in a.columns:
            if a[c].dtype.kind == "f":
                np.testing.assert_allclose(b[c].to_numpy(float), a[c].to_numpy(float), rtol=0, atol=tol,
                                           err_msg=f"{level} {c}")
            else:
                assert b[c].tolist() == a[c].tolist(), f"{level} {c}"


def raw_rows(out: Path, level: str) -> pd.DataFrame:
    """Every row of every part file, without the de-duplication of read_output."""
    return pd.concat([pd.read_parquet(f) for f in part_files(out, level)], ignore_index=True)


def test_batches_hold_whole_chunks_and_respect_the_token_budget(slice4):
    from halluscope.scale.shards import approx_tokens

    per = [approx_tokens(r) for r in slice4]
    batches = plan_batches(slice4, chunk_size=2, batch_tokens=per[0] + per[1] + per[2])
    assert [[r.id for r in b] for b in batches] == [[r.id for r in slice4[:2]], [r.id for r in slice4[2:]]]
    assert [len(b) for b in plan_batches(slice4, 1, 10**9)] == [4]
    assert [len(b) for b in plan_batches(slice4, 1, 1)] == [1, 1, 1, 1]  # a chunk over the budget stands alone


def test_ray_run_equals_one_process_for_every_method(cluster, slice4, tmp_path):
    """Default methods plus ngram1_max (whose combination is then normalized over the whole run, so the run-level
    finishing step is exercised too): the same scores to 1e-6, two batches on two actors."""
    methods = [*DEFAULT_METHODS, "ngram1_max"]
    reference = one_process(slice4, methods, chunk_size=2)
    run = score_with_ray(slice4, tmp_path, methods=methods, num_actors=2, batch_tokens=1, chunk_size=2)
    assert (run.records, run.batches, run.shards, run.errors) == (4, 2, 1, 0)
    assert run.combination is not None and "ngram1_max" in run.combination["statistics"]
    assert len(part_files(tmp_path, "sentence")) == len(part_files(tmp_path, "passage")) == 2
    assert_same(reference, tmp_path)
    assert set(run.scorer_seconds) >= {"bertscore", "nli_support", "entity"}


def _kill_one_scoring_worker(stop: threading.Event, killed: list) -> None:
    """SIGKILL the first Ray actor process seen running a batch (its process title ends in '.submit')."""
    while not stop.is_set() and not killed:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
            except OSError:
                continue
            if title.startswith("ray::MapWorker(MapBatches(ScoreActor))") and title.endswith(".submit"):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(pid)
                return
        time.sleep(0.01)


def test_a_worker_killed_mid_batch_loses_nothing_and_writes_nothing_twice(cluster, slice4, tmp_path):
    reference = one_process(slice4, CHEAP, chunk_size=1)
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_one_scoring_worker, args=(stop, killed), daemon=True)
    killer.start()
    try:
        run = score_with_ray(slice4, tmp_path, methods=CHEAP, num_actors=2, batch_tokens=1, chunk_size=1)
    finally:
        stop.set()
        killer.join()
    assert killed, "no scoring worker was caught in a batch: the test did not kill anything"
    assert run.shards == 1 and not run.shards_failed
    for level, keys in (("sentence", ["id", "sentence_index"]), ("passage", ["id"])):
        rows = raw_rows(tmp_path, level)
        assert not rows.duplicated(subset=keys).any(), f"{level}: a row written twice"
    assert_same(reference, tmp_path)


def _write_shards(recs, folder: Path, sizes: list[int]) -> list[Path]:
    folder.mkdir()
    paths, start = [], 0
    for k, n in enumerate(sizes):
        p = folder / f"shard{k}.jsonl"
        p.write_text("".join(json.dumps(record_dict(r)) + "\n" for r in recs[start : start + n]))
        paths.append(p)
        start += n
    return paths


def test_resume_skips_finished_shards_and_redoes_an_unfinished_one(cluster, slice4, tmp_path):
    src, out = tmp_path / "in", tmp_path / "out"
    _write_shards(slice4, src, [2, 2])
    first = score_with_ray(src / "*.jsonl", out, methods=["ngram1_max"], num_actors=1)
    assert (first.shards, first.shards_skipped, first.records) == (2, 0, 4)
    stamps = {f: f.stat().st_mtime_ns for f in part_files(out, "sentence")}

    again = score_with_ray(src / "*.jsonl", out, methods=["ngram1_max"], num_actors=1)
    assert (again.shards, again.shards_skipped, again.records, again.actors) == (0, 2, 0, 0)  # no Ray work at all
    assert {f: f.stat().st_mtime_ns for f in part_files(out, "sentence")} == stamps

    # a shard whose run was cut off: not in the manifest, a stale part of an earlier cut left behind
    manifest = json.loads((out / "manifest.json").read_text())
    key = next(k for k, v in manifest["shards"].items() if v["source"].endswith("shard1.jsonl"))
    del manifest["shards"][key]
    (out / "manifest.json").write_text(json.dumps(manifest))
    stale = out / "sentences" / f"part-{key}-b00007.parquet"
    stale.write_bytes(next(iter(stamps)).read_bytes())
    third = score_with_ray(src / "*.jsonl", out, methods=["ngram1_max"], num_actors=1)
    assert (third.shards, third.shards_skipped, third.records) == (1, 1, 2)
    assert not stale.exists()
    assert raw_rows(out, "passage")["id"].tolist() == [r.id for r in slice4]
    assert_same(one_process(slice4, ["ngram1_max"]), out)

    with pytest.raises(ValueError, match="other methods"):
        score_with_ray(src / "*.jsonl", out, methods=["ngram1_avg"], num_actors=1)


def test_a_ray_dataset_source_is_scored_and_resumes_by_id(cluster, slice4, tmp_path):
    rows = [record_dict(r) for r in slice4]
    first = score_with_ray(ray.data.from_items(rows[:3]), tmp_path, methods=["ngram1_max"], num_actors=1)
    assert (first.records, first.errors) == (3, 0)
    again = score_with_ray(ray.data.from_items(rows), tmp_path, methods=["ngram1_max"], num_actors=1)
    assert again.records == 1  # only the record not yet in the output
    got = read_output(tmp_path, "passage").sort_values("id")["id"].tolist()
    assert got == sorted(r.id for r in slice4) and len(raw_rows(tmp_path, "passage")) == 4
    with pytest.raises(ValueError, match="'id' column"):
        score_with_ray(ray.data.from_items([{"response": "x", "samples": ["y"]}]), tmp_path / "x",
                       methods=["ngram1_max"])


def test_cli_score_engine_ray(cluster, slice4, tmp_path):
    from typer.testing import CliRunner

    from halluscope.cli import app

    src = tmp_path / "answers.parquet"  # a Parquet shard: list columns come back as arrays, read as lists
    pd.DataFrame([record_dict(r) for r in slice4]).to_parquet(src, index=False)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["score", str(src), "--engine", "ray", "--actors", "1", "-m", "ngram1_max",
                                   "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "4 records" in res.output and "1 shards" in res.output
    assert_same(one_process(slice4, ["ngram1_max"]), out)
    bad = CliRunner().invoke(app, ["score", str(src), "--engine", "spark", "-o", str(out)])
    assert bad.exit_code == 2 and "--engine must be" in bad.output


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


def test_without_ray_the_message_says_how_to_install_it(tmp_path, slice4):
    """Simulated absence (sys.modules['ray'] = None): the library raises ImportError with the install command and
    the CLI ends in that one line (exit 2); importing halluscope, its CLI and halluscope.scale never imports Ray."""
    src = _write_shards(slice4, tmp_path / "in", [4])[0]
    code = f"""
import sys
import halluscope, halluscope.cli, halluscope.scale, halluscope.pipeline
print("imported ray:", "ray" in sys.modules)
sys.modules["ray"] = None
from halluscope.scale import score_with_ray
try:
    score_with_ray({str(src)!r}, "out")
except ImportError as e:
    print("error:", e)
sys.argv = ["halluscope", "score", {str(src)!r}, "--engine", "ray", "-o", "out2"]
halluscope.cli.main()
"""
    res = _python(code, tmp_path)
    assert "imported ray: False" in res.stdout
    assert f"error: {RAY_MISSING}" in res.stdout
    assert res.returncode == 2 and RAY_MISSING in res.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "out2").exists()
