"""Numerical agreement of halluscope's unigram scores with the reference selfcheckgpt 0.1.7 run.

    .venv/bin/python benchmarks/compare_reference_ngram.py [benchmarks/results/reference_ngram.json]
"""

import json
import sys

import numpy as np

from halluscope import Detector
from halluscope.evaluation.wikibio import load_wikibio

path = sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/reference_ngram.json"
ref = json.load(open(path))["passages"]
recs = load_wikibio(passages=[p["index"] for p in ref])
res = Detector(methods="ngram1_avg,ngram1_max").score(recs)
for ours_m, ref_m in (("ngram1_avg", "avg_neg_logprob"), ("ngram1_max", "max_neg_logprob")):
    a = np.concatenate([it.sentence_scores[ours_m] for it in res])
    b = np.concatenate([p["sent_level"][ref_m] for p in ref])
    close = np.isclose(a, b, rtol=1e-6, atol=1e-9)
    print(f"{ours_m}: {close.mean() * 100:.2f}% of {len(a)} sentences equal to the reference (max |diff| "
          f"{np.abs(a - b).max():.4f}, Pearson {np.corrcoef(a, b)[0, 1]:.6f})")
