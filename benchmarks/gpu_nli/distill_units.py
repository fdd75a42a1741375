"""Distil a larger teacher into the packaged model on the task's own kind of pair (here or on a GPU): the NLI inputs
a detector run asks (a response sentence against the closest sentences of a sample, recorded by ``nli_replay.py``
on WikiBio passages 0-118 only, the passages choices are made on), with the teacher's probabilities for them
(``teacher.py``; no label of any passage is read), mixed one to one with the mixture's labelled pairs so that what
the packaged model learnt there is kept. Loss: KL divergence to the teacher on the units, train_nli's label loss on
the mixture pairs; one epoch, AdamW with linear warm-up/decay, word embeddings frozen, bf16 autocast where native.

  python benchmarks/gpu_nli/distill_units.py OUT INIT UNITS.jsonl[.xz] TEACHER.npz MIX.jsonl.xz [--extra X.jsonl] [tiny]

INIT: the model to start from (v4 started from v3: `halluscope train-nli` runs 1 and 2 of the model card);
UNITS: the pairs to distil on (``nli_replay.py record``); TEACHER: the teacher's probabilities, keyed by
:func:`pair_key` (``teacher_wikibio_dev.npz`` beside this file holds those of the MPNet teacher of 2026-11-26 for the
units of WikiBio passages 0-118, so the student is reproduced on a CPU without the GPU run); MIX: the mixture
(``halluscope train-nli``'s ``build_mixture``, written as JSON Lines); X: labelled pairs added whole, on top of the
one-to-one sample of MIX (e.g. ``detail_pairs``, the added-detail pairs v4's mixture lacked).

  python benchmarks/gpu_nli/distill_units.py --keys UNITS.jsonl[,UNITS2.jsonl.xz] TEACHER_PROBS.npz OUT.npz  # keyed

A model is its own teacher with ``--self`` ("learning without forgetting", Li and Hoiem 2016): its probabilities for
the pairs, keyed, so that a continuation on new labelled pairs (``--extra``) keeps what it gives everywhere else.
``--units`` writes such a units file: the recorded WikiBio units and a seeded sample of a mixture's pairs.
``--variants`` writes the surface-variant pairs of ``halluscope.models.nli_variants`` (labelled, for ``--extra``),
and with SYNTH and CLAIMS that many hard swap pairs beside them (synthetic minimal pairs and short claims).

  python benchmarks/gpu_nli/distill_units.py --units UNITS.jsonl MIX.jsonl.xz N OUT.jsonl
  python benchmarks/gpu_nli/distill_units.py --self MODEL UNITS.jsonl OUT.npz
  python benchmarks/gpu_nli/distill_units.py --variants DATA/nli N OUT.jsonl [SYNTH CLAIMS]"""
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, "src")
import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: E402

from halluscope.models.encoder import bf16_supported  # noqa: E402
from halluscope.models.nli_data import _rows  # noqa: E402
from halluscope.models.nli_train import (_batches, _label_id, _loss, _read_pairs, _write_pairs,  # noqa: E402
                                         linear_schedule, optimizer_step)

LR, BS, MAXLEN, SEED = 3e-5, 32, 128, 0


def pair_key(pair) -> int:
    """A 63-bit key of a (premise, hypothesis) pair: its teacher row is found without storing the text."""
    import hashlib

    return int.from_bytes(hashlib.sha1("\x00".join(pair).encode("utf-8")).digest()[:8], "big") >> 1


def keyed(units_path, probs_path, out_path) -> None:
    """The teacher's rows as a keyed file. UNITS: one or more units files joined by commas (``.jsonl`` or
    ``.jsonl.xz``); PROBS: their rows in the same order, as ``probs`` (a replay file) or ``units`` then ``units2``
    (``teacher.py``'s output for ``units.jsonl.xz`` then ``units2.jsonl.xz``)."""
    units = [tuple(x) for path in units_path.split(",") for x in _rows(Path(path))]
    z = np.load(probs_path)
    probs = z["probs"] if "probs" in z else np.concatenate([z["units"], z["units2"]])
    if len(probs) != len(units):
        raise SystemExit(f"{probs_path}: {len(probs)} rows for {len(units)} units")
    np.savez_compressed(out_path, key=np.array([pair_key(u) for u in units], np.int64), probs=probs.astype(np.float32))


def own_units(units_path, mix_path, n, out_path) -> None:
    """The recorded units and ``n`` pairs of the mixture (seeded), as one units file (premise, hypothesis)."""
    units = [tuple(x) for x in _rows(Path(units_path))]
    mix = _read_pairs(Path(mix_path))
    units += [(p.premise, p.hypothesis) for p in random.Random(SEED).sample(mix, min(int(n), len(mix)))]
    units = list(dict.fromkeys(units))
    Path(out_path).write_text("".join(json.dumps(list(u)) + "\n" for u in units), encoding="utf-8")


