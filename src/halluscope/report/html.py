"""``halluscope report``: one self-contained HTML file (inline CSS, JS and PNG images; no network) from a results file.

- Every passage with each sentence highlighted by its hallucination score under the chosen method (a selector
  switches method). Hovering a sentence shows every method's score; clicking it opens a panel with each method's
  score, its rank among all sentences, the human label, and the method's evidence where it has one (the sample that
  contradicts it most, with its text when the samples are known; the LLM judge's answers; ...).
- With labels: precision-recall curves per method (SelfCheckGPT Figure 5), passage scores against the human scores
  (Figure 6), and the reproduction table beside the paper's numbers. With a sample-count ablation JSON (``halluscope
  reproduce samples -o``): Figure 7. With a response-level report (``halluscope ensemble qa`` / ``ensemble sac3 -o``):
  ROC curves and accuracy-at-tau (tunable-ensemble Figures 1-2) and their tables.
- A summary: methods and their descriptions, models, sample counts, run time and settings.

Colour: a bounded method's score is its own shade (0 green .. 1 red); an unbounded one is shaded by its rank among
all sentences of the file (0 = most consistent, 1 = least), so methods on different scales read alike.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..evaluation.metrics import COLUMNS
from ..types import Results
from .plots import pyplot, save

COLUMN_NAMES = {"nonfact": "NonFact", "nonfact_star": "NonFact*", "factual": "Factual", "pearson": "PCC",
                "spearman": "SCC", "prr": "PRR"}


def _png(draw) -> str:
    """Render a matplotlib figure drawn by ``draw(buf)`` into a data URI."""
    buf = io.BytesIO()
    draw(buf)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _pr_curves(res: Results, methods: list[str], buf) -> None:
    from sklearn.metrics import auc, precision_recall_curve

    from ..evaluation.wikibio import labelled_scores

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 4.2), dpi=110)
    base = None
    for m in methods:
        ls = labelled_scores(res, m)
        ok = ~np.isnan(ls.sent_scores)  # as the table: a sentence without a score is left out
        y = ls.sent_labels[ok] > 0.499
        s = np.nan_to_num(ls.sent_scores[ok], posinf=1e9, neginf=-1e9)
        p, r, _ = precision_recall_curve(y, s)
        ax.plot(r, p, lw=1.2, label=f"{m} ({100 * auc(r, p):.1f})")
        base = y.mean()
    if base is not None:
        ax.axhline(base, ls=":", c="grey", lw=0.8, label=f"random ({100 * base:.1f})")
    ax.set(xlabel="recall", ylabel="precision", title="NonFact precision-recall (Figure 5)", ylim=(0, 1.02))
    ax.legend(fontsize=7)
    save(fig, buf)


def _passage_scatter(res: Results, methods: list[str], buf) -> None:
    from scipy.stats import pearsonr

    from ..evaluation.wikibio import labelled_scores

    plt = pyplot()
    k = len(methods)
    cols = min(3, k)
    rows = (k + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 3.0 * rows), dpi=110, squeeze=False)
    for ax, m in zip(axes.flat, methods):
        ls = labelled_scores(res, m)
        ok = np.isfinite(ls.passage_scores)
        x, y = ls.passage_labels[ok], ls.passage_scores[ok]
        ax.scatter(x, y, s=8, alpha=0.6)
        r = pearsonr(x, y)[0] if ok.sum() > 2 and np.std(x) > 0 and np.std(y) > 0 else float("nan")
        ax.set(title=f"{m} (PCC {100 * r:.1f})", xlabel="human score (mean label)", ylabel="passage score")
        ax.title.set_fontsize(9)
    for ax in list(axes.flat)[k:]:
        ax.axis("off")
    fig.suptitle("Passage score against human score (Figure 6)", fontsize=10)
    save(fig, buf)


def _shades_and_ranks(res: Results, methods: list[str], infos: dict):
    """Per method, per item, per sentence: the shade in [0, 1] (the score if the method is bounded, else its rank)
    and the rank among all sentences of the file in percent (0 = most consistent); one ranking per method."""
    from scipy.stats import rankdata

    shades, ranks = {}, {}
    sizes = np.cumsum([0] + [len(it.sentences) for it in res.items])

    def split(v, digits):
        return [[round(float(x), digits) for x in v[a:b]] for a, b in zip(sizes[:-1], sizes[1:])]

    for m in methods:
        flat = np.concatenate([np.asarray(it.sentence_scores[m], float) for it in res.items]) if res.items else np.zeros(0)
        fill = np.nanmedian(flat) if np.isfinite(flat).any() else 0.0
        rank = (rankdata(np.nan_to_num(flat, nan=fill, posinf=1e12, neginf=-1e12)) - 1) / max(1, len(flat) - 1)
        bounded = bool(infos.get(m, {}).get("bounded", False)) or (flat.size and np.nanmin(flat) >= 0 and np.nanmax(flat) <= 1)
        shades[m] = split(np.clip(np.nan_to_num(flat, nan=0.5), 0, 1) if bounded else rank, 4)
        ranks[m] = split(100 * rank, 1)
    return shades, ranks


def _evidence_text(ev, samples: list[str] | None) -> str:
    """One sentence's evidence of one method as readable text."""
    if isinstance(ev, dict):
        parts = []
        for k, v in ev.items():
            if k == "sample" and isinstance(v, int):
                txt = f"sample {v}"
                if samples and 0 <= v < len(samples):
                    txt += f': "{samples[v][:400]}"'
                parts.append(txt)
            elif isinstance(v, list):
                parts.append(f"{k}: " + "; ".join(str(x)[:120] for x in v[:20]))
            else:
                parts.append(f"{k}: {v}")
        return ", ".join(parts)
    if isinstance(ev, list):
        return "; ".join(str(x)[:160] for x in ev[:20])
    return str(ev)[:600]


