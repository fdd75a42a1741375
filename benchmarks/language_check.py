"""How often `halluscope.text.looks_english` calls an English text another language's, on the shared data.

    python benchmarks/language_check.py [--data ../shared/data]

Reads every WikiBio GPT-3 response and sample, every SAC3 NQ-Open answer and sample, the packaged local model's QA
answers and samples (`reports/qa_local/items_*.jsonl`), and every text field over 40 characters of MNLI-matched and
SummEdits (`nli/`), and prints how many of each source the check flags (each flagged text is printed too), then
the hand-written texts of other languages it should flag. Writes `benchmarks/results/language_check.json`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from halluscope.evaluation.wikibio import default_data_dir
from halluscope.text import looks_english

OTHER_LANGUAGES = {
    "de": "Die Erstbesteigung erfolgte am 27. Aug. 1820 durch Josef Naus. Der Berg ist 2962 Meter hoch und liegt "
          "an der Grenze zu Österreich.",
    "fr": "La tour Eiffel a été construite par Gustave Eiffel pour l'Exposition universelle de 1889 à Paris. Elle "
          "mesure 330 mètres.",
    "es": "La Torre Eiffel fue construida por Gustave Eiffel para la Exposición Universal de 1889 en París.",
    "it": "Il Colosseo è un anfiteatro romano costruito nel I secolo. Si trova nel centro di Roma.",
    "pt": "A Torre Eiffel foi construída por Gustave Eiffel para a Exposição Universal de 1889 em Paris.",
    "nl": "De Nachtwacht is een schilderij van Rembrandt uit 1642 en het hangt nu in een zaal van het museum.",
    "zh": "长城全长约21196公里。明长城是保存最完好的部分。",
    "ru": "Москва — столица России. Она основана в 1147 году.",
}


def _texts(data: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    wb = json.loads((data / "wikibio" / "wiki_bio_gpt3_hallucination.json").read_text())
    out["WikiBio responses and samples"] = [r["gpt3_text"] for r in wb] + [s for r in wb
                                                                          for s in r["gpt3_text_samples"]]
    sac = json.loads((data / "sac3_nq_open" / "nq_open_250_eval_labeled-SC.json").read_text())
    flat = [x for r in sac for x in [*r["generated_answer"], *r["self_SC"]]]
    out["SAC3 NQ-Open answers and samples"] = [x if isinstance(x, str) else " ".join(map(str, x)) for x in flat]
    qa = []
    for f in sorted(Path("reports/qa_local").glob("items_*.jsonl")):
        for line in f.read_text().splitlines():
            d = json.loads(line)
            qa += [t for t in [d.get("response"), *d.get("samples", [])] if isinstance(t, str)]
    out["packaged model's QA answers and samples"] = qa
    for name, folder in (("MNLI-matched", "mnli_dev_matched"), ("SummEdits", "summedits")):
        rows = []
        for f in sorted((data / "nli" / folder).glob("*")):
            if f.suffix == ".jsonl":
                rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
            elif f.suffix == ".parquet":
                rows += pd.read_parquet(f).to_dict("records")
        out[f"{name} texts over 40 characters"] = [v for r in rows for v in r.values()
                                                   if isinstance(v, str) and len(v) > 40]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=None)
    data = ap.parse_args().data or default_data_dir()
    result = {"english": {}, "other_languages": {}}
    for source, texts in _texts(data).items():
        flagged = [t for t in texts if not looks_english(t)]
        result["english"][source] = {"texts": len(texts), "flagged": len(flagged)}
        print(f"{source}: {len(flagged)} of {len(texts)} flagged")
        for t in flagged:
            print("   ", repr(t[:160]))
    for lang, text in OTHER_LANGUAGES.items():
        result["other_languages"][lang] = not looks_english(text)
    print("other languages flagged:", ", ".join(k for k, v in result["other_languages"].items() if v) or "none",
          "| not flagged:", ", ".join(k for k, v in result["other_languages"].items() if not v) or "none")
    out = Path(__file__).with_name("results") / "language_check.json"
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
