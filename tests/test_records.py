"""Input validation: every bad record gets an error naming it and the field; the good ones are still scored."""

import json
import re

import pytest

from halluscope import Detector, Record, RecordError, read_records
from halluscope.io import read_results, write_results

GOOD = {"id": "ok", "response": "Paris is the capital of France. It is in Europe.",
        "samples": ["Paris is the capital of France.", "The capital of France is Paris, in Europe."]}


def _write_jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_bad_records_are_named_and_good_ones_kept(tmp_path):
    rows = [
        GOOD,
        {"id": "no-response", "samples": ["a b c"]},
        {"id": "samples-str", "response": "A sentence.", "samples": "not a list"},
        {"id": "empty", "response": "   ", "samples": ["x"]},
        {"id": "labels", "response": "One. Two.", "samples": ["x y"], "sentences": ["One.", "Two."], "labels": [1]},
        {"id": "bad-label", "response": "One.", "samples": ["x"], "sentences": ["One."], "labels": ["wrong"]},
        "{this is not json",
        {**GOOD, "id": "ok2"},
    ]
    recs, errs = read_records(_write_jsonl(tmp_path / "in.jsonl", rows))
    assert [r.id for r in recs] == ["ok", "ok2"]
    by = {e.record: e.field for e in errs}
    assert by["no-response"] == "response"
    assert by["samples-str"] == "samples"
    assert by["empty"] == "response"
    assert by["labels"] == "labels"
    assert by["bad-label"] == "labels[0]"
    assert by["line 7"] == "<json>"
    msg = str(next(e for e in errs if e.record == "labels"))
    assert "labels" in msg and "1 labels for 2 sentences" in msg

    res = Detector(methods="ngram1_max").score(recs)
    assert [it.id for it in res] == ["ok", "ok2"]


def test_detector_scores_valid_dicts_and_reports_invalid_ones():
    res = Detector(methods="ngram1_max").score([GOOD, {"id": "bad", "response": "x", "samples": [3]}])
    assert len(res) == 1 and res.items[0].id == "ok"
    assert res.errors[0].record == "bad" and res.errors[0].field == "samples[0]"


def test_unreadable_file_and_unknown_format(tmp_path):
    with pytest.raises(RecordError, match="does not exist"):
        read_records(tmp_path / "missing.jsonl")
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(RecordError, match="unknown file type"):
        read_records(tmp_path / "x.txt")
    (tmp_path / "broken.json").write_text("[{")
    with pytest.raises(RecordError, match="not valid JSON"):
        read_records(tmp_path / "broken.json")
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00garbage")
    recs, errs = read_records(tmp_path / "bin.jsonl")  # a line of binary is that line's error, not the file's
    assert not recs and errs[0].record == "line 1" and "UTF-8" in errs[0].message


def test_csv_and_json_inputs(tmp_path):
    import csv

    p = tmp_path / "in.csv"
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "response", "sample_1", "sample_2"])
        w.writerow(["c1", GOOD["response"], *GOOD["samples"]])
        w.writerow(["c2", "", "x", "y"])
    recs, errs = read_records(p)
    assert [r.id for r in recs] == ["c1"] and recs[0].samples == GOOD["samples"]
    assert errs[0].record == "c2" and errs[0].field == "response"

    q = tmp_path / "in.json"
    q.write_text(json.dumps({"records": [GOOD]}))
    recs, errs = read_records(q)
    assert recs[0].response == GOOD["response"] and not errs


def test_parquet_input_reads_as_its_jsonl_does(tmp_path):
    """A Parquet file (list columns come back as arrays) gives the records the same lines of JSONL give, for the
    local engine as for Ray's shards; a damaged or empty one is an error of the file."""
    import pandas as pd

    from halluscope.cli import example_path

    rows = [json.loads(x) for x in example_path().read_text().splitlines()]
    pd.DataFrame(rows + [{**rows[0], "id": "bad", "samples": None}]).to_parquet(tmp_path / "in.parquet", index=False)
    recs, errs = read_records(tmp_path / "in.parquet")
    want, _ = read_records(example_path())
    assert [r.to_dict() for r in recs] == [r.to_dict() for r in want]
    assert [(e.record, e.field) for e in errs] == [("bad", "samples")]
    (tmp_path / "cut.parquet").write_bytes((tmp_path / "in.parquet").read_bytes()[:200])
    with pytest.raises(RecordError, match="cannot read Parquet"):
        read_records(tmp_path / "cut.parquet")
    pd.DataFrame({"response": []}).to_parquet(tmp_path / "empty.parquet")
    with pytest.raises(RecordError, match="no records"):
        read_records(tmp_path / "empty.parquet")


