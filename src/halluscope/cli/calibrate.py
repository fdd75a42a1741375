"""The calibration command: fit the default probability on WikiBio and SAC3, or refit it (and the tuned response
ensemble) from the reviews stored by ``halluscope serve``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .common import DataOpt, app, console, err, fails


@app.command("calibrate")
@fails
def calibrate_cmd(
    data: Optional[Path] = DataOpt,
    wikibio: Optional[list[Path]] = typer.Option(None, "--wikibio", help="Results of `reproduce wikibio -o` holding "
                                                 "the default methods (passages 0-118 are used), one per sample count "
                                                 "(repeat the option); default: score them now."),
    graded: Optional[list[Path]] = typer.Option(None, "--graded", help="Results of the SAC3 NQ-Open records scored "
                                                "with the default methods, one per sample count (repeat the "
                                                "option): `score SAC3_FILE --samples N -o GN.jsonl`; default: score "
                                                "them now."),
    samples: str = typer.Option("3,5,10,20", "--samples", help="The sample counts to fit at when scoring now (the "
                                "first n samples of each record; SAC3 has 10)."),
    out: Path = typer.Option(..., "--out", "-o", help="The calibration file to write (the packaged one is "
                             "src/halluscope/data/calibration.json in a checkout)."),
    from_db: Optional[str] = typer.Option(None, "--from-db", help="Refit from the reviews in a `halluscope serve` "
                                          "database (a SQLite path or URL) instead; reports before/after by CV."),
    labelled: Optional[list[Path]] = typer.Option(None, "--labelled", help="Refit from your own labelled results "
                                                  "instead: `evaluate RECORDS -o R.jsonl` of records with sentence "
                                                  "'labels' and/or 'correct', default methods (repeatable)."),
    base: Optional[Path] = typer.Option(None, "--base", help="With --from-db or --labelled: the calibration refitted "
                                        "(default: the packaged one)."),
    graded_out: Optional[Path] = typer.Option(None, "--graded-out", help="With --from-db: also write the answers "
                                              "reviewed as a whole as graded JSONL, for `ensemble tune`."),
    ensemble_components: Optional[str] = typer.Option(None, "--ensemble-components", help="With --from-db: the "
                                                      "ensemble's components (default: the base file's, else "
                                                      "exact_match,non_contradiction,semantic_negentropy,bertscore,"
                                                      "cosine)."),
):
    """Fit the default probability: z statistics and sentence Platt scaling on WikiBio passages 0-118, answer Platt
    scaling on SAC3 NQ-Open's graded answers; or, with --labelled, refit the Platt scalings on your own labelled
    results (before/after by cross-validation); or, with --from-db, refit them from reviewers' marks and,
    with 20 or more answers reviewed as a whole, tune the response ensemble's weights on them (written into the same
    file; a server started with --calibration on it picks both up while serving)."""
    from .. import calibration

    if from_db:
        if "://" not in from_db and not Path(from_db).expanduser().is_file():  # SQLite would make an empty one
            raise ValueError(f"--from-db {from_db}: no such database file (the --db of `halluscope serve`)")
        comps = [c.strip() for c in ensemble_components.split(",") if c.strip()] if ensemble_components else None
        content, rep = calibration.refit_from_reviews(from_db, base, ensemble_components=comps)
        if graded_out:
            _write_graded(from_db, graded_out)
    elif labelled:
        content, rep = calibration.refit_from_results(labelled, base)
    if from_db or labelled:
        for line in calibration.describe_refit(rep):
            console.print(line, highlight=False)
        print(json.dumps(rep))
    else:
        try:
            counts = [int(x) for x in samples.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"--samples: expected sample counts such as 3,5,10,20, got {samples!r}") from None
        content = calibration.calibrate(data, wikibio or (), graded or (), progress=True, samples=counts)
    calibration.save(content, out)
    p = content["probability"]
    for level in ("sentence", "response"):
        console.print(f"{level}s: {calibration.describe_platt(p[level])}", highlight=False)
    for line in calibration.describe_fit_report(content.get("fit_report", {})):
        console.print(line, highlight=False)
    err.print(f"written to {out}")


def _write_graded(db: str, out: Path) -> None:
    from ..serve.db import make_engine
    from ..serve.store import graded_answers

    rows = graded_answers(make_engine(db))
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    err.print(f"{len(rows)} graded answers written to {out} (tune the ensemble: halluscope ensemble tune {out} -o "
              "ensemble.json)")
