"""Where halluscope keeps what it caches for a user: one folder, never the working directory."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """``$HALLUSCOPE_CACHE_DIR`` where set, else ``$XDG_CACHE_HOME/halluscope``, else ``~/.cache/halluscope``: the
    generation cache (unless ``$HALLUSCOPE_CACHE`` names its file) and the exported ONNX graphs (NLI, encoder) live
    under it."""
    if os.environ.get("HALLUSCOPE_CACHE_DIR"):
        return Path(os.environ["HALLUSCOPE_CACHE_DIR"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "halluscope"