def _clean(x):
    from ..io import json_safe

    return json_safe(x, 5)


def _cell(x) -> str:
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return str(x)
    return "-" if x is None or not np.isfinite(x) else f"{x:.2f}"


def _table_html(rows: list[tuple[str, dict, dict | None]], cols=COLUMNS, names=COLUMN_NAMES) -> str:
    head = "".join(f"<th>{html.escape(names.get(c, c))}</th>" for c in cols)
    body = []
    for name, v, paper in rows:
        cells = "".join(f"<td>{_cell(v.get(c))}</td>" for c in cols)
        body.append(f"<tr><td>{html.escape(name)}</td>{cells}</tr>")
        if paper:
            cells = "".join(f"<td>{'-' if paper.get(c) is None else f'{paper[c]:.2f}'}</td>" for c in cols)
            body.append(f"<tr class='paper'><td>&nbsp;&nbsp;paper</td>{cells}</tr>")
    return f"<table><tr><th>method</th>{head}</tr>{''.join(body)}</table>"


def check_inputs(fig7: Any, ensemble: Any, names: tuple[str, str] = ("--samples-ablation", "--ensemble")) -> None:
    """The two optional JSON inputs of a report are what they should be, else a ValueError naming the option:
    Figure 7's ``{method: {N: figures}}`` (``reproduce samples --json``) and a response-level report, one
    (``ensemble sac3 -o``) or per benchmark (``ensemble qa``'s report.json)."""
    if fig7 is not None and not (isinstance(fig7, dict) and fig7 and all(
            isinstance(v, dict) and v and all(str(k).isdigit() and isinstance(x, dict) and {"spearman",
                                              "nonfact_star"} <= set(x) for k, x in v.items())
            for v in fig7.values())):
        raise ValueError(f"{names[0]}: not the JSON of `halluscope reproduce samples --json` "
                         "({method: {N: figures}})")
    if ensemble is None:
        return
    blocks = ensemble.get("benchmarks", {"": ensemble}) if isinstance(ensemble, dict) else None
    if not (isinstance(blocks, dict) and blocks and all(
            isinstance(r, dict) and "n" in r and ("skipped" in r or "scores" in r) for r in blocks.values())):
        raise ValueError(f"{names[1]}: not the JSON of `halluscope ensemble sac3 -o`, `ensemble tune --report`, "
                         "`ensemble score --report` or `ensemble qa`'s report.json")


