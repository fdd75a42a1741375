"""Combiners: several method scores in, one score out, with one scikit-learn-style interface.

Every combiner has ``fit(X, y=None)`` (``X``: one row per sentence or answer, one column per component, hallucination
scores; ``y``: 1 = hallucinated), ``transform(X)`` (its score) and, where the score is a probability,
``predict_proba(X)``; ``to_dict`` / ``from_dict`` / ``save`` / ``load``. A combiner keeps every statistic it needs
from ``fit`` (the normalization included), so a record gets the same score alone as in any batch; it never changes
its input.

- :class:`ZMean`: SelfCheckGPT-Combination (Manakul et al. 2023, §5.4): mean of z-normalized component scores;
- :class:`Logistic`: L2-regularized logistic regression on standardized components (the ``learned`` combination);
- :class:`Platt`: Platt scaling of one score into a probability (Platt 1999): p = sigmoid(a * s + b), optionally with
  the number of samples as a covariate of a and b;
- :class:`Calibrated`: a combiner followed by Platt scaling: the default probability of hallucination.

The tuned weighted ensemble of 003 (:mod:`halluscope.combine.tuned`: weights on the simplex and a threshold, fitted by
``tune``, kept in an ``EnsembleConfig``) is the combiner of response-level confidences; it is imported from its
module (it needs scipy's optimizer), and its cross-validated evaluation is in
:mod:`halluscope.evaluation.response_metrics`.
"""

from .base import Calibrated, Combiner, Logistic, Platt, ZMean, from_dict, load

__all__ = ["Calibrated", "Combiner", "Logistic", "Platt", "ZMean", "from_dict", "load"]
