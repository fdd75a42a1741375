"""The CPU a benchmark ran on, described one way for every benchmark script.

Cloud CPUs often report only a family name ("AMD EPYC"), and two machines of that name ran the default detector in
7.1 and 13-14 minutes here, their ONNX Runtime fp32 matrix multiply 2.5-3.4x apart (BENCHMARKS.md, "Two AMD EPYC
machines"). So the description holds /proc/cpuinfo's family, model and stepping numbers and the vector flags that
decide which kernels the models get, beside the name.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_bf16", "amx_int8", "amx_tile")


def cpu_info() -> dict:
    """``model`` (the name), ``family`` / ``model_number`` / ``stepping`` (as /proc/cpuinfo gives them), ``flags``
    (those of :data:`FLAGS` the CPU has) and ``cores`` (the cores this process may use)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"model": platform.processor() or "?", "flags": [], "cores": os.cpu_count()}

    def field(name: str) -> str | None:
        m = re.search(rf"^{name}\s*:\s*(.*)$", text, re.M)
        return m.group(1).strip() if m else None

    have = set((field("flags") or "").split())
    return {"model": field("model name") or "?", "family": field("cpu family"), "model_number": field("model"),
            "stepping": field("stepping"), "flags": [f for f in FLAGS if f in have],
            "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()}


def cpu_name(info: dict | None = None) -> str:
    """One line for a table's caption: 'AMD EPYC (family 25, model 17; avx2, avx512f, ...; 2 cores)'."""
    c = info or cpu_info()
    ids = f"family {c['family']}, model {c['model_number']}; " if c.get("family") else ""
    return f"{c['model']} ({ids}{', '.join(c['flags']) or 'no AVX2'}; {c['cores']} cores)"


if __name__ == "__main__":
    print(cpu_name())