def _ensemble_sections(ens: dict, figs: list[tuple[str, str]]) -> str:
    """Tables (AUROC, PRR, AURC, precision / recall / F1, ECE, Brier) and ROC / accuracy-at-tau / risk-coverage /
    reliability figures of a response-level report (QA pipeline or SAC3)."""
    from ..evaluation.response_report import FIGURE_COLUMNS, block_method, block_name, figure_rows

    blocks = ens["benchmarks"] if "benchmarks" in ens else {block_name(ens): ens}
    out = []
    for name, r in blocks.items():
        out.append(f"<h3>{html.escape(name)}</h3>")
        acc = f", accuracy {r['accuracy']:.3f}" if isinstance(r.get("accuracy"), float) else ""
        out.append(f"<p>{r.get('n')} answers{acc}; positive class = incorrect answer; {html.escape(block_method(r))}."
                   "</p>")
        if "skipped" in r:
            out.append(f"<p>Not evaluated: {html.escape(r['skipped'])}.</p>")
            continue
        rows = [(n, {"n": v.get("n", r.get("n")), **v}, None) for n, v in figure_rows(r)]
        out.append(_table_html(rows, ("n", *FIGURE_COLUMNS), {"n": "n", **FIGURE_COLUMNS}))
        out.append("<p>PRR and AURC: answers rejected by decreasing 1 - confidence (AURC lower is better); ECE and "
                   "Brier: 1 - confidence read as the probability of an incorrect answer.</p>")
        out.append(_ensemble_figures(r, name, figs))
    return "\n".join(out)


def _ensemble_figures(r: dict, name: str, figs: list) -> str:
    """ROC, accuracy-at-tau, risk-coverage and the tuned ensemble's reliability diagram of one block, where its
    confidences were kept."""
    from ..evaluation.response_report import ensemble_calibration, reliability_title, risk_coverage_curves
    from .plots import plot_accuracy_at_tau, plot_reliability, plot_risk_coverage, plot_roc

    sc = r.get("scores", {})
    if "curves" not in sc:
        return ""
    h = sc["hallucination"]
    made = [(f"ROC, {name} (ensemble paper Figure 2)", f"ROC {name}",
             _png(lambda b: plot_roc(sc["curves"], h, b, f"ROC: {name}"))),
            (f"Accuracy at tau, {name} (Figure 1)", f"accuracy at tau {name}",
             _png(lambda b: plot_accuracy_at_tau(sc["curves"], h, b, f"Accuracy at tau: {name}"))),
            (f"Risk-coverage, {name}", f"risk-coverage {name}",
             _png(lambda b: plot_risk_coverage(risk_coverage_curves(r), b, f"Risk-coverage: {name}",
                                               float(np.mean(h)))))]
    cal = ensemble_calibration(r)
    if cal and cal["n"]:
        made.append((f"Reliability of the {reliability_title(r)}, {name}", f"reliability {name}",
                     _png(lambda b: plot_reliability(cal, b, f"{reliability_title(r)}: {name}"))))
    figs += [(title, uri) for title, _, uri in made]
    imgs = "".join(f"<img alt='{html.escape(alt)}' src='{uri}'>" for _, alt, uri in made)
    return f"<div class='figs'>{imgs}</div>"


