"""benchmarks/gpu_nli/nli_replay.py, which the GPU figures of EVALUATION.md rest on: a halluscope command run on
probabilities recorded elsewhere gives what the command gives with the model itself, and an input that was not
recorded stops it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REPLAY = ROOT / "benchmarks" / "gpu_nli" / "nli_replay.py"
MODEL = str(ROOT / "src" / "halluscope" / "data" / "nli_model")


def _run(args, env=None, check=True):
    return subprocess.run([sys.executable, str(REPLAY), *args], capture_output=True, text=True, check=check,
                          cwd=ROOT, env={**os.environ, **(env or {})})


def test_replayed_probabilities_give_the_model_s_own_results(tmp_path, data_dir):
    from halluscope.models.nli import load_nli

    cmd = ["evaluate-nli", "--nli", MODEL, "--data", str(data_dir), "--limit", "8", "--sets",
           "mnli_dev_matched,anli_r1_test", "--json"]
    units = tmp_path / "units.jsonl"
    _run(cmd, {"NLIREC": "record", "NLIREC_FILE": str(units), "NLIREC_DUMMY": "1"})
    pairs = [tuple(json.loads(line)) for line in units.read_text(encoding="utf-8").splitlines()]
    assert len(pairs) == 16
    probs = tmp_path / "probs.npz"
    np.savez(probs, probs=load_nli(MODEL)._forward(pairs))  # scored here, as the GPU would
    env = {"NLIREC": "replay", "NLIREC_UNITS": str(units), "NLIREC_FILE": str(probs)}
    replayed = json.loads(_run(cmd, env).stdout)
    direct = json.loads(subprocess.run([sys.executable, "-m", "halluscope", *cmd], capture_output=True, text=True,
                                       check=True, cwd=ROOT).stdout)
    assert replayed == direct
    # an input that was not recorded is an error, not a guess
    other = [*cmd[:6], "12", *cmd[7:]]
    missed = _run(other, env, check=False)
    assert missed.returncode != 0 and "unit not recorded" in missed.stderr