def own_probs(model_path, units_path, out_path) -> None:
    """The model's own fp32 probabilities for the units, keyed by :func:`pair_key` (halluscope's NLI, ONNX Runtime)."""
    from halluscope.models.nli import load_nli

    units = list(dict.fromkeys(tuple(x) for x in _rows(Path(units_path))))
    probs = load_nli(model_path, precision="fp32").probs(units)
    np.savez_compressed(out_path, key=np.array([pair_key(u) for u in units], np.int64),
                        probs=np.asarray(probs, np.float32))


def variants(data, n, out_path, synthetic=0, claims=0) -> None:
    """N variant pairs, then (where given) that many hard synthetic pairs (mostly minimal pairs) and short-claim
    pairs (the swaps of v5's mixture, as it made them: subjects swapped too, so that a continuation learns the
    variants beside the swaps, not instead of them)."""
    from halluscope.models.nli_data import claim_pairs, synthetic_pairs
    from halluscope.models.nli_variants import variant_pairs

    root = Path(data)
    pairs = variant_pairs(root, int(n), random.Random(SEED))
    if int(synthetic):
        pairs += synthetic_pairs(root, int(synthetic), random.Random(SEED + 1), paired=True, hard=True)
    if int(claims):
        pairs += claim_pairs(root, int(claims), random.Random(SEED + 2), hard=True, twins=True)
    _write_pairs(Path(out_path), pairs)


def load(units_path, teacher_path, mix_path, tiny, extra=None):
    t = np.load(teacher_path)
    row = {int(k): i for i, k in enumerate(t["key"])}
    units = list(dict.fromkeys(tuple(x) for x in _rows(Path(units_path))))
    units = [u for u in units if pair_key(u) in row]  # the teacher scored what was recorded then (a few differ)
    rng = random.Random(SEED)
    mix = _read_pairs(Path(mix_path))
    mix = rng.sample(mix, min(len(units), len(mix))) + (_read_pairs(Path(extra)) if extra else [])
    if tiny:
        units, mix = units[:64], mix[:64]
    pairs = units + [(p.premise, p.hypothesis) for p in mix]
    soft = np.concatenate([t["probs"][[row[pair_key(u)] for u in units]], np.zeros((len(mix), 3), np.float32)])
    labels = [-1] * len(units) + [_label_id(p.label) for p in mix]  # -1: learn the teacher's distribution
    return pairs, soft, labels


def main():
    modes = {"--keys": keyed, "--units": own_units, "--self": own_probs, "--variants": variants}
    if sys.argv[1] in modes:
        return modes[sys.argv[1]](*sys.argv[2:])
    args = sys.argv[1:]
    extra = args.pop(args.index("--extra") + 1) if "--extra" in args else None
    out, base, tiny = Path(args[0]), args[1], "tiny" in args[5:]
    pairs, soft, labels = load(*args[2:5], tiny, extra)
    tok = AutoTokenizer.from_pretrained(base)
    enc = tok([p for p, _ in pairs], [h for _, h in pairs], truncation="longest_first", max_length=MAXLEN)
    ids, types = enc["input_ids"], enc["token_type_ids"]
    model = AutoModelForSequenceClassification.from_pretrained(base, dtype=torch.float32)
    model.base_model.embeddings.word_embeddings.weight.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=LR, weight_decay=0.01)
    order = _batches([len(x) for x in ids], BS, random.Random(SEED))
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # the same steps on a GPU where there is one
    model.to(dev)
    sched, bf16, t0 = linear_schedule(opt, len(order)), bf16_supported(dev), time.time()
    torch.manual_seed(SEED)
    model.train()
    for step, b in enumerate(order, 1):
        batch = tok.pad([{"input_ids": ids[i], "token_type_ids": types[i]} for i in b], return_tensors="pt").to(dev)
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=bf16):
            logits = model(**batch).logits.float()
        y = torch.tensor([labels[i] for i in b], device=dev)
        t = torch.from_numpy(soft[b]).to(dev).clamp_min(1e-6)
        st = y < 0
        kl = (torch.nn.functional.kl_div(torch.log_softmax(logits[st], -1), t[st].log(), log_target=True,
                                         reduction="sum") / max(1, int(st.sum()))) if st.any() else 0.0
        ce = _loss(logits[~st], y[~st]) if (~st).any() else 0.0
        loss = (st.float().mean() * kl + (~st).float().mean() * ce)
        optimizer_step(loss, params, opt, sched)
        if step % 50 == 0:
            print(f"step {step}/{len(order)} loss {loss.item():.3f} {BS * step / (time.time() - t0):.1f} pairs/s",
                  flush=True)
    model.eval().to(torch.float16).save_pretrained(out)
    tok.save_pretrained(out)
    rec = json.loads((Path(base) / "training.json").read_text(encoding="utf-8"))
    if "distilled" in rec:  # a second distillation keeps the first's record
        rec.setdefault("distilled_before", []).append(rec.pop("distilled"))
    rec["distilled"] = {"units": labels.count(-1), "mixture_pairs": len(labels) - labels.count(-1),
                        "teacher": args[3], "extra": extra, "lr": LR, "batch_size": BS, "epochs": 1,
                        "seconds": round(time.time() - t0), "args": sys.argv[1:]}
    (out / "training.json").write_text(json.dumps(rec, indent=1), encoding="utf-8")
    print(f"done {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