def build_report(results: Results, out: str | Path, title: str = "halluscope report",
                 samples: dict[str, list[str]] | None = None, fig7: dict | None = None, ensemble: dict | None = None,
                 source: str = "", figures_dir: str | Path | None = None) -> Path:
    """Write the HTML report of ``results`` to ``out``; returns the path. With ``figures_dir``, every figure is also
    written there as a PNG (for a README or a paper)."""
    t0 = time.perf_counter()
    methods = list(results.methods or (results.items[0].sentence_scores if results.items else []))
    sentence_methods = [m for m in methods if results.items and m in results.items[0].sentence_scores]
    primary = next((m for m in ("probability", "learned", "combination", "nli", "ngram1_max")
                    if m in sentence_methods), sentence_methods[0] if sentence_methods else "")
    figs: list[tuple[str, str]] = []
    sections = _label_sections(results, sentence_methods, figs) + _graded_section(results, methods)
    if fig7:
        from .plots import plot_samples

        f7 = _png(lambda b: plot_samples(fig7, b, "spearman"))
        f7b = _png(lambda b: plot_samples(fig7, b, "nonfact_star"))
        figs += [("Score against number of samples (Figure 7)", f7), ("NonFact* against number of samples", f7b)]
        sections.append("<h2 id='samples'>Number of samples (Figure 7)</h2><div class='figs'>"
                        f"<img alt='Figure 7 spearman' src='{f7}'><img alt='Figure 7 nonfact star' src='{f7b}'></div>")
    if ensemble:
        sections.append("<h2 id='ensemble'>Response-level detection (tunable ensemble)</h2>"
                        + _ensemble_sections(ensemble, figs))
    data = _clean({"methods": sentence_methods, "primary": primary,
                   "passages": _passages(results, sentence_methods, samples)})
    summary = _summary(results, methods, source) if results.items or source else {
        "source": "response-level figures only (no results file)"}
    summary_html = "".join(  # the methods by name (their descriptions are listed below the table)
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(', '.join(v) if k == 'methods' else _summary_cell(v))}</td>"
        "</tr>" for k, v in summary.items() if v not in (None, {}, [], ""))
    methods_html = "".join(f"<li><b>{html.escape(m)}</b>: {html.escape(d or 'no description recorded')}</li>"
                           for m, d in summary.get("methods", {}).items())
    options = "".join(f"<option value='{html.escape(m)}'{' selected' if m == primary else ''}>{html.escape(m)}</option>"
                      for m in sentence_methods)
    fig_index = "".join(f"<li>{html.escape(n)}</li>" for n, _ in figs)
    doc = _TEMPLATE.format(
        title=html.escape(title), css=_CSS, js=_JS, summary=summary_html, methods=methods_html,
        passages=_PASSAGES.format(options=options) if results.items else "",
        sections="\n".join(sections), fig_index=fig_index or "<li>none (no sentence labels in this file)</li>",
        data=json.dumps(data, ensure_ascii=False).replace("</", "<\\/"),
        built=f"{time.strftime('%Y-%m-%d %H:%M')}, {time.perf_counter() - t0:.1f} s",
    )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(doc, encoding="utf-8")
    _write_pngs(figs, figures_dir)
    return out


def _label_sections(results: Results, methods: list[str], figs: list) -> list[str]:
    """The reproduction table, PR curves and passage scatter, and the reliability diagram of the default
    probability, where every record has labels."""
    from ..evaluation.paper import paper_rows
    from ..evaluation.wikibio import evaluate_results

    if not (results.items and methods and all(it.labels is not None for it in results.items)):
        return []
    figures = evaluate_results(results, methods)
    paper = paper_rows(methods, results.settings.get("combine"))
    rows = [(m, figures[m], paper[m]) for m in methods] + [("random", figures["random"], None)]
    out = ["<h2 id='reproduction'>Reproduction against human labels</h2><p>Sentence AUC-PR (%) and "
           f"passage correlation (%) over {len(results.items)} passages; the paper's figures (SelfCheckGPT "
           "Table 3 and later tables) under each row where the method is in the paper.</p>" + _table_html(rows)]
    shown = methods[:8]
    pr = _png(lambda b: _pr_curves(results, shown, b))
    sc = _png(lambda b: _passage_scatter(results, shown[:6], b))
    figs += [("Precision-recall, NonFact (Figure 5)", pr), ("Passage vs human scores (Figure 6)", sc)]
    out.append(f"<div class='figs'><img alt='precision-recall curves' src='{pr}'>"
               f"<img alt='passage scores against human scores' src='{sc}'></div>")
    if "probability" in methods:
        from ..calibration import report as calibration_report
        from .plots import plot_reliability

        cal = calibration_report(results)["sentences"]
        rel = _png(lambda b: plot_reliability(cal, b, "default probability, sentences"))
        figs.append(("Reliability of the default probability", rel))
        out.append(f"<h2 id='calibration'>Calibration of the default probability</h2><p>{cal['n']} sentences "
                   f"(positive: minor or major inaccurate): ECE {cal['ece']:.3f}, Brier score {cal['brier']:.3f} "
                   f"({cal['bins']} equal-width bins).</p><div class='figs'><img alt='reliability diagram' "
                   f"src='{rel}'></div>")
    return out