def test_wikibio_labels_are_mapped(wikibio):
    assert len(wikibio) == 238
    assert sum(len(r.sentences) for r in wikibio) == 1908
    flat = [x for r in wikibio for x in r.labels]
    assert (flat.count(1.0), flat.count(0.5), flat.count(0.0)) == (761, 631, 516)
    assert all(len(r.samples) == 20 for r in wikibio)
    assert wikibio[0].prompt.startswith("This is a passage from Wikipedia about")


def test_results_export_roundtrip(tmp_path, wikibio):
    res = Detector(methods="ngram1_max,ngram2_avg").score(wikibio[:3])
    df = res.to_df()
    assert list(df.columns[:4]) == ["id", "sentence_index", "sentence", "label"]
    assert len(df) == sum(len(r.sentences) for r in wikibio[:3])
    assert len(res.to_df("passage")) == 3
    for suffix in (".json", ".jsonl"):
        back = read_results(write_results(res, tmp_path / f"r{suffix}"))
        assert back.items[1].sentence_scores == res.items[1].sentence_scores
    import pandas as pd

    csv = pd.read_csv(write_results(res, tmp_path / "r.csv"))
    assert csv["ngram1_max"].tolist() == pytest.approx(df["ngram1_max"].tolist())
    # each sentence row carries its answer's scores (a CSV user had no answer-level verdict)
    by_id = {it.id: it.passage_scores["ngram2_avg"] for it in res.items}
    assert csv["answer_ngram2_avg"].tolist() == pytest.approx([by_id[str(i)] for i in csv["id"]])
    assert (csv["num_samples"] == 20).all()
    pq = pd.read_parquet(write_results(res, tmp_path / "r.parquet"))
    assert pq.shape == (len(df), len(df.columns) + 3) and list(pq.columns) == list(csv.columns)
    # written whole through a temporary file, with the mode a plain write gives (it was mkstemp's 0600): the
    # umask's for a new file, the earlier file's for one replaced; no temporary file left
    import os

    old_umask = os.umask(0o022)
    try:
        assert oct(write_results(res, tmp_path / "new.csv").stat().st_mode & 0o777) == "0o644"
        (tmp_path / "r.csv").chmod(0o640)
        assert oct(write_results(res, tmp_path / "r.csv").stat().st_mode & 0o777) == "0o640"
    finally:
        os.umask(old_umask)
    assert not list(tmp_path.glob(".*.tmp"))
    # a score that is NaN (an LLM verdict that could not be read) is null in JSON, strict JSON that any parser and
    # PostgreSQL read (it was NaN), and NaN again when read back
    import math

    res.items[0].sentence_scores["ngram1_max"][0] = math.nan
    res.items[0].passage_scores["ngram1_max"] = math.inf
    for suffix in (".json", ".jsonl"):
        path = write_results(res, tmp_path / f"nan{suffix}")
        json.loads(path.read_text().splitlines()[0] if suffix == ".jsonl" else path.read_text(),
                   parse_constant=lambda c: pytest.fail(f"{c} in {suffix}"))
        back = read_results(path).items[0]
        assert math.isnan(back.sentence_scores["ngram1_max"][0]) and math.isnan(back.passage_scores["ngram1_max"])
    assert json.dumps(res.items[0].to_dict(), allow_nan=False)
    # by position or id; a table written as .csv is not read back as results (a JSONDecodeError before); a .jsonl's
    # methods are those of its sentences and its answers (response-level ones were left out)
    assert res[1] is res.items[1] and res[res.items[2].id] is res.items[2]
    with pytest.raises(KeyError, match="no result with id 'nope'"):
        res["nope"]
    with pytest.raises(ValueError, match="read back from .json or .jsonl"):
        read_results(tmp_path / "r.csv")
    from halluscope.types import ItemResult, Results

    one = ItemResult(id="a", sentences=["x"], sentence_scores={"ngram1_max": [0.5]},
                     passage_scores={"ngram1_max": 0.5, "luq": 0.2})
    assert read_results(write_results(Results(items=[one]), tmp_path / "m.jsonl")).methods == ["ngram1_max", "luq"]


