"""The one step a batch cannot do alone: a ``combination`` normalized over the whole run.

With the default methods the combination uses packaged statistics and is computed inside each batch, like every
other score. When one of its components has no packaged statistics (e.g. ``ngram1_max``), or with
``combination_stats="run"``, one process normalizes every component over all the run's sentences; on Ray the
actors leave the combination out, and once every shard is written this step fits the statistics on every sentence
part (in part order: the order of one process over the same input) and adds the ``combination`` column to every
part, where one process puts it (after the other scores, before ``flagged``). Each part is rewritten atomically.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from . import output

NAME = "combination"


def needs_run_combination(det) -> bool:
    """Whether the detector's combination needs the whole run (it is then computed here, not in the batches)."""
    return NAME in det.methods and det._fixed_combination() is None


def _insert(df, values):
    """``df`` with the combination column (replaced if there) placed before ``flagged``, else last."""
    df = df.drop(columns=[NAME], errors="ignore")
    at = list(df.columns).index("flagged") if "flagged" in df.columns else len(df.columns)
    df.insert(at, NAME, values)
    return df


def finish_combination(out: Path, det) -> dict:
    """Fit the run's combination statistics on every sentence part, add the combination to every part (sentences:
    the mean z-score; responses: the mean over the response's sentences); returns the statistics used."""
    import pandas as pd

    from ..scorers import combination

    comps = list(det.combine)
    sentences = output.read_output(out, "sentence")
    if sentences.empty:
        return {}
    whole = SimpleNamespace(sentence_scores={m: sentences[m].to_numpy(float) for m in comps})
    zm = combination.combiner([whole], comps, "run")  # every component over the run, as Detector.score does
    by_id: dict[str, float] = {}
    for f in output.part_files(out, "sentence"):
        df = pd.read_parquet(f)
        comb = zm.transform(df[comps].to_numpy(float))
        for rid, group in pd.Series(comb).groupby(df["id"].to_numpy(), sort=False):
            by_id[str(rid)] = float(group.to_numpy().mean())
        output.write_atomic(f, _parquet(_insert(df, comb)))
    for f in output.part_files(out, "passage"):
        df = pd.read_parquet(f)
        output.write_atomic(f, _parquet(_insert(df, [by_id[str(i)] for i in df["id"]])))
    return combination.summary(zm)


def _parquet(df) -> bytes:
    from .actor import to_parquet

    return to_parquet(df)
