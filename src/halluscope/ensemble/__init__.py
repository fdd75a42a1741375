"""Response-level confidence: components, baselines, tuned ensemble (003), and their evaluation."""

from ..engine.components import COMPONENTS, ComponentScorer, ResponseItem, exact_match, normalize_answer
from ..combine.tuned import EnsembleConfig, best_threshold, combine, tune
from ..evaluation.response_metrics import cross_validate, evaluate

__all__ = ["COMPONENTS", "ComponentScorer", "ResponseItem", "exact_match", "normalize_answer", "EnsembleConfig",
           "best_threshold", "combine", "cross_validate", "evaluate", "tune"]
