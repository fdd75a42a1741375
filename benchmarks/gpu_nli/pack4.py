"""Carry a base encoder larger than a device call takes (64 MiB) to the leased GPU: its weights in 4-bit NormalFloat
(NF4: QLoRA's 16 quantiles of a normal distribution, Dettmers et al. 2023), each block of 64 values scaled by its
absolute maximum (fp16). all-mpnet-base-v2 (109M parameters, 438 MB in fp32) becomes 57 MB. Vectors (biases,
LayerNorm) and small matrices stay fp16. The unpacked weights initialise a full fine-tuning there, which learns past
the rounding (QLoRA fine-tunes on top of frozen NF4 weights and matches 16-bit fine-tuning).

  python benchmarks/gpu_nli/pack4.py pack MODEL_DIR OUT.npz     # here
  python benchmarks/gpu_nli/pack4.py unpack OUT.npz MODEL_DIR   # there: fp32 safetensors, config and tokenizer
"""
import json
import sys
from pathlib import Path

import numpy as np

NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], np.float32)
BLOCK = 64
FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def quantize(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes packed two to a byte, fp16 scales) of a float matrix whose size is a multiple of BLOCK."""
    x = w.astype(np.float32).reshape(-1, BLOCK)
    scale = np.abs(x).max(axis=1, keepdims=True).astype(np.float16)
    s = np.maximum(scale.astype(np.float32), 1e-12)
    mid = (NF4[1:] + NF4[:-1]) / 2  # nearest code = number of midpoints below
    codes = np.searchsorted(mid, x / s).astype(np.uint8).reshape(-1)
    return (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8), scale.reshape(-1)


def dequantize(packed: np.ndarray, scale: np.ndarray, shape) -> np.ndarray:
    codes = np.empty(packed.size * 2, np.uint8)
    codes[0::2], codes[1::2] = packed & 15, packed >> 4
    x = NF4[codes].reshape(-1, BLOCK) * scale.astype(np.float32).reshape(-1, 1)
    return x.reshape(shape)


def pack(src: Path, dst: Path) -> None:
    from safetensors.numpy import load_file

    arrays, meta = {}, {}
    for k, v in load_file(str(src / "model.safetensors")).items():
        if v.ndim == 2 and v.size >= 256 * BLOCK and v.size % BLOCK == 0:
            arrays[k + ".q"], arrays[k + ".s"] = quantize(v)
            meta[k] = {"shape": list(v.shape), "q": True}
        else:
            arrays[k] = v.astype(np.float16)
            meta[k] = {"shape": list(v.shape), "q": False}
    files = {f: (src / f).read_text(encoding="utf-8") for f in FILES if (src / f).is_file()}
    arrays["__meta__"] = np.frombuffer(json.dumps({"tensors": meta, "files": files}).encode(), np.uint8)
    np.savez(dst, **arrays)


def unpack(src: Path, dst: Path) -> None:
    import torch
    from safetensors.torch import save_file

    z = np.load(src)
    meta = json.loads(z["__meta__"].tobytes())
    sd = {}
    for k, m in meta["tensors"].items():
        a = dequantize(z[k + ".q"], z[k + ".s"], m["shape"]) if m["q"] else z[k].astype(np.float32)
        sd[k] = torch.from_numpy(np.ascontiguousarray(a))
    dst.mkdir(parents=True, exist_ok=True)
    save_file(sd, str(dst / "model.safetensors"), metadata={"format": "pt"})
    for f, text in meta["files"].items():
        (dst / f).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    verb, a, b = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    pack(a, b) if verb == "pack" else unpack(a, b)
