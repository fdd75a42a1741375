"""The QA benchmarks of the tunable-ensemble paper (003 §4): load a benchmark's questions, ask them (the original
answer and the candidates) and grade the answers automatically. The pipeline run that then scores them with the
components, tunes and reports is :func:`halluscope.evaluation.response_report.run_qa`.

Benchmarks (``../shared/data/questions``; first ``limit`` questions in file order):

========  ===================================  =========  ==========================================================
name      file                                 kind       grading
========  ===================================  =========  ==========================================================
gsm8k     gsm8k_test.jsonl (gold after ####)   numeric    the number after "answer is" (else the last number) equals
svamp     svamp.json (Body + Question)         numeric    the gold within 1e-6
csqa      csqa_dev.jsonl (5 choices)           choice     the first standalone choice letter equals the gold letter
arc       arc_challenge_test.jsonl             choice     (ARC's digit labels are shown as letters A-D)
arc_easy  arc_easy_test.jsonl                  choice
nq_open   nq_open_dev.jsonl                    text       a normalized gold string (SQuAD normalization) appears as
popqa     popqa_subset.json (``test`` split)   text       whole words in the normalized answer
========  ===================================  =========  ==========================================================

Prompts are few-shot with two hand-written examples per kind (none from any benchmark), so a base model answers on
one line; every generation stops at the newline. The original answer is greedy (temperature 0), the candidates are
drawn at ``temperature`` with seeds 1..m. For closed-form answers exact match compares the extracted number or
letter; the other components compare the answer texts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.components import ResponseItem, normalize_answer

BENCHMARKS = {
    "gsm8k": ("questions/gsm8k_test.jsonl", "numeric"),
    "svamp": ("questions/svamp.json", "numeric"),
    "csqa": ("questions/csqa_dev.jsonl", "choice"),
    "arc": ("questions/arc_challenge_test.jsonl", "choice"),
    "arc_easy": ("questions/arc_easy_test.jsonl", "choice"),
    "nq_open": ("questions/nq_open_dev.jsonl", "text"),
    "popqa": ("questions/popqa_subset.json", "text"),
}
DEFAULT_BENCHMARKS = ("gsm8k", "svamp", "csqa", "arc", "nq_open", "popqa")
LETTERS = "ABCDEFGH"

FEW_SHOT = {
    "numeric": (
        "Question: Tom has 3 boxes with 4 pens in each box. He gives away 5 pens. How many pens does he have left?\n"
        "Answer: 3 * 4 = 12 and 12 - 5 = 7. The answer is 7.\n\n"
        "Question: A shirt costs 20 dollars and is sold at a discount of 25 percent. What is the new price?\n"
        "Answer: 25 percent of 20 is 5 and 20 - 5 = 15. The answer is 15.\n\n"
    ),
    "choice": (
        "Question: Which gas do plants take in from the air to make food?\nA. oxygen\nB. carbon dioxide\n"
        "C. helium\nD. nitrogen\nAnswer: B. carbon dioxide\n\n"
        "Question: Where would you put a book after reading it?\nA. oven\nB. bathtub\nC. shelf\nD. street\n"
        "E. river\nAnswer: C. shelf\n\n"
    ),
    "text": (
        "Question: who wrote the novel nineteen eighty-four\nAnswer: George Orwell\n\n"
        "Question: What is the capital of Kenya?\nAnswer: Nairobi\n\n"
    ),
}
MAX_TOKENS = {"numeric": 64, "choice": 12, "text": 16}


@dataclass
class QAQuestion:
    id: str
    benchmark: str
    kind: str  # numeric | choice | text
    question: str  # as shown to the model (with the choices for multiple choice)
    gold: list[str]
    meta: dict = field(default_factory=dict)

    def prompt(self) -> str:
        return FEW_SHOT[self.kind] + f"Question: {self.question}\nAnswer:"


def _bad(path, k, f, why):
    return ValueError(f"{path}: record {k}: field '{f}': {why}")


def _need(r: dict, path, k, *fields):
    for f in fields:
        if f not in r:
            raise _bad(path, k, f, "missing")


def _choice_question(stem: str, texts: list[str]) -> str:
    return stem.strip() + "\n" + "\n".join(f"{LETTERS[i]}. {t}" for i, t in enumerate(texts))


def load_benchmark(name: str, data_dir: str | Path | None = None, limit: int | None = None) -> list[QAQuestion]:
    from .wikibio import default_data_dir

    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; choose from {sorted(BENCHMARKS)}")
    rel, kind = BENCHMARKS[name]
    path = Path(data_dir or default_data_dir()) / rel
    if not path.is_file():
        raise FileNotFoundError(f"{name}: data not found at {path} (set --data or HALLUSCOPE_DATA)")
    if path.suffix == ".jsonl":
        rows = []
        for k, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    raise ValueError(f"{path}: line {k + 1}: not JSON ({e})") from e
    else:
        rows = json.loads(path.read_text(encoding="utf-8"))
        if name == "popqa":
            rows = rows["test"]
    rows = rows[:limit] if limit else rows
    out = []
    for k, r in enumerate(rows):
        if name == "gsm8k":
            _need(r, path, k, "question", "answer")
            gold = r["answer"].split("####")[-1].strip().replace(",", "")
            out.append(QAQuestion(f"gsm8k-{k}", name, kind, r["question"], [gold]))
        elif name == "svamp":
            _need(r, path, k, "Body", "Question", "Answer")
            out.append(QAQuestion(str(r.get("ID", k)), name, kind, f"{r['Body'].strip()} {r['Question'].strip()}",
                                  [str(r["Answer"])]))
        elif name == "csqa":
            _need(r, path, k, "question", "answerKey")
            q = r["question"]
            labels = [c["label"] for c in q["choices"]]
            if r["answerKey"] not in labels:
                raise _bad(path, k, "answerKey", f"{r['answerKey']!r} is not one of the choices {labels}")
            out.append(QAQuestion(r.get("id", str(k)), name, kind,
                                  _choice_question(q["stem"], [c["text"] for c in q["choices"]]),
                                  [LETTERS[labels.index(r["answerKey"])]]))
        elif name.startswith("arc"):
            _need(r, path, k, "question", "choices", "answerKey")
            labels = list(r["choices"]["label"])
            if r["answerKey"] not in labels:
                raise _bad(path, k, "answerKey", f"{r['answerKey']!r} is not one of the choices {labels}")
            out.append(QAQuestion(r.get("id", str(k)), name, kind, _choice_question(r["question"], r["choices"]["text"]),
                                  [LETTERS[labels.index(r["answerKey"])]]))
        elif name == "nq_open":
            _need(r, path, k, "question", "answer")
            out.append(QAQuestion(f"nq-{k}", name, kind, r["question"], list(r["answer"])))
        elif name == "popqa":
            _need(r, path, k, "input", "output")
            try:
                gold = json.loads(r["output"]) if isinstance(r["output"], str) else list(r["output"])
            except ValueError as e:
                raise _bad(path, k, "output", f"not a JSON list ({e})") from e
            out.append(QAQuestion(str(r.get("id", k)), name, kind, r["input"], [str(g) for g in gold]))
    return out


_NUM = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def extract(kind: str, text: str, n_choices: int = 5) -> str | None:
    """What a grader reads from an answer: a number (numeric), a letter (choice), or None when there is none."""
    t = (text or "").strip()
    if kind == "numeric":
        m = re.search(r"answer is\s*\$?\s*(-?\d[\d,]*(?:\.\d+)?)", t, re.IGNORECASE)
        nums = [m.group(1)] if m else _NUM.findall(t)
        if not nums:
            return None
        v = nums[-1].replace(",", "")
        try:
            f = float(v)
        except ValueError:
            return None
        return str(int(f)) if f == int(f) else str(f)
    if kind == "choice":
        m = re.search(rf"\b([{LETTERS[:n_choices]}])\b", t)
        return m.group(1) if m else None
    return normalize_answer(t)


def grade(q: QAQuestion, answer: str) -> bool:
    if q.kind == "numeric":
        x = extract("numeric", answer)
        try:
            return x is not None and abs(float(x) - float(q.gold[0])) < 1e-6
        except ValueError:
            return False
    if q.kind == "choice":
        return extract("choice", answer, n_choices(q)) == q.gold[0]
    a = f" {normalize_answer(answer)} "
    return any(g and f" {g} " in a for g in (normalize_answer(x) for x in q.gold))


def n_choices(q: QAQuestion) -> int:
    return q.question.count("\n") if q.kind == "choice" else 0


def answer_items(questions: list[QAQuestion], sampler, m: int = 5, temperature: float = 1.0, seed: int = 0,
                 progress=None) -> tuple[list[ResponseItem], list[dict]]:
    """Draw the original answer and m candidates per question (cached, resumable), grade, and build the items.
    Returns (items, problems): a question whose generations failed is reported, not guessed."""
    from ..llm.base import GenParams

    jobs = []
    for q in questions:
        jobs.append((q.prompt(), GenParams(0.0, MAX_TOKENS[q.kind], seed, 0, ("\n",)), 0))
        jobs += [(q.prompt(), GenParams(temperature, MAX_TOKENS[q.kind], seed + i, 0, ("\n",)), i) for i in range(1, m + 1)]
    gens = sampler.run(jobs, progress)
    items, problems = [], []
    for k, q in enumerate(questions):
        chunk = gens[k * (m + 1) : (k + 1) * (m + 1)]
        errs = [str(g) for g in chunk if not hasattr(g, "text")]
        if errs:
            problems.append({"record": q.id, "field": "generation", "message": "; ".join(errs)})
            continue
        texts = [g.text.strip() for g in chunk]
        meta = {"benchmark": q.benchmark, "kind": q.kind, "gold": q.gold,
                "tokens": sum(g.prompt_tokens + g.completion_tokens for g in chunk)}
        if q.kind != "text":
            meta["extracted"] = [extract(q.kind, t, n_choices(q)) for t in texts]
        items.append(ResponseItem(q.id, q.question, texts[0], texts[1:], grade(q, texts[0]), meta))
    return items, problems