def test_record_object_api():
    r = Record(response="The sky is green.", samples=["The sky is blue.", "The sky is blue today."], id="sky")
    res = Detector(methods="ngram1_max").score([r])
    # 'green' appears only in the response: its -log p is the largest possible, log(token count)
    it = res.items[0]
    assert it.sentences == ["The sky is green."]
    assert it.sentence_scores["ngram1_max"][0] == pytest.approx(__import__("math").log(16))
    # Record objects are checked as dicts are (they were scored unchecked: two with no id came back both holding
    # the second one's scores, and samples="abc" was three samples); no id: their position
    det = Detector(methods="ngram1_max")
    two = det.score([Record(response="Paris is the capital of France.", samples=["Paris is in France."]),
                     Record(response="Berlin is the capital of Spain.", samples=["Berlin is in Germany."])])
    assert [(x.id, x.response[:5]) for x in two.items] == [("0", "Paris"), ("1", "Berli")] and not two.errors
    bad = det.score([Record(response="Hi there.", samples="abc", id="a"), Record(response="", samples=["x"], id="b"),
                     Record(response="Paris is nice.", samples=[None], id="c"),
                     Record(response="Paris is nice.", samples=["x"], sentences=["Rome."], id="d"), r])
    assert [x.id for x in bad.items] == ["sky"]
    assert [(e.record, e.field) for e in bad.errors] == [("a", "samples"), ("b", "response"), ("c", "samples[0]"),
                                                         ("d", "sentences[0]")]
    for one, hint in ((r, "put one record in a list"), (r.to_dict(), "put one record in a list"), ("text", "a str")):
        with pytest.raises(TypeError, match=hint):
            det.score(one)


def test_detector_options_are_checked_when_it_is_made():
    """A bad precision or chunk size fails at construction (a service fails at start), not at the first score()
    after seconds of model loading (chunk_size=0 was a bare "range() arg 3 must not be zero")."""
    for kw, want in (({"precision": "fp64"}, "precision must be one of auto, fp32, bf16, got 'fp64'"),
                     ({"nli_precision": "fp8"}, "nli_precision must be one of auto, fp32, bf16, int8"),
                     ({"chunk_size": 0}, "chunk_size must be a whole number of records, at least 1")):
        with pytest.raises(ValueError, match=re.escape(want)):
            Detector(**kw)
    # what only the model can tell (its number of layers) fails at load(), before any request
    with pytest.raises(ValueError, match="layer must be in 1..6 for minilm, got 99"):
        Detector(methods="bertscore", layer=99).load()
    det = Detector(methods="ngram1_max")
    assert det.load() is det


def test_malformed_lines_of_every_kind_are_reported_and_valid_records_scored(tmp_path):
    """Valid records among malformed lines (invalid UTF-8 bytes included): each valid record is scored, each other
    line is reported with its record and field (on screen and in OUTPUT.errors.jsonl), and the exit code is 3."""
    from typer.testing import CliRunner

    from halluscope.cli import app

    good = [json.dumps({**GOOD, "id": f"ok{i}"}).encode() for i in range(3)]
    bad = [
        b"null", b"42", b'"a string"', b"[1, 2]", b"{not json",
        json.dumps({"id": "s-null", "response": "A.", "samples": None}).encode(),
        json.dumps({"id": "s-empty", "response": "A.", "samples": []}).encode(),
        json.dumps({"id": "s-missing", "response": "A."}).encode(),
        json.dumps({"id": "s-int", "response": "A.", "samples": [1]}).encode(),
        json.dumps({"id": "s-blank", "response": "A.", "samples": ["  "]}).encode(),
        json.dumps({"id": "r-null", "response": None, "samples": ["x"]}).encode(),
        json.dumps({"id": "r-num", "response": 3, "samples": ["x"]}).encode(),
        b'{"id": "surrogate", "response": "Hi \\ud800 there.", "samples": ["x"]}',
        b'{"id": "s-surrogate", "response": "Hi.", "samples": ["x \\udfff"]}',
        b'{"id": "bytes", "response": "caf\xe9", "samples": ["x"]}',  # invalid UTF-8 (latin-1 byte)
        json.dumps({"id": "sent", "response": "A.", "samples": ["x"], "sentences": []}).encode(),
        json.dumps({"id": "lab", "response": "A.", "samples": ["x"], "sentences": ["A."], "labels": [1, 0]}).encode(),
        json.dumps({"id": "ok0", "response": "dup.", "samples": ["x"]}).encode(),  # duplicate id
        json.dumps({"id": "prompt", "response": "A.", "samples": ["x"], "prompt": 5}).encode(),
    ]
    lines = [good[0], *bad[:10], good[1], *bad[10:], good[2]]
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    recs, errs = read_records(src)
    assert [r.id for r in recs] == ["ok0", "ok1", "ok2"]
    assert len(errs) == len(bad)
    by = {e.record: e.field for e in errs}
    assert by["s-null"] == by["s-empty"] == by["s-missing"] == "samples"
    assert by["surrogate"] == "response" and by["s-surrogate"] == "samples[0]"
    assert by["line 2"] == "<record>"  # the JSON null line
    assert sum(e.field == "<text>" for e in errs) == 1  # the invalid UTF-8 line

    out = tmp_path / "res.jsonl"
    r = CliRunner().invoke(app, ["score", str(src), "--methods", "ngram1_max", "-o", str(out), "--json"])
    assert r.exit_code == 3, r.output
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["ok0", "ok1", "ok2"]
    side = [json.loads(x) for x in (tmp_path / "res.jsonl.errors.jsonl").read_text().splitlines()]
    assert len(side) == len(bad) and all({"record", "field", "message"} <= set(x) for x in side)