def _graded_section(results: Results, methods: list[str]) -> list[str]:
    """Where records carry a grade (``correct``): each method's answer-level figures, as ``evaluate`` prints them
    (AUROC and PRR of its answer score for wrong answers, AURC of rejecting by it, ECE and Brier of the calibrated
    probability), and the ids of the answers graded wrong."""
    from ..evaluation.response_metrics import answer_figures
    from ..evaluation.response_report import FIGURE_COLUMNS

    figures = answer_figures(results, methods)
    if not figures:
        return []
    graded = [it for it in results.items if it.correct is not None]
    wrong = [str(it.id) for it in graded if not it.correct]
    cols = ("n", "wrong", "auroc", "prr", "aurc", "ece", "brier")
    return ["<h2 id='graded'>Graded answers</h2>"
            f"<p>{len(graded)} answers graded as a whole, {len(wrong)} wrong (the positive class). AUROC and PRR of "
            "each method's answer score for wrong answers (higher is better; 0.5 and 0 are random), AURC of rejecting "
            "answers by it (lower is better), ECE and Brier of the calibrated probability (lower is better); n: the "
            "graded answers with a score.</p>" + _table_html([(m, f, None) for m, f in figures.items()], cols, FIGURE_COLUMNS)
            + f"<p>Graded wrong: {html.escape(', '.join(wrong)) or 'none'}.</p>"]


def _passages(results: Results, methods: list[str], samples: dict | None) -> list[dict]:
    infos = results.settings.get("methods", {})
    shades, ranks = _shades_and_ranks(results, methods, infos)
    out = []
    for k, it in enumerate(results.items):
        smp = (samples or {}).get(it.id)
        ev = {m: [_evidence_text(e, smp) for e in v] for m, v in it.evidence.items()
              if isinstance(v, list) and len(v) == len(it.sentences)}
        out.append({"id": it.id, "prompt": it.prompt, "sentences": it.sentences, "labels": it.labels,
                    "correct": it.correct,
                    "scores": {m: it.sentence_scores[m] for m in methods}, "passage": it.passage_scores,
                    "shade": {m: shades[m][k] for m in methods}, "rank": {m: ranks[m][k] for m in ranks},
                    "evidence": ev, **_claims_data(it, smp)})
    return out


def _claims_data(it, samples: list[str] | None) -> dict:
    """A record's claims for the sentence panel: text, sentence index, score per method, evidence as text; and the
    mean over the claims per method. Empty when the record was scored without claims."""
    if it.claims is None:
        return {}
    claims = [{"text": c.text, "sentence": c.sentence,
               "scores": {m: v[k] for m, v in it.claim_scores.items()},
               "evidence": {m: _evidence_text(v[k], samples) for m, v in it.claim_evidence.items()
                            if k < len(v) and v[k] is not None}}
              for k, c in enumerate(it.claims)]
    return {"claims": claims, "claims_passage": it.claim_passage_scores}


def _summary(results: Results, methods: list[str], source: str) -> dict:
    """The run at a glance: what was scored, with which models and settings, and how long it took."""
    from ..pipeline import method_summary

    st = results.settings
    infos = st.get("methods", {})
    models = {k: st.get(k) for k in ("encoder", "nli", "layer", "precision") if st.get(k) is not None}
    if st.get("llm"):
        models["llm"] = st["llm"].get("backend")
    return {
        "source": source, "passages": len(results.items), "sentences": sum(len(it.sentences) for it in results.items),
        "methods": {m: infos.get(m, {}).get("description") or method_summary(m) for m in methods},
        "models": ", ".join(f"{k}: {v}" for k, v in models.items()),
        "samples per passage": ", ".join(str(n) for n in sorted({it.num_samples for it in results.items})),
        "run time": f"{st['seconds']:.1f} s" if st.get("seconds") is not None else None,
        "scorer time": ", ".join(f"{k} {v:.1f} s" for k, v in st.get("scorer_seconds", {}).items()),
        "flagged (default probability >= 0.5)": _flag_count(results),
        "errors": len(results.errors),
    }


def _flag_count(results: Results) -> str | None:
    flagged = [it for it in results.items if it.flags]
    if not flagged:
        return None
    n = sum(it.flags["response"] for it in flagged)
    s = sum(sum(it.flags["sentences"]) for it in flagged)
    return f"{n} of {len(flagged)} answers, {s} of {sum(len(it.sentences) for it in flagged)} sentences"


