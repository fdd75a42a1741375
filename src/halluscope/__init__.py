"""halluscope: zero-resource, black-box hallucination detection for LLM answers.

    from halluscope import Detector
    results = Detector().score([{"response": "...", "samples": ["...", "..."]}])
    results.to_df()          # one row per sentence, one column per method (higher = more likely hallucinated)
"""

from .io import read_inputs, read_records, read_results, write_errors, write_results
from .pipeline import DEFAULT_METHODS, Detector, available_methods
from .types import ItemResult, Record, RecordError, Results

__all__ = [
    "DEFAULT_METHODS",
    "Detector",
    "ItemResult",
    "Record",
    "RecordError",
    "Results",
    "available_methods",
    "read_inputs",
    "read_records",
    "read_results",
    "write_errors",
    "write_results",
]
__version__ = "0.1.0"
