"""Reading commands: ``report`` (an HTML report of results) and ``methods`` (the registry)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .common import DataOpt, _read_records_or_exit, app, console, err, fails, json_of


@app.command("report")
@fails
def report(
    results: Optional[Path] = typer.Argument(None, help="A results file (.json/.jsonl) written by score, evaluate "
                                             "-o, check -o or reproduce -o; optional with --ensemble or "
                                             "--samples-ablation."),
    out: Path = typer.Option(Path("report.html"), "--out", "-o", help="The HTML file to write."),
    with_: Optional[list[Path]] = typer.Option(None, "--with", help="Further results of the same records (merged by "
                                               "id), e.g. methods scored in another run."),
    records: Optional[Path] = typer.Option(None, "--records", help="The input records (with samples), so evidence "
                                           "can quote the sample; WikiBio ids are found in --data by themselves."),
    fig7: Optional[Path] = typer.Option(None, "--samples-ablation", help="JSON printed by `reproduce samples "
                                        "--json` (Figure 7)."),
    ensemble: Optional[Path] = typer.Option(None, "--ensemble", help="JSON of `ensemble qa` (report.json), "
                                            "`ensemble sac3 -o` or `ensemble tune/score --report`: ROC and "
                                            "accuracy-at-tau."),
    data: Optional[Path] = DataOpt,
    title: str = typer.Option("halluscope report", "--title"),
    figures: Optional[Path] = typer.Option(None, "--figures", help="Also write every figure as a PNG here."),
):
    """One self-contained HTML report (no network): highlighted passages with per-method scores and evidence, the
    papers' figures where the file has labels, and a summary of the run."""
    from ..io import merge_results, read_results
    from ..types import Results
    from ..report.html import build_report, check_inputs, samples_of

    f7, ens = (json_of(p, o) if p else None for p, o in ((fig7, "--samples-ablation"), (ensemble, "--ensemble")))
    check_inputs(f7, ens)
    if results is None and not (f7 or ens) or results is None and with_:
        raise ValueError("report: give a results file (or only --ensemble / --samples-ablation)")
    res = merge_results([read_results(results), *(read_results(p) for p in with_ or [])]) if results else Results()
    samples = samples_of(res, _read_records_or_exit(records)[0] if records else None, data)
    path = build_report(res, out, title, samples, f7, ens, source=str(results or ""), figures_dir=figures)
    err.print(f"report: {path} ({path.stat().st_size / 1e6:.1f} MB)")


@app.command("methods")
@fails
def list_methods(as_json: bool = typer.Option(False, "--json", help="Print the registry as JSON.")):
    """Every method in the registry and the combiners, by level: what each needs, bounded or raw, how its sentence
    scores reach the answer's score, formula and source."""
    from rich.text import Text

    from ..pipeline import method_rows

    rows = method_rows()
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    t = Table("method", "level", "needs", "bounded", "answer score", "formula (source)",
              caption="Every score is a hallucination score: higher = more likely hallucinated (uqlm's scorers are "
              "confidences: 1 - them). bounded: in [0, 1]; raw: unbounded (e.g. -log p).")
    for r in rows:
        t.add_row(r["name"], r["level"], ", ".join(r["needs"]), "yes" if r["bounded"] else "raw",
                  r["aggregate"] or "itself", Text.assemble(r["formula"], (f" ({r['source']})", "dim")))
    console.print(t)
