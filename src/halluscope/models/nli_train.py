"""Training halluscope's own NLI cross-encoder: ``halluscope train-nli`` (the shipped model is made by this code).

A base encoder (default: all-MiniLM-L6-v2 from its pip package; any Hugging Face id or path) gets a 3-way head
(entailment / neutral / contradiction) and is fine-tuned on :func:`~halluscope.models.nli_data.build_mixture`:

- loss: cross-entropy for 3-way pairs; for 2-way pairs, -log p(entailment) or -log(p(neutral) + p(contradiction));
- AdamW, linear warm-up (6%) and linear decay over the planned steps; word embeddings frozen by default (faster on a
  CPU, and they carry the pre-training vocabulary knowledge), trained with ``train_embeddings``; dropout as in the
  base config;
- short pairs (``max_length`` 128) in length-grouped batches with dynamic padding; bf16 autocast where the hardware
  runs it natively, fp32 otherwise;
- unattended and resumable: the mixture is written once to ``OUT/mixture.jsonl``, a checkpoint every few minutes
  to ``OUT/checkpoint.pt``; a re-run with the same OUT continues from it (the checkpoint is removed once the
  model is exported: a re-run after that trains again);
- at the end: 3-way accuracy on an evenly spread slice of MNLI dev-matched (never trained on), and the export:
  ``OUT/model/`` (fp16 safetensors, tokenizer, config with label names) plus ``OUT/model/training.json``
  (arguments, mixture with licences, metrics, time), which the model card is written from.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import asdict
from pathlib import Path

from .nli_data import LABELS, Pair, _rows, build_mixture, mixture_summary


def _read_pairs(path: Path) -> list[Pair]:
    """Pairs from a mixture file (``.jsonl``, or ``.jsonl.gz`` / ``.jsonl.xz`` to move it to another machine: xz is
    about 40% of gzip's size: 3.4 MB for a 104k-pair mixture)."""
    return [Pair(**r) for r in _rows(path)]


def _write_pairs(path: Path, pairs: list[Pair]) -> None:
    """Pairs as a mixture file (JSON Lines; :func:`_read_pairs` reads it back), written whole or not at all."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(asdict(p)) + "\n" for p in pairs), encoding="utf-8")
    tmp.replace(path)


def _load_mixture(out: Path, data: Path, mixture: Path | None, **build) -> list[Pair]:
    """``OUT/mixture.jsonl`` where it exists (a resumed run), else the given ``mixture`` file (another run's, e.g. on
    a GPU machine without the data folder), else built from ``data`` (``build``: the arguments of
    :func:`build_mixture`); written to ``OUT/mixture.jsonl`` once."""
    path = out / "mixture.jsonl"
    if path.is_file():
        return _read_pairs(path)
    pairs = _read_pairs(mixture) if mixture else build_mixture(data, **build)
    _write_pairs(path, pairs)
    return pairs


def _batches(lengths: list[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Shuffle, sort by length inside groups of 64 batches, cut into batches, shuffle the batches."""
    idx = list(range(len(lengths)))
    rng.shuffle(idx)
    group = batch_size * 64
    out = []
    for g in range(0, len(idx), group):
        chunk = sorted(idx[g : g + group], key=lambda i: lengths[i])
        out += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(out)
    return out


def _loss(logits, labels, mean: bool = True):
    """3-way cross-entropy; label 3 (not_entailment) takes -log(p_n + p_c). ``mean=False``: one loss per pair."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    three = labels < 3
    loss = torch.zeros_like(labels, dtype=torch.float32)
    loss[three] = -logp[three, labels[three]]
    loss[~three] = -torch.logsumexp(logp[~three, 1:], dim=-1)
    return loss.mean() if mean else loss


def optimizer_step(loss, params, opt, sched) -> None:
    """One training step of every NLI trainer here: backward, gradients clipped to norm 1, AdamW and schedule steps."""
    import torch

    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)


def linear_schedule(opt, total: int):
    """Linear warm-up over the first 6% of ``total`` steps, then linear decay to 0."""
    import torch

    warm = max(1, int(0.06 * total))
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))


def _label_id(label: str) -> int:
    return LABELS.index(label) if label in LABELS else 3


def _device(device: str):
    """The torch device of ``auto`` (CUDA where torch sees a GPU, else the CPU), ``cpu`` or ``cuda``."""
    import torch

    if device not in ("auto", "cpu", "cuda") or (device == "cuda" and not torch.cuda.is_available()):
        raise ValueError(f"device '{device}': give auto, cpu, or cuda on a machine where torch sees a CUDA GPU "
                         f"(this one: {'yes' if torch.cuda.is_available() else 'no'})")
    return torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)


_RECORDED = ("base", "seed", "epochs", "batch_size", "lr", "max_length", "synthetic", "scale", "train_embeddings",
             "paired", "hard_swaps", "claims", "claim_twins", "claim_objects", "details", "variants")


def train_nli(
    data: str | Path,
    out: str | Path,
    base: str = "minilm",
    seed: int = 0,
    epochs: float = 2.0,
    batch_size: int = 32,
    lr: float = 6e-5,
    max_length: int = 128,
    synthetic: int = 15_000,
    scale: float = 1.0,
    eval_limit: int = 1000,
    checkpoint_minutes: float = 10.0,
    stop_after_minutes: float | None = None,
    threads: int | None = None,
    train_embeddings: bool = False,
    paired: bool = False,
    hard_swaps: bool = False,
    claims: int = 0,
    claim_twins: bool = False,
    claim_objects: bool = False,
    details: int = 0,
    variants: int = 0,
    mixture: str | Path | None = None,
    device: str = "auto",
    part_mb: float = 0,
    log=print,
) -> dict:
    """Train, evaluate and export; returns the training record (also in ``OUT/model/training.json``).
    ``stop_after_minutes``: stop early with a checkpoint (run again to continue). ``mixture``: train on this pairs
    file, not on a mixture built from ``data`` (then only the MNLI evaluation's). ``device``: ``auto`` (CUDA where torch
    sees a GPU, else the CPU), ``cpu`` or ``cuda``; bf16 autocast where native. ``part_mb``: :func:`write_parts`."""
    import torch

    dev = _device(device)
    out, data = Path(out), Path(data)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    if threads:
        torch.set_num_threads(threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    t0 = time.time()
    recorded = {k: v for k, v in locals().items() if k in _RECORDED}  # the settings the card's command repeats
    pairs = _load_mixture(out, data, Path(mixture) if mixture else None, synthetic=synthetic, seed=seed, scale=scale,
                          paired=paired, hard=hard_swaps, claims=claims, twins=claim_twins, objects=claim_objects,
                          details=details, variants=variants)
    log(f"mixture: {len(pairs)} pairs ({time.time() - t0:.0f} s)")
    run = _Run(out, base, pairs, batch_size, epochs, lr, max_length, train_embeddings, log, dev)
    log(f"training on {dev}{' in bf16 autocast' if run.use_bf16 else ''}")
    stopped = run.loop(seed, checkpoint_minutes, stop_after_minutes, t0)
    if stopped and run.step < run.total:
        log(f"stopped at step {run.step}/{run.total}; run again with the same --out to continue")
        return {"step": run.step, "total": run.total, "stopped": True}
    rec = export_nli(run.model, run.tok, out, pairs, dict(
        recorded, steps=run.total, device=dev.type, train_seconds=round(run.before + time.time() - t0)), data,
        eval_limit, log)
    _finish(run, out, part_mb, log)
    return rec


def _finish(run: "_Run", out: Path, part_mb: float, log) -> None:
    """A finished run's last steps: the weights in parts where asked, then the checkpoint removed (last, so that a
    failure before leaves it to continue from; its weights are in OUT/model, the optimizer state three times them)."""
    if part_mb:
        log(f"parts of at most {part_mb:g} MB: {write_parts(out / 'model', out / 'model_parts', part_mb)}")
    run.ckpt.unlink(missing_ok=True)
    log(f"finished: {out / 'model'} (the checkpoint is removed: a re-run with this --out trains again)")


class _Run:
    """One training run's state: tokenized pairs, model, optimizer and schedule, resumed from ``OUT/checkpoint.pt``
    where one exists (model, optimizer, schedule, step and the seconds of earlier runs)."""

    def __init__(self, out: Path, base: str, pairs: list[Pair], batch_size: int, epochs: float, lr: float,
                 max_length: int, train_embeddings: bool, log, device):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from .encoder import bf16_supported
        from .registry import quiet_transformers, resolve_encoder_path

        path = resolve_encoder_path(base)
        with quiet_transformers():
            self.tok = tok = AutoTokenizer.from_pretrained(path)
        enc = tok([p.premise for p in pairs], [p.hypothesis for p in pairs], truncation="longest_first",
                  max_length=max_length)
        self.ids, self.types = enc["input_ids"], enc.get("token_type_ids")
        self.labels = [_label_id(p.label) for p in pairs]
        self.lengths = [len(x) for x in self.ids]
        with quiet_transformers():
            self.model = AutoModelForSequenceClassification.from_pretrained(  # fp32 master weights (a base may be
                path, dtype=torch.float32, num_labels=3, id2label=dict(enumerate(LABELS)),  # fp16)
                label2id={k: i for i, k in enumerate(LABELS)})
        self.device = device
        self.model.to(device)
        self.use_bf16 = bf16_supported(self.device.type)
        if not train_embeddings:  # frozen: faster on a CPU; trained: single-token swaps can move the word vectors
            self.model.base_model.embeddings.word_embeddings.weight.requires_grad_(False)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(self.params, lr=lr, weight_decay=0.01)
        self.batch_size, self.log = batch_size, log
        self.steps_per_epoch = math.ceil(len(pairs) / batch_size)
        self.total = total = int(self.steps_per_epoch * epochs)
        self.sched = linear_schedule(self.opt, total)
        self.step, self.before, self.ckpt = 0, 0.0, out / "checkpoint.pt"  # before: seconds of earlier runs
        if self.ckpt.is_file():  # a checkpoint moves between devices (e.g. begun on a GPU, finished on a CPU)
            state = torch.load(self.ckpt, weights_only=False, map_location=self.device)
            self.model.load_state_dict(state["model"])
            self.opt.load_state_dict(state["opt"])
            self.sched.load_state_dict(state["sched"])
            self.step, self.before = state["step"], float(state.get("seconds", 0.0))
            log(f"resumed at step {self.step}/{total}")

    def save(self, t0: float) -> None:
        import torch

        tmp = self.ckpt.with_suffix(".tmp")
        torch.save({"model": self.model.state_dict(), "opt": self.opt.state_dict(), "sched": self.sched.state_dict(),
                    "step": self.step, "seconds": self.before + time.time() - t0}, tmp)
        tmp.replace(self.ckpt)

    def train_step(self, b: list[int]) -> tuple[float, int]:
        """One optimizer step on the pairs ``b``; returns (loss, tokens)."""
        import torch

        feats = [{"input_ids": self.ids[i], **({"token_type_ids": self.types[i]} if self.types else {})} for i in b]
        batch = self.tok.pad(feats, return_tensors="pt").to(self.device)
        y = torch.tensor([self.labels[i] for i in b], device=self.device)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.use_bf16):
            logits = self.model(**batch).logits
        loss = _loss(logits, y)
        optimizer_step(loss, self.params, self.opt, self.sched)
        self.step += 1
        return float(loss.detach()), int(batch["attention_mask"].sum())

    def loop(self, seed: int, checkpoint_minutes: float, stop_after_minutes: float | None, t0: float) -> bool:
        """Train to the planned step (an epoch's batch order is fixed by the seed and the epoch, so a resumed run
        continues the same order), a checkpoint every ``checkpoint_minutes``; returns whether it stopped early."""
        self.model.train()
        last_ckpt, t_log, ema, stopped = time.time(), time.time(), None, False
        while self.step < self.total and not stopped:
            epoch = self.step // self.steps_per_epoch
            order = _batches(self.lengths, self.batch_size, random.Random(seed * 1000 + epoch))
            for b in order[self.step - epoch * self.steps_per_epoch :]:
                if self.step >= self.total:
                    break
                lv, _ = self.train_step(b)
                ema = lv if ema is None else 0.98 * ema + 0.02 * lv
                if self.step % 50 == 0:
                    el = time.time() - t_log
                    self.log(f"step {self.step}/{self.total} epoch {self.step / self.steps_per_epoch:.2f} loss "
                             f"{ema:.3f} lr {self.sched.get_last_lr()[0]:.2e} "
                             f"{self.batch_size * 50 / max(el, 1e-9):.1f} pairs/s")
                    t_log = time.time()
                if time.time() - last_ckpt > checkpoint_minutes * 60:
                    self.save(t0)
                    last_ckpt = time.time()
                if stop_after_minutes and time.time() - t0 > stop_after_minutes * 60:
                    stopped = True
                    break
        self.save(t0)
        return stopped


def export_nli(model, tok, out: Path, pairs: list[Pair], args: dict, data: Path, eval_limit: int, log) -> dict:
    """Evaluate on MNLI dev-matched and write ``OUT/model`` (fp16 safetensors) with ``training.json``."""
    import torch

    from ..evaluation.nli_bench import evaluate_nli
    from .nli import HFNLI

    model.to("cpu").eval()  # exported and evaluated on the CPU, as users run it
    dest = out / "model"
    dest.mkdir(exist_ok=True)
    model.to(torch.float16).save_pretrained(dest, safe_serialization=True)
    tok.save_pretrained(dest)
    _plain_modes(dest)
    model.to(torch.float32)
    metrics = {}
    if eval_limit:
        nli = HFNLI(str(dest), max_length=512, runtime="torch")  # no graph of a model not yet chosen in the cache
        metrics = evaluate_nli(nli, sets=("mnli_dev_matched",), data_dir=data.parent, limit=eval_limit)
        log(f"MNLI-m 3-way accuracy ({eval_limit} pairs): {metrics['mnli_dev_matched']['accuracy_3way']:.3f}")
    record = {"args": args, "mixture": mixture_summary(pairs), "metrics": metrics,
              "labels": list(LABELS), "torch": torch.__version__}
    base_record = _base_record(args["base"])
    if base_record:  # a continuation: keep the lineage, so the card names every run that made the weights
        record["base_record"] = base_record
    (dest / "training.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    return record


def _plain_modes(folder: Path) -> None:
    """Give the files of ``folder`` the mode a plain write gives (0666 less the umask): safetensors writes its file
    0600, which another user of a shared model folder (or a package built from it) cannot read."""
    from ..io import plain_mode

    mode = plain_mode()
    for f in folder.iterdir():
        if f.is_file():
            f.chmod(mode)


def _base_record(base: str) -> dict | None:
    """The training record of a base that halluscope itself trained (a continuation run keeps it, so its card can
    name every stage that made the weights); None for a plain encoder."""
    from .registry import resolve_encoder_path

    path = Path(resolve_encoder_path(base)) / "training.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _stages(record: dict) -> list[dict]:
    """The training records from the first run (from a plain encoder) to this one."""
    chain = []
    while record:
        chain.append(record)
        record = record.get("base_record")
    return chain[::-1]


def _command(a: dict, out: str, base: str | None) -> str:
    """The ``halluscope train-nli`` command line of one stage (``base``: None for the stage's own ``--base``)."""
    base = a["base"] if base is None else base
    return (f"halluscope train-nli --out {out}" + (f" --base {base}" if base != "minilm" else "")
            + f" --seed {a['seed']} --epochs {a['epochs']:g} --lr {a['lr']:g} --batch-size {a['batch_size']} "
            f"--max-length {a['max_length']} --synthetic {a['synthetic']}"
            + (f" --scale {a['scale']:g}" if a.get("scale", 1.0) != 1.0 else "")
            + (" --train-embeddings" if a.get("train_embeddings") else "") + (" --paired" if a.get("paired") else "")
            + (" --hard-swaps" if a.get("hard_swaps") else "") + (f" --claims {a['claims']}" if a.get("claims") else "")
            + (" --claim-twins" if a.get("claim_twins") else "")
            + (" --claim-objects" if a.get("claim_objects") else "")
            + (f" --details {a['details']}" if a.get("details") else "")
            + (f" --variants {a['variants']}" if a.get("variants") else ""))


def _training_lines(stages: list[dict]) -> list[str]:
    """The card's Training section and its mixture table(s), one per stage."""
    many = len(stages) > 1
    lines = ["## Training",
             "- Reproduce" + (f" (in {len(stages)} runs, each continuing the last)" if many else "") + ", from the "
             "project's data folder `data/nli` with a fixed seed:"]
    for i, r in enumerate(stages):
        base = f"DIR{i}/model" if i else None
        lines.append(f"  {i + 1}. `{_command(r['args'], f'DIR{i + 1}', base)}`")
    for i, r in enumerate(stages):
        a = r["args"]
        lines.append(f"- {'Run ' + str(i + 1) + ': ' if many else ''}{a['steps']} steps of batch {a['batch_size']}, "
                     "AdamW with linear warm-up/decay, word embeddings "
                     + ("trained" if a.get("train_embeddings") else "frozen")
                     + f"; {a['train_seconds'] / 60:.0f} min on the machine named in EVALUATION.md "
                     f"({a.get('device', 'cpu')}).")
    lines.append("")
    for i, r in enumerate(stages):
        lines += [("## Data (the mixture, with each source's licence)" if not many else
                   f"## Data of run {i + 1} (the mixture, with each source's licence)"), "",
                  "| source | pairs | labels | licence |", "|---|---:|---|---|"]
        for name, d in sorted(r["mixture"].items(), key=lambda x: -x[1]["pairs"]):
            labs = ", ".join(f"{k} {v}" for k, v in sorted(d["labels"].items()))
            lines.append(f"| {name} | {d['pairs']} | {labs} | {d['licence']} |")
        lines.append("")
    return lines


def _distill_lines(record: dict, runs: int) -> list[str]:
    """The card's lines for the distillation stages after the ``train-nli`` runs, oldest first: on a detector's own
    inputs (``benchmarks/gpu_nli/distill_units.py``) or with a transfer set (``kd.py``, ``"kind": "transfer"``)."""
    stages = [d for d in record.get("distilled_before", []) if d] + [record["distilled"]]
    lines, units = [], None  # units: the stage that recorded the WikiBio units and stored its teacher's probabilities
    for k, d in enumerate(stages):
        before = f"run {runs}" if k == 0 else f"stage {runs + k}"
        if d.get("kind") == "transfer":
            lines += _transfer_lines(d, runs + 1 + k, before, units)
        else:
            units = runs + 1 + k
            lines += _units_lines(d, units, before)
    return lines


def _teacher_line(t: dict) -> str:
    return (f"- Teacher: `{t['base']}` fine-tuned on a GPU ({t['device']}) on {t['mixture']}: {t['recipe']}; "
            f"{t['metrics']}.")


def _units_lines(d: dict, stage: int, before: str) -> list[str]:
    return [f"## Distillation (stage {stage}, after the {before.split()[0]}{'s' if stage > 2 else ''} above)",
            _teacher_line(d["teacher"]),
            f"- Student: the model of {before}, one epoch over {d['units']} NLI inputs that a detector run asks on "
            f"WikiBio passages 0-118 ({d['units_from']}; no label of any passage is read) against the teacher's "
            f"probabilities (KL divergence), mixed one to one with {d['mixture_pairs']} of that mixture's labelled "
            f"pairs (label loss); lr {d['lr']:g}, batch {d['batch_size']}, word embeddings frozen, "
            f"{d['seconds'] / 60:.0f} min on 2 CPU cores.",
            f"- Units: {d['units_licence']}; the teacher's base: Apache-2.0.",
            f"- Reproduce on a CPU from the teacher's stored probabilities: `{d['command']}` (MIX: {d['mix']}).", ""]


def _transfer_lines(d: dict, stage: int, before: str, units: int) -> list[str]:
    return [f"## Distillation with a transfer set (stage {stage}, after {before})",
            _teacher_line(d["teacher"]),
            f"- Transfer set: {d['transfer']}; every pair under the teacher's probabilities (KL divergence), the "
            f"mixture's {d['mixture_pairs']} labelled pairs under half KL, half label loss.",
            f"- Units: the {d['units']} distinct WikiBio inputs of stage {units}'s recording that have a row in "
            f"stage {units}'s teacher's stored probabilities (`benchmarks/gpu_nli/teacher_wikibio_dev.npz`), "
            f"{d['unit_repeats']} times each, under those probabilities.",
            f"- Student: the model of {before}, {d['steps']} steps of batch {d['batch_size']} ({d['of']} planned over "
            f"{d['epochs']:g} epochs; {d['stopped']}), lr {d['lr']:g} with linear warm-up and decay over the planned "
            f"steps, word embeddings frozen, bf16 autocast, {d['seconds']:.0f} s on {d['device']} (tokenizing "
            "included).",
            f"- Reproduce (two calls on a GPU machine; `benchmarks/gpu_nli/README.md`): {d['command']}.", ""]


def model_card(record: dict, evaluation: dict | None = None) -> str:
    """The model card (MODEL_CARD.md) of an exported model, from its ``training.json`` record (with the records of
    the runs it continued) and, where given, the output of ``halluscope evaluate-nli --json``."""
    stages = _stages(record)
    a, first = record["args"], stages[0]["args"]
    distilled = record.get("distilled")
    done = [d for d in [*record.get("distilled_before", []), distilled] if d]  # distillation stages
    minutes = (sum(r["args"]["train_seconds"] for r in stages)
               + sum(d["seconds"] for d in done if d.get("kind") != "transfer")) / 60  # on CPUs
    gpu = sum(d["seconds"] for d in done if d.get("kind") == "transfer") / 60
    lines = [
        "# halluscope-nli: halluscope's own NLI cross-encoder", "",
        "## Architecture",
        f"- Base encoder: `{first['base']}` (all-MiniLM-L6-v2 for `minilm`: 6 layers, 384-d, 22.7M parameters, "
        "Apache-2.0), with a 3-way classification head on the pooled [CLS] vector.",
        "- Labels: 0 entailment, 1 neutral, 2 contradiction (`config.id2label`). Input: (premise, hypothesis), "
        f"trained at most {a['max_length']} tokens; longer premises are read in sentence windows by halluscope.",
        "- Weights: fp16 safetensors (run in fp32 by default, on the CPU through ONNX Runtime from a graph exported "
        "on first use; int8 dynamic quantization as an option).", "",
        *_training_lines(stages), *(_distill_lines(record, len(stages)) if distilled else []),
        "Never trained on (reported on): MNLI dev-matched, ANLI R1-R3, XNLI-en, SNLI test, and docnli's "
        "copies of MNLI. Non-commercial and research-only sources (ANLI, XNLI, SICK, MSRP, SciFact, HealthVer) "
        "are left out. Share-alike sources (SNLI, MNLI, FEVER, Wikipedia) are in: the weights are distributed "
        "under their terms (CC BY-SA 4.0) where those apply.", "", "## Metrics", "",
    ]
    if evaluation:
        lines += ["| set | n | 3-way accuracy | contradiction vs not |", "|---|---:|---:|---:|"]
        for name, r in evaluation.items():
            acc3 = f"{100 * r['accuracy_3way']:.1f}" if "accuracy_3way" in r else "-"
            lines.append(f"| {name} | {r['n']} | {acc3} | {100 * r['accuracy_contradiction_vs_not']:.1f} |")
        lines.append("")
        lines.append("Command: `halluscope evaluate-nli --limit N --json`: N pairs per set, evenly spread (`--limit "
                     "0`: every pair; n says how many were read). EVALUATION.md has the WikiBio and SAC3 rows.")
    else:
        for name, r in record.get("metrics", {}).items():
            lines.append(f"- {name}: 3-way accuracy {100 * r['accuracy_3way']:.1f}% ({r['n']} pairs)")
    lines += ["", "## Intended use",
              "Checking whether a short text (a sentence, a claim, an answer) is supported or contradicted by "
              "sentence-sized evidence (a few sentences of a stochastic sample, a retrieved passage window) inside "
              "halluscope's consistency methods. Not a general-purpose reasoner: it is small, English-only, and "
              f"was trained for {minutes:.0f} min ({a.get('device', 'cpu')})"
              + (f" and {gpu:.0f} min on a lent GPU, its teachers not counted" if gpu else "")
              + "; a stronger model is one `--nli ID_OR_PATH` away.", ""]
    return "\n".join(lines)


def write_parts(model_dir: Path, dest: Path, part_mb: float) -> Path:
    """The exported model in files of at most ``part_mb`` MB, to move it from a machine that only lets small files
    out (a leased GPU): ``model.safetensors`` cut into ``model.safetensors.part000``, ``.part001``, ... beside the
    small files. :func:`join_parts` (or ``cat model.safetensors.part* > model.safetensors``) puts it back."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    size = int(part_mb * 1_000_000)
    for f in model_dir.iterdir():
        if f.is_file() and f.name != "model.safetensors":
            shutil.copy2(f, dest / f.name)
    with open(model_dir / "model.safetensors", "rb") as src:
        for i, chunk in enumerate(iter(lambda: src.read(size), b"")):
            (dest / f"model.safetensors.part{i:03d}").write_bytes(chunk)
    return dest


def join_parts(folder: Path) -> bool:
    """Join ``model.safetensors.part*`` (:func:`write_parts`) back into ``model.safetensors``; False where there
    are no parts."""
    parts = sorted(folder.glob("model.safetensors.part[0-9][0-9][0-9]"))
    if not parts:
        return False
    tmp = folder / "model.safetensors.tmp"
    with open(tmp, "wb") as out:
        for p in parts:
            out.write(p.read_bytes())
    tmp.replace(folder / "model.safetensors")
    for p in parts:
        p.unlink()
    return True


def package_model(model_dir: str | Path, dest: str | Path | None = None, evaluation: dict | None = None) -> Path:
    """Copy an exported model (``OUT/model``, or ``OUT/model_parts`` joined first) into the package as the shipped
    default and write its MODEL_CARD.md."""
    import shutil

    from .registry import packaged_nli_path

    src, dest = Path(model_dir), Path(dest) if dest else packaged_nli_path()
    join_parts(src)  # a model moved in parts (``--part-mb``)
    record = json.loads((src / "training.json").read_text(encoding="utf-8"))
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file():
            shutil.copy2(f, dest / f.name)
    (dest / "MODEL_CARD.md").write_text(model_card(record, evaluation), encoding="utf-8")
    return dest