def test_empty_file_and_no_samples_column_say_why(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(RecordError, match="empty"):
        read_records(tmp_path / "empty.jsonl")
    (tmp_path / "no_samples.csv").write_text("id,response\na,The sky is blue.\n")
    recs, errs = read_records(tmp_path / "no_samples.csv")
    assert not recs and errs[0].field == "samples" and "missing" in errs[0].message


def test_a_grade_is_true_false_or_one_zero():
    """``correct`` as JSON true / false or as 1 / 0 (a common way to write a grade; their text too, as a CSV cell
    has it: test_grades_as_a_csv_or_pandas_writes_them); anything else is named."""
    for given, read in ((True, True), (False, False), (1, True), (0, False)):
        assert Record.from_dict({**GOOD, "correct": given}).correct is read
    for bad in (2, 0.5, "yes", "2"):
        with pytest.raises(RecordError, match="correct"):
            Record.from_dict({**GOOD, "correct": bad})


def test_byte_order_marks_ids_nul_and_content_free_text(tmp_path):
    """A UTF-8 BOM (Excel's CSV) keeps the first record and the ids; a record without an id whose position is
    another's id, a NUL in an id, a text of punctuation alone and a given sentence that is not the response's (spacing
    aside) are each named; a file of no record is an error of the file."""
    rows = [GOOD, {"response": "Rome is big.", "samples": ["Rome."]}, {**GOOD, "id": "1"},
            {**GOOD, "id": "z", "response": "...!!! \u200b"}, {**GOOD, "id": "n\u0000"},
            {**GOOD, "id": "s", "samples": ["Paris.", "\u200b"]}, {**GOOD, "id": "ok"},
            {**GOOD, "id": "u", "sentences": ["Paris is  the capital of France.", "Berlin is big."]}]
    jl = tmp_path / "bom.jsonl"
    jl.write_bytes(b"\xef\xbb\xbf" + "\n".join(json.dumps(r) for r in rows).encode())
    recs, errs = read_records(jl)
    assert [r.id for r in recs] == ["ok", "1"]
    why = {(e.record, e.field): e.message for e in errs}
    assert "which had no id and was given its position" in why[("1", "id")]
    assert "positions from 0" in why[("ok", "id")] and "the first is kept" in why[("ok", "id")]
    assert why[("z", "response")].startswith("no letter, digit or symbol") and ("s", "samples[1]") in why
    assert why[("n\\x00", "id")] == "contains a NUL character (\\x00)"
    assert list(why).count(("u", "sentences[1]")) == 1 and "is not in the response" in why[("u", "sentences[1]")]
    csv = tmp_path / "excel.csv"
    csv.write_bytes("id,response,samples\nc1,Paris is big.,\"[\"\"Paris.\"\"]\"\nc1,Rome.,\"[\"\"Rome.\"\"]\"\n"
                    .encode("utf-8-sig"))
    recs, errs = read_records(csv)
    assert [r.id for r in recs] == ["c1"] and [(e.record, e.field) for e in errs] == [("c1", "id")]
    for name, text, why in (("e.json", "[]", "an empty list"), ("h.csv", "id,response,samples\n", "a header")):
        (tmp_path / name).write_text(text)
        with pytest.raises(RecordError, match=f"no records in the file \\({why}"):
            read_records(tmp_path / name)


def test_a_broken_csv_row_is_named_and_never_swallows_the_rest(tmp_path):
    """A row with more or fewer fields than the header is an error of that row (its data would land in the wrong
    columns; extra fields were dropped in silence); a quote left open is an error of the file naming the row's line
    (it used to swallow every later row into one response)."""
    wide = tmp_path / "wide.csv"
    wide.write_text('id,response,samples\na,Paris is big.,"[""Paris.""]",extra\nb,Rome.\n'
                    'c,"Rome is\nold.","[""Rome.""]"\nd,Oslo.,"[""Oslo.""]",\n')
    recs, errs = read_records(wide)
    assert [r.id for r in recs] == ["c"]
    assert [(e.record, e.message) for e in errs] == [
        ("line 2", "4 fields where the header has 3"), ("line 3", "2 fields where the header has 3"),
        ("line 6", "4 fields where the header has 3")]  # c's response spans lines 4-5
    stray = tmp_path / "stray.csv"  # a quote out of place is an error of its row (after a blank line: numbered)
    stray.write_text('id,response,samples\n\na,"Paris" is big.,"[""P.""]"\nb,Rome.,"[""R.""]"\n')
    recs, errs = read_records(stray)
    assert [r.id for r in recs] == ["b"] and [(e.record, e.field) for e in errs] == [("line 3", "<row>")]
    assert "a quote inside a field is written twice" in errs[0].message
    open_quote = tmp_path / "open.csv"
    open_quote.write_text('id,response,samples\na,Paris.,"[""P.""]"\nb,"never closed,[]\nc,Rome.,[]\n')
    with pytest.raises(RecordError, match=r"the row from line 3: a quote is left open"):
        read_records(open_quote)


def test_resume_keeps_only_what_this_run_would_write(tmp_path):
    """A resumed .jsonl keeps a record scored with this run's methods, response and sample count; a record whose
    response or samples changed is scored again (one line per id); a file of other methods is refused before any
    scoring, as is one scored without claims when this run scores them; ids not in this run stay in the file (also
    when a run-relative combination rewrites it) and are not counted; other output types are written whole at the
    end, and resuming them is an error; an output that cannot be written is an error first."""
    out = tmp_path / "r.jsonl"
    recs = [{**GOOD, "id": f"r{i}"} for i in range(4)]
    det = Detector(methods="ngram1_max")
    det.score(recs, output=out)
    changed = [{**recs[0], "response": "Rome is the capital of Italy."}, {**recs[1], "samples": GOOD["samples"][:1]},
               recs[2]]
    res = det.score(changed, output=out, resume=True)
    assert res.settings["resumed"] == 1
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(d["id"] for d in lines) == ["r0", "r1", "r2", "r3"]  # r3, not in this run, kept
    by_id = {d["id"]: d for d in lines}
    assert by_id["r0"]["response"].startswith("Rome") and by_id["r1"]["num_samples"] == 1
    with pytest.raises(ValueError, match="scored with other methods"):
        Detector(methods="ngram2_max").score(recs, output=out, resume=True)
    assert len(out.read_text().splitlines()) == 4  # untouched by the refused run
    assert len(read_results(det.score(recs, output=tmp_path / "r.json") and tmp_path / "r.json")) == 4
    with pytest.raises(ValueError, match="continues a .jsonl output"):
        det.score(recs, output=tmp_path / "r.json", resume=True)
    (tmp_path / "d.jsonl").mkdir()
    (tmp_path / "f").write_text("a file")
    for bad, why in (("r.txt", "unknown output type"), ("d.jsonl", "is a folder"), ("f/x.jsonl", "cannot be written")):
        with pytest.raises(ValueError, match=why):
            det.score(recs, output=tmp_path / bad)
    comb, out2 = Detector(methods="ngram1_max,ngram2_max,combination"), tmp_path / "c.jsonl"  # run-relative: the
    comb.score(recs, output=out2)  # file is rewritten at the end, and keeps the results of ids not in the run
    comb.score(recs[:2], output=out2, resume=True)
    assert sorted(json.loads(x)["id"] for x in out2.read_text().splitlines()) == ["r0", "r1", "r2", "r3"]
    with pytest.raises(ValueError, match="this run: ngram1_max, claims"):
        Detector(methods="ngram1_max", claims="rule").score(recs, output=out, resume=True)
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left beside an output


def test_grades_as_a_csv_or_pandas_writes_them():
    """`correct` as a CSV cell has it ("1", "0", "true", "False", "1.0") or as pandas writes a column with gaps
    (1.0): read as the grade (a CSV's grades were all refused, with a message saying 1 is allowed); an empty cell is
    no grade; anything else is refused, naming the value."""
    from halluscope.types import Record

    rec = {"response": "Canberra.", "samples": ["Canberra."]}
    for v, want in (("1", True), ("0", False), ("true", True), ("False", False), (" 1.0 ", True), (1.0, True),
                    (0, False), (True, True), ("", None), (None, None)):
        assert Record.from_dict({**rec, "correct": v}).correct is want, v
    for v in ("yes", 2, 0.5, "2"):
        with pytest.raises(ValueError, match=f"field 'correct': must be true or false, or 1 or 0.*got {v!r}"):
            Record.from_dict({**rec, "correct": v})


def test_a_folder_or_glob_of_files_is_read_as_one_input_on_both_engines(tmp_path):
    """A folder (or glob) of input files: records with no id are named FILE:N (the same in every file would
    collide), a bad line or an id already met in an earlier file is an error naming its file, the other files are
    still read, files that are not input are left; the Ray engine's shards read the same ids. One file: ids as
    before. An output inside the folder is refused (the next run would read it as input)."""
    from typer.testing import CliRunner

    from halluscope.cli import app
    from halluscope.io import check_output, read_inputs
    from halluscope.scale.shards import file_shards, split_shard

    day = tmp_path / "day"
    day.mkdir()
    anon = {k: v for k, v in GOOD.items() if k != "id"}
    _write_jsonl(day / "a.jsonl", [anon, "{not json", {**GOOD, "id": "same"}])
    _write_jsonl(day / "b.jsonl", [anon, {**GOOD, "id": "same", "response": "Lyon is in France."}])
    (day / "c.csv").write_text("response,samples\nhello there.,\"[\"\"hi\"\"]\"\n")
    (day / "notes.txt").write_text("not input")
    (tmp_path / "empty").mkdir()

    recs, errs = read_inputs(day)
    assert [r.id for r in recs] == ["a.jsonl:0", "same", "b.jsonl:0", "c.csv:0"]
    assert recs[1].response == GOOD["response"]  # the first file's record under a repeated id is kept
    assert [(e.record, e.field, e.source) for e in errs] == [("line 2", "<json>", "a.jsonl"), ("same", "id", "b.jsonl")]
    assert "already in a.jsonl" in errs[1].message and str(errs[1]).startswith("b.jsonl: record same")
    assert errs[1].to_dict()["source"] == "b.jsonl"
    assert [r.id for r in read_inputs(day / "*.jsonl")[0]] == ["a.jsonl:0", "same", "b.jsonl:0"]
    assert [r.id for r in read_inputs(day / "b.jsonl")[0]] == ["0", "same"]  # one file: positions alone
    ray_ids = [r["id"] for s in file_shards(day) for b in split_shard({"shard": s.key, "source": s.source,
                                                                        "id_prefix": s.id_prefix}, 16, 10**6)
               for r in json.loads(b["records"])]
    assert ray_ids == ["a.jsonl:0", "same", "b.jsonl:0", "same", "c.csv:0"]  # Ray scores both 'same' (and lists it)
    with pytest.raises(FileNotFoundError, match="no input files"):
        read_inputs(tmp_path / "empty")
    with pytest.raises(ValueError, match="read as input by the next run"):
        check_output(day / "scores.jsonl", day)

    out = tmp_path / "scores.jsonl"
    r = CliRunner().invoke(app, ["score", str(day), "-m", "ngram1_max", "-o", str(out)])
    assert r.exit_code == 3, r.output
    assert "not read: 1 file of" in r.output and "notes.txt" in r.output
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["a.jsonl:0", "same", "b.jsonl:0", "c.csv:0"]
    side = [json.loads(x) for x in (tmp_path / "scores.jsonl.errors.jsonl").read_text().splitlines()]
    assert [x["source"] for x in side] == ["a.jsonl", "b.jsonl"]


def test_several_paths_such_as_a_glob_the_shell_expanded_are_read_as_one_input(tmp_path):
    """`halluscope score in/*.jsonl`, unquoted, reached the command as several paths and ended in "Got unexpected
    extra argument". Several files, folders or globs are now one input, in the order given (each file once), ids
    named FILE:N as for a folder; the Ray engine, which shards one source, says to quote the glob."""
    from typer.testing import CliRunner

    from halluscope.cli import app
    from halluscope.io import read_inputs

    anon = {k: v for k, v in GOOD.items() if k != "id"}
    (tmp_path / "in").mkdir()
    a = _write_jsonl(tmp_path / "in" / "a.jsonl", [anon, {**GOOD, "id": "x"}])
    b = _write_jsonl(tmp_path / "in" / "b.jsonl", [anon, {**GOOD, "id": "x"}])
    recs, errs = read_inputs([b, a, b])
    assert [r.id for r in recs] == ["b.jsonl:0", "x", "a.jsonl:0"]
    assert [(e.source, e.record, e.field) for e in errs] == [("a.jsonl", "x", "id")]
    assert [r.id for r in read_inputs([a])[0]] == ["0", "x"]  # one file: named as when given alone
    out = tmp_path / "out.jsonl"
    r = CliRunner().invoke(app, ["score", str(a), str(b), "-m", "ngram1_max", "-q", "-o", str(out)])
    assert r.exit_code == 3 and "duplicate id" in r.output, r.output
    assert [json.loads(l)["id"] for l in out.read_text().splitlines()] == ["a.jsonl:0", "x", "b.jsonl:0"]
    r = CliRunner().invoke(app, ["score", str(a), str(b), "-m", "ngram1_max", "-q", "-o", str(a)])
    assert r.exit_code == 2 and "is the input file" in r.output, r.output
    r = CliRunner().invoke(app, ["score", str(a), str(b), "--engine", "ray", "-o", str(tmp_path / "ray")])
    assert r.exit_code == 2 and "quote a glob" in r.output and not (tmp_path / "ray").exists(), r.output


def test_folders_and_globs_from_the_review(tmp_path, monkeypatch):
    """Files of one name in two folders of a recursive glob keep apart (day1/answers.jsonl:0); a glob's other files
    are said and left, as a folder's, and hidden files are not read; a folder whose every record is invalid is
    'none scored' (exit 1, errors listed), as one file is; an output that a glob would read next time is refused
    however the two paths are written."""
    from typer.testing import CliRunner

    from halluscope.cli import app
    from halluscope.io import check_output, read_inputs

    anon = {k: v for k, v in GOOD.items() if k != "id"}
    for day in ("day1", "day2"):
        (tmp_path / "g" / day).mkdir(parents=True)
        _write_jsonl(tmp_path / "g" / day / "answers.jsonl", [anon])
    (tmp_path / "g" / "day1" / "notes.txt").write_text("x")
    _write_jsonl(tmp_path / "g" / "day1" / "._answers.jsonl", ["not json"])
    recs, errs = read_inputs(f"{tmp_path}/g/**/*")
    assert [r.id for r in recs] == ["day1/answers.jsonl:0", "day2/answers.jsonl:0"] and not errs
    r = CliRunner().invoke(app, ["score", f"{tmp_path}/g/**/*", "-m", "ngram1_max", "-q"])
    assert r.exit_code == 0 and "notes.txt" in r.output, r.output

    (tmp_path / "bad").mkdir()
    _write_jsonl(tmp_path / "bad" / "x.jsonl", [{"id": "a"}, {"id": "b"}])
    assert read_inputs(tmp_path / "bad")[0] == []
    r = CliRunner().invoke(app, ["score", str(tmp_path / "bad"), "-m", "ngram1_max", "-q", "-o",
                                 str(tmp_path / "o.jsonl")])
    assert r.exit_code == 1 and len((tmp_path / "o.jsonl.errors.jsonl").read_text().splitlines()) == 2, r.output

    monkeypatch.chdir(tmp_path)
    for out, src in (("g/day1/out.jsonl", f"{tmp_path}/g/day1/*.jsonl"), ("g/x/y/out.jsonl", "g/**/*.jsonl"),
                     (f"{tmp_path}/g/day2/o.csv", "g/day2/*")):
        with pytest.raises(ValueError, match="read as input by the next run"):
            check_output(out, src)
    check_output("elsewhere.jsonl", "g/**/*.jsonl")


def test_a_second_run_on_the_same_output_is_refused_and_a_killed_run_leaves_no_lock(tmp_path):
    """Two overlapping runs on one -o file (a cron job that started before the last one ended) both scored every
    record and wrote it twice (80 lines for 48 ids): the second is refused at once, exit 2, naming the holder; the
    lock goes with its holder, even one killed with SIGKILL (whose lock file the next run takes over and removes)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from typer.testing import CliRunner

    from halluscope.cli import app
    from halluscope.io import OutputLock

    src, out = _write_jsonl(tmp_path / "in.jsonl", [GOOD, {**GOOD, "id": "ok2"}]), tmp_path / "out.jsonl"
    args = ["score", str(src), "-m", "ngram1_max", "-o", str(out), "-q"]
    lock = OutputLock(out)
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and f"another run is writing {out} (process {os.getpid()}" in r.output, r.output
    lock.release()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from halluscope.io import OutputLock; OutputLock(Path(sys.argv[1])); "
                               "print('held', flush=True); time.sleep(60)", str(out)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    assert CliRunner().invoke(app, args).exit_code == 2
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    time.sleep(0.1)
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert len(out.read_text().splitlines()) == 2 and not (tmp_path / "out.jsonl.lock").exists()
    assert r.stdout == ""  # -q: no per-record view on stdout; the summary went to stderr


def test_commands_that_write_at_the_end_lock_their_output_for_the_whole_run(tmp_path):
    """`check -o`, `evaluate -o`, `ensemble score -o` and `score -o X.csv` wrote their file at the end unlocked: a
    second run on the same file worked for nothing and one result overwrote the other. Each takes the output's lock
    before any work (refused at once while another holds it) and leaves no lock file behind; `ensemble score` no
    longer overwrites its input."""
    from typer.testing import CliRunner

    from halluscope import Detector
    from halluscope.cli import app
    from halluscope.io import OutputInUse, OutputLock

    src = _write_jsonl(tmp_path / "in.jsonl", [{**GOOD, "sentences": ["Paris is the capital of France."],
                                                "labels": [0]}, {**GOOD, "id": "ok2", "correct": True}])
    runs = {"out.json": ["check", "Who?"], "ev.jsonl": ["evaluate", str(src), "-m", "ngram1_max"],
            "ens.jsonl": ["ensemble", "score", str(src)], "sc.csv": ["score", str(src), "-m", "ngram1_max", "-q"]}
    for name, args in runs.items():
        out = tmp_path / name
        with OutputLock(out):
            r = CliRunner().invoke(app, [*args, "-o", str(out)])
            assert r.exit_code == 2 and f"another run is writing {out}" in r.output, (name, r.output)
    for name in ("ev.jsonl", "sc.csv"):
        out = tmp_path / name
        r = CliRunner().invoke(app, [*runs[name], "-o", str(out)])
        assert r.exit_code == 0 and out.stat().st_size > 0 and not out.with_name(name + ".lock").exists(), r.output
    with OutputLock(tmp_path / "lib.csv"), pytest.raises(OutputInUse):
        Detector(methods=["ngram1_max"]).score([GOOD], output=tmp_path / "lib.csv")
    Detector(methods=["ngram1_max"]).score([GOOD], output=tmp_path / "lib.csv")
    assert (tmp_path / "lib.csv").exists() and not (tmp_path / "lib.csv.lock").exists()
    with OutputLock(tmp_path / "evr.json"):  # evaluate of a results file (recombined, written at the end) too
        r = CliRunner().invoke(app, ["evaluate", str(tmp_path / "ev.jsonl"), "-o", str(tmp_path / "evr.json")])
        assert r.exit_code == 2 and "another run is writing" in r.output, r.output
    r = CliRunner().invoke(app, [*runs["sc.csv"], "-o", str(tmp_path / "new" / "deeper" / "sc.csv")])  # made
    assert r.exit_code == 0 and (tmp_path / "new" / "deeper" / "sc.csv").exists(), r.output
    r = CliRunner().invoke(app, ["ensemble", "score", str(src), "-o", str(src)])
    assert r.exit_code == 2 and "is the input file" in r.output and "samples" in src.read_text(), r.output


def test_resume_rescores_results_split_otherwise_and_says_what_it_kept_of_other_ids(tmp_path):
    """A resumed night kept results whose sentences an older splitter made (a Markdown answer's list numbers as
    sentences of their own) and said nothing of results whose id had left the input: the first are scored again,
    the second stay and are counted; every run records halluscope's version."""
    from halluscope import __version__
    from halluscope.io import read_results

    md = {"id": "md", "response": "Steps:\n1. Open a terminal.\n2. Run it.", "samples": ["Open a terminal. Run it."]}
    out = tmp_path / "out.jsonl"
    det = Detector(methods="ngram1_max")
    first = det.score([md, GOOD, {**GOOD, "id": "gone"}], output=out)
    assert first.settings["halluscope"] == __version__
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    old = next(x for x in lines if x["id"] == "md")
    assert old["sentences"] == ["Steps:", "Open a terminal.", "Run it."]
    old["sentences"] = ["Steps: 1.", "Open a terminal. 2.", "Run it."]  # as the splitter before Markdown blocks made
    old["sentence_scores"] = {"ngram1_max": [9.0, 9.0, 9.0]}
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = det.score([md, GOOD], output=out, resume=True)
    assert res.settings["resumed"] == 1 and res.settings["kept_other_ids"] == 1  # GOOD kept; md scored again
    back = {it.id: it for it in read_results(out).items}
    assert back["md"].sentences == ["Steps:", "Open a terminal.", "Run it."] and set(back) == {"md", "ok", "gone"}
