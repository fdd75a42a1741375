"""Record every NLI input a halluscope command sends to the model, or run the command on stored probabilities instead
of a model (scored elsewhere, e.g. on a GPU by device_run.py; README.md beside this file).

  NLIREC=record NLIREC_FILE=units.jsonl [NLIREC_DUMMY=1] python benchmarks/gpu_nli/nli_replay.py ARGS
  NLIREC=replay NLIREC_UNITS=units.jsonl NLIREC_FILE=probs.npz python benchmarks/gpu_nli/nli_replay.py ARGS

ARGS: halluscope's own arguments (``evaluate-nli ...``), or a script (``benchmarks/nli_swap_probe.py ...``).
record: every input that reaches the model (after windowing) is appended to the file; with NLIREC_DUMMY the model
is not run (right only where no input depends on an earlier answer: for SAC3 add a graph component, so that every
ordered answer pair is asked up front). replay: each input's row of ``probs`` (rows in the order of the units
file); an input that was not recorded is an error."""
import json
import os
import runpy
import sys
import numpy as np
from halluscope.models import nli as N

mode, path = os.environ["NLIREC"], os.environ["NLIREC_FILE"]
orig = N.HFNLI._forward
if mode == "record":
    fh = open(path, "a", encoding="utf-8")
    def fwd(self, pairs):
        for p, h in pairs:
            fh.write(json.dumps([p, h]) + "\n")
        fh.flush()
        if os.environ.get("NLIREC_DUMMY"):  # pairs that do not depend on results: no model needed
            return np.tile(np.array([0.4, 0.3, 0.3], np.float32), (len(pairs), 1))
        return orig(self, pairs)
else:
    units = [tuple(json.loads(l)) for l in open(os.environ["NLIREC_UNITS"], encoding="utf-8")]
    probs = np.load(path)["probs"]
    table = {u: probs[i] for i, u in enumerate(units)}
    def fwd(self, pairs):
        missing = [u for u in pairs if u not in table]
        if missing:
            raise KeyError(f"unit not recorded: {missing[0]!r}"[:300])
        return np.asarray([table[u] for u in pairs], dtype=np.float32)
N.HFNLI._forward = fwd
args = sys.argv[1:]
if args and args[0] == "-m":
    sys.argv = [args[1]] + args[2:]
    runpy.run_module(args[1], run_name="__main__")
elif args and args[0].endswith(".py"):
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
else:
    from halluscope.cli import main
    sys.argv = ["halluscope"] + args
    main()