def _summary_cell(v) -> str:
    return v if isinstance(v, str) else json.dumps(_clean(v), ensure_ascii=False)


# the file names ``--figures`` gives the paper's figures (README links them); any other figure is named by its title
FIGURE_FILES = {"Precision-recall, NonFact (Figure 5)": "fig5_precision_recall",
                "Passage vs human scores (Figure 6)": "fig6_passage_vs_human",
                "Score against number of samples (Figure 7)": "fig7_score_vs_samples",
                "NonFact* against number of samples": "fig8_nonfact_star_vs_samples"}


def figure_file(title: str) -> str:
    """The PNG name of a figure of the report: :data:`FIGURE_FILES`, else its title in lower case and underscores."""
    return FIGURE_FILES.get(title, re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")) + ".png"


def _write_pngs(figs: list[tuple[str, str]], folder: str | Path | None) -> None:
    if not folder:
        return
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    for name, uri in figs:
        (d / figure_file(name)).write_bytes(base64.b64decode(uri.split(",", 1)[1]))


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#263238;color:#fff;padding:12px 20px}header h1{margin:0;font-size:20px}
main{max-width:1100px;margin:0 auto;padding:10px 20px 80px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}tr.paper td{color:#888;font-style:italic}
.figs{display:flex;flex-wrap:wrap;gap:10px}.figs img{max-width:100%;border:1px solid #ddd;background:#fff}
.passage{background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:10px 14px;margin:10px 0}
.passage h4{margin:0 0 6px;font-size:13px;color:#555}.passage .pscore{float:right;font-weight:normal;color:#777}
.s{cursor:pointer;border-radius:3px;padding:1px 0;transition:outline .1s}.s:hover{outline:2px solid #333}
.s.sel{outline:2px solid #1565c0}.lab{font-size:10px;vertical-align:super;color:#555;margin-left:1px}
#panel{position:fixed;right:16px;bottom:16px;width:380px;max-height:55vh;overflow:auto;background:#fff;
border:1px solid #999;border-radius:6px;box-shadow:0 2px 10px rgba(0,0,0,.2);padding:10px 12px;display:none;font-size:13px;z-index:10}
.claim{margin:4px 0;padding:3px 0;border-top:1px solid #eee}#panel table{width:100%}#panel td{text-align:left;vertical-align:top}
.controls{position:sticky;top:0;background:#fafafa;padding:8px 0;border-bottom:1px solid #ddd;z-index:2}
.legend span{display:inline-block;width:18px;height:12px;margin:0 1px;vertical-align:middle}
"""

_JS = r"""
const D = JSON.parse(document.getElementById('data').textContent);
function colour(x){ x = Math.max(0, Math.min(1, x)); const h = 120 * (1 - x); return `hsl(${h},75%,${88 - 18 * x}%)`; }
function fmt(v){ return (v === null || v === undefined) ? '-' : (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(3)); }
function render(){
  const m = document.getElementById('method').value, root = document.getElementById('passages');
  const minShade = parseFloat(document.getElementById('filter').value);
  root.innerHTML = '';
  let shown = 0;
  D.passages.forEach((p, k) => {
    const top = Math.max(...p.shade[m]);
    if (top < minShade) return;
    shown++;
    const div = document.createElement('div'); div.className = 'passage'; div.id = 'p' + k;
    const h = document.createElement('h4');
    h.textContent = p.id + (p.prompt ? ' \u2014 ' + p.prompt : '');
    const ps = document.createElement('span'); ps.className = 'pscore';
    ps.textContent = m + ' passage ' + fmt(p.passage[m]); h.appendChild(ps); div.appendChild(h);
    p.sentences.forEach((s, i) => {
      const sp = document.createElement('span'); sp.className = 's'; sp.textContent = s;
      sp.style.background = colour(p.shade[m][i]);
      sp.title = D.methods.map(x => x + ': ' + fmt(p.scores[x][i])).join('\n');
      sp.dataset.p = k; sp.dataset.i = i; sp.addEventListener('click', show);
      div.appendChild(sp);
      if (p.labels) { const l = document.createElement('span'); l.className = 'lab';
        l.textContent = ['accurate', 'minor', 'major'][Math.round(p.labels[i] * 2)] || p.labels[i]; div.appendChild(l); }
      div.appendChild(document.createTextNode(' '));
    });
    root.appendChild(div);
  });
  document.getElementById('count').textContent = shown + ' of ' + D.passages.length + ' passages';
}
function show(ev){
  document.querySelectorAll('.s.sel').forEach(e => e.classList.remove('sel'));
  const t = ev.currentTarget; t.classList.add('sel');
  const p = D.passages[+t.dataset.p], i = +t.dataset.i, panel = document.getElementById('panel');
  let h = '<b>' + p.id + ', sentence ' + (i + 1) + '</b>';
  if (p.labels) h += ' &middot; human label ' + p.labels[i];
  h += '<p>' + t.textContent.replace(/</g, '&lt;') + '</p><table><tr><th>method</th><th>score</th><th>rank %</th></tr>';
  D.methods.forEach(x => { h += '<tr><td>' + x + '</td><td>' + fmt(p.scores[x][i]) + '</td><td>' +
    (p.rank[x] ? p.rank[x][i] : '-') + '</td></tr>';
    if (p.evidence[x]) h += '<tr><td colspan=3 style="color:#555">evidence: ' + String(p.evidence[x][i]).replace(/</g, '&lt;') + '</td></tr>'; });
  h += '</table>' + claimsHtml(p, i);
  panel.innerHTML = h + '<p style="color:#888">click another sentence, or Esc to close</p>';
  panel.style.display = 'block';
}
function claimsHtml(p, i){
  if (!p.claims) return '';
  const esc = x => String(x).replace(/</g, '&lt;');
  const mine = p.claims.filter(c => c.sentence === i);
  let h = '<p><b>claims</b> (' + mine.length + ' of this sentence; mean over the answer\'s claims: ' +
    Object.entries(p.claims_passage).map(([m, v]) => m + ' ' + fmt(v)).join(', ') + ')</p>';
  mine.forEach(c => {
    h += '<div class="claim"><span style="background:' + colour(c.scores[document.getElementById('method').value] ?? 0) + '">' + esc(c.text) +
      '</span><br><small>' + Object.entries(c.scores).map(([m, v]) => m + ' ' + fmt(v)).join(' &middot; ');
    Object.entries(c.evidence).forEach(([m, e]) => { h += '<br>' + m + ' evidence: ' + esc(e); });
    h += '</small></div>';
  });
  return h;
}
if (document.getElementById('passages')) {  // a report of response-level figures alone has no passages
  document.addEventListener('keydown', e => { if (e.key === 'Escape') document.getElementById('panel').style.display = 'none'; });
  document.getElementById('method').addEventListener('change', render);
  document.getElementById('filter').addEventListener('input', render);
  render();
}
"""

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{title}</title><style>{css}</style></head>
<body><header><h1>{title}</h1></header><main>
<h2 id="summary">Summary</h2><table class="summary">{summary}</table>
<ul class="methods">{methods}</ul>
<p>Figures in this report:</p><ul>{fig_index}</ul>
{sections}
{passages}
<p style="color:#888">built {built} by halluscope; self-contained (no network).</p>
</main>
<script id="data" type="application/json">{data}</script>
<script>{js}</script>
</body></html>
"""

_PASSAGES = """<h2 id="highlighted">Passages</h2>
<div class="controls">colour by <select id="method">{options}</select>
&nbsp; show passages whose worst sentence is at least <input id="filter" type="range" min="0" max="1" step="0.05" value="0">
<span id="count"></span> &nbsp; <span class="legend">consistent <span style="background:hsl(120,75%,88%)"></span><span
style="background:hsl(60,75%,79%)"></span><span style="background:hsl(0,75%,70%)"></span> likely hallucinated</span></div>
<div id="passages"></div>
<div id="panel"></div>"""


def samples_of(results, records=None, data=None) -> dict[str, list[str]]:
    """The samples of each scored record, so evidence can quote them: from the given records, else from WikiBio
    (found by id in ``data``) when the data is there, else none."""
    if records is not None:
        return {r.id: list(r.samples) for r in records}
    from ..evaluation.wikibio import load_wikibio

    ids = {it.id for it in results.items}
    if not ids:
        return {}
    try:
        return {r.id: list(r.samples) for r in load_wikibio(data) if r.id in ids}
    except OSError:
        return {}
