"""The SelfCheckGPT paper's own figures (Manakul et al. 2023, WikiBio GPT-3), keyed by our method names.

Columns: sentence-level AUC-PR NonFact, NonFact*, Factual; passage-level Pearson, Spearman (all in percent).
"""

from __future__ import annotations

COLS = ("nonfact", "nonfact_star", "factual", "pearson", "spearman")


def _row(*v: float) -> dict[str, float]:
    return dict(zip(COLS, v))


# Table 3 (main results) and Table 6 (n-gram variants).
TABLE3 = {
    "random": _row(72.96, 29.72, 27.04, float("nan"), float("nan")),
    "gpt3_avg_logp": _row(83.21, 38.89, 53.97, 57.04, 53.93),
    "gpt3_avg_entropy": _row(80.73, 37.09, 52.07, 55.52, 50.87),
    "gpt3_max_logp": _row(87.51, 35.88, 50.46, 57.83, 55.69),
    "gpt3_max_entropy": _row(85.75, 32.43, 50.27, 52.48, 49.55),
    "proxy_llama30b_avg_logp": _row(75.43, 30.32, 41.29, 21.72, 20.20),
    "proxy_llama30b_avg_entropy": _row(80.80, 39.01, 42.97, 33.80, 39.49),
    "proxy_llama30b_max_logp": _row(74.01, 27.14, 31.08, -22.83, -22.71),
    "proxy_llama30b_max_entropy": _row(80.92, 37.32, 37.90, 35.57, 38.94),
    "bertscore": _row(81.96, 45.96, 44.23, 58.18, 55.90),
    "qa": _row(84.26, 40.06, 48.14, 61.07, 59.29),
    "ngram1_max": _row(85.63, 41.04, 58.47, 64.71, 64.91),
    "combination": _row(87.33, 44.37, 61.83, 69.05, 67.77),
}

# SelfCheck-NLI (DeBERTa-v3-large, MNLI) and Prompt (GPT-3.5) as published in the SelfCheckGPT repository README
# (later version of the paper); included for comparison with our NLI row.
LATER_VERSION = {
    "nli": _row(92.50, 45.17, 66.08, 74.14, 73.78),
    "prompt": _row(93.42, 53.19, 67.09, 78.32, 78.30),
}

TABLE6 = {
    "ngram1_avg": _row(81.52, 40.33, 41.76, 40.68, 39.22),
    "ngram2_avg": _row(82.94, 44.38, 52.81, 58.84, 58.11),
    "ngram3_avg": _row(83.56, 44.64, 53.99, 62.21, 63.00),
    "ngram4_avg": _row(83.80, 43.55, 54.25, 61.98, 63.64),
    "ngram5_avg": _row(83.45, 42.31, 53.98, 60.68, 62.96),
    "ngram1_max": _row(85.63, 41.04, 58.47, 64.71, 64.91),
    "ngram2_max": _row(85.26, 39.29, 58.29, 62.48, 66.04),
    "ngram3_max": _row(84.97, 37.10, 57.08, 57.34, 60.49),
    "ngram4_max": _row(84.49, 36.37, 55.96, 55.77, 57.25),
    "ngram5_max": _row(84.12, 36.19, 54.89, 54.84, 55.97),
}

# Table 4: the WikiBio reference passage in place of the samples.
TABLE4 = {
    "bertscore": {"samples": TABLE3["bertscore"], "reference": _row(81.32, 40.62, 49.15, 58.71, 55.80)},
    "qa": {"samples": TABLE3["qa"], "reference": _row(84.18, 45.40, 52.03, 57.26, 53.62)},
    "ngram1_max": {"samples": TABLE3["ngram1_max"], "reference": _row(80.43, 31.47, 40.53, 28.67, 26.70)},
}


# our grey-box / proxy method names -> the paper's rows (GPT-3's own probabilities; LLaMA-30B as the proxy)
_GREY = {"avg_nlp": "avg_logp", "max_nlp": "max_logp", "avg_entropy": "avg_entropy", "max_entropy": "max_entropy"}
ALIASES = {f"greybox_{k}": f"gpt3_{v}" for k, v in _GREY.items()} | {
    f"proxy_{k}": f"proxy_llama30b_{v}" for k, v in _GREY.items()
}


def paper_rows(methods, combine=None) -> dict[str, dict[str, float] | None]:
    """:func:`paper_row` of each method, where the row is the same method: the paper's Combination (§5.4: the
    normalized scores of BERTScore, QA and unigram (max)) only beside a ``combination`` of those three components
    (``combine``: the run's, ``settings['combine']``; unknown: no paper row)."""
    c = set(combine or ())
    papers = len(c) == 3 and {"bertscore", "ngram1_max"} <= c and any(m.startswith("qa_") for m in c)
    return {m: None if m == "combination" and not papers else paper_row(m) for m in methods}


def paper_row(method: str) -> dict[str, float] | None:
    """The paper's figures for one of our method names, or None when the paper has no such row."""
    method = ALIASES.get(method, method)
    return TABLE6.get(method) or TABLE3.get(method) or LATER_VERSION.get(method)
