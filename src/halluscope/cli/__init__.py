"""The ``halluscope`` command line.

    halluscope score                      # the bundled examples, default methods, a coloured view
    halluscope score answers.jsonl -o results.jsonl --resume
    halluscope evaluate labelled.jsonl --methods ngram1_max,bertscore
    halluscope reproduce wikibio --methods ngram --json
    halluscope methods

Each command lives in the module of its group (score, report, calibrate, train, ensemble, reproduce,
serve); they only parse options, call the library and render.
"""

from __future__ import annotations

import sys

# registers the commands, in the order --help lists them: scoring first
from . import score, report, calibrate, serve, train, reproduce, ensemble  # noqa: F401, I001
from .common import app, example_path, say
from .render import show_results

__all__ = ["app", "example_path", "main", "show_results"]


def main() -> None:  # pragma: no cover
    """The console entry point: the app, with a server that never answered reported in one line (exit 2)."""
    from ..llm.base import UnreachableError

    try:
        app()
    except UnreachableError as e:
        say(e)
        sys.exit(2)
