"""The LangChain adapter end to end: langchain_openai's ChatOpenAI and OpenAI (completions) models pointed at the
real llama.cpp server on loopback (the packaged Gemma-3-270M, with the 'raw' chat format so that a chat request is
the same prompt as a completion), against the project's own HTTP backend on the same server: sampling, a judge, the
judge panel over two backends, and P(True) from log-probs and from sampled verdicts."""

import math
import sys

import langchain_openai
import numpy as np
import pytest

from halluscope import Detector
from halluscope.evaluation.sac3 import load_sac3
from halluscope.llm import GenParams, Sampler
from halluscope.llm.http import OpenAIBackend
from halluscope.llm.langchain import MISSING, LangChainBackend, default_kwargs
from halluscope.llm.server import LlamaServer
from halluscope.scorers.p_true import parse_option

PROMPT = "Question: Who was Ada Lovelace?\nAnswer:"


@pytest.fixture(scope="module")
def server():
    # every prompt token on its own (n_batch=1): the same prompt gives the same numbers whatever the server reused
    # before, so the LangChain path and the HTTP backend can be compared exactly (prompts kept short: it is slow)
    s = LlamaServer("gemma", n_batch=1, chat_format="raw")
    yield s
    s.stop()


def _chat_backend(server, **kw):
    chat = langchain_openai.ChatOpenAI(model="gemma", base_url=server.base_url, api_key="none", max_retries=0)
    # ChatOpenAI sends max_tokens as max_completion_tokens, which the llama.cpp server does not read: the
    # per-call keywords add the server's own name for it
    return chat, LangChainBackend(chat, kwargs_for=lambda p: {**default_kwargs(p, logprobs=kw.get("logprobs", True)),
                                                              "extra_body": {"max_tokens": p.max_tokens}})


@pytest.fixture(scope="module")
def records(data_dir):
    """The shortest of 20 real SAC3 answers, with one sample: a short prompt for the n_batch=1 server."""
    it = min(load_sac3(data_dir, limit=20), key=lambda it: len(it.question + it.response + it.samples[0]))
    return [{"id": it.id, "prompt": it.question, "response": it.response, "samples": it.samples[:1]}]


def test_missing_langchain_says_how_to_install(monkeypatch):
    for mod in ("langchain_core", "langchain_core.language_models", "langchain_core.messages"):
        monkeypatch.setitem(sys.modules, mod, None)  # an import of these now fails as if not installed
    with pytest.raises(RuntimeError, match=r"LangChain is not installed: pip install 'halluscope\[langchain\]'"):
        LangChainBackend(object())
    assert MISSING == "LangChain is not installed: pip install 'halluscope[langchain]'"


def test_chat_model_samples_as_the_http_backend_does_and_is_never_mutated(server):
    """T=0 and T=1 calls run at once on one shared ChatOpenAI, each with its own settings: the same texts and
    log-probs as the HTTP backend drawing one by one (the 'raw' chat format makes the chat prompt the completion's)."""
    chat, be = _chat_backend(server)
    before = (chat.temperature, chat.seed, chat.max_tokens, chat.logprobs, chat.top_logprobs)
    http = Sampler(OpenAIBackend("gemma", base_url=server.base_url, timeout=600), concurrency=1)
    expected = http.draw([PROMPT], n=2, max_tokens=8, seed=5, top_logprobs=3)[0]
    got = Sampler(be, concurrency=2).draw([PROMPT], n=2, max_tokens=8, seed=5, top_logprobs=3)[0]
    assert got.ok, got.errors
    assert [g.text for g in [got.main, *got.samples]] == [g.text for g in [expected.main, *expected.samples]]
    assert len({g.text for g in got.samples}) == 2  # temperature 1, seeds 6 and 7: different samples
    assert all(0 < g.completion_tokens <= 8 for g in [got.main, *got.samples])  # max_tokens reached the server
    assert [(t.token, t.top) for t in got.main.tokens] == [(t.token, t.top) for t in expected.main.tokens]
    assert all(t.top and len(t.top) <= 3 for t in got.main.tokens) and got.samples[0].tokens is None
    stopped = be.complete(PROMPT, GenParams(0.0, 24, 5, 0, ("\n",)))
    assert stopped.text.strip() and "\n" not in stopped.text  # stop sequences too
    assert (chat.temperature, chat.seed, chat.max_tokens, chat.logprobs, chat.top_logprobs) == before
    assert "none" not in be.cache_id() and be.cache_id().startswith("langchain:ChatOpenAI:")


def test_completion_model_gives_the_text_and_logprobs_of_the_http_backend(server):
    be = LangChainBackend(langchain_openai.OpenAI(model="gemma", base_url=server.base_url, api_key="none",
                                                  max_retries=0))
    params = GenParams(0.0, 8, 0, 3, ("\n",))
    got = be.complete(PROMPT, params)
    expected = OpenAIBackend("gemma", base_url=server.base_url, timeout=300).complete(PROMPT, params)
    assert got.text == expected.text and got.text.strip() and "\n" not in got.text
    assert [(t.token, t.logprob, t.top) for t in got.tokens] == [(t.token, t.logprob, t.top) for t in expected.tokens]


SHORT_LIKERT = "Question: {question}\nProposed answer: {answer}\nCorrectness score from 1 to 5:"


def test_judge_panel_and_p_true_through_langchain_equal_the_http_backend(server, records, tmp_path):
    """A Likert judge, P(True) and a panel of two judges (one through LangChain, one through the HTTP backend) on a
    real SAC3 answer: the same replies and numbers by both routes. Short prompts (a one-line Likert template, one
    brainstormed idea), ordered so that the second route reuses the first one's prompt on the server."""
    _, be = _chat_backend(server)
    lc = Sampler(be, cache=str(tmp_path / "lc.sqlite"), concurrency=1)
    http = Sampler(OpenAIBackend("gemma", base_url=server.base_url, timeout=600), cache=str(tmp_path / "h.sqlite"),
                   concurrency=1)
    likert = {"template": SHORT_LIKERT, "retries": 0}
    panel = {"judges": [{"kind": "likert", "llm": lc, "name": "langchain", **likert},
                        {"kind": "likert", "llm": http, **likert}]}
    opts = {"likert_judge": likert, "judge_panel": panel, "p_true": {"max_ideas": 1}}
    res = Detector(methods=["likert_judge", "judge_panel", "p_true"], llm=lc, method_options=opts).score(records)
    ref = Detector(methods=["likert_judge", "p_true"], llm=http, method_options=opts).score(records)
    it, r = res.items[0], ref.items[0]
    for m in ("likert_judge", "p_true"):
        assert it.evidence[m][0]["replies"] == r.evidence[m][0]["replies"] and it.evidence[m][0]["replies"][0], m
        assert it.passage_scores[m] == pytest.approx(r.passage_scores[m], nan_ok=True), m
    assert it.evidence["p_true"][0]["p_true_from"] == "logprobs" and np.isfinite(it.passage_scores["p_true"])
    assert it.evidence["p_true"][0]["top"] == r.evidence["p_true"][0]["top"]
    # the panel's members: the Likert judge through LangChain and through the HTTP backend, then their mean
    members = [1 - it.passage_scores["likert_judge"], 1 - r.passage_scores["likert_judge"]]
    assert it.evidence["judge_panel"][0]["judges"] == pytest.approx({"langchain": members[0], "likert": members[1]},
                                                                     nan_ok=True)
    known = [c for c in members if not math.isnan(c)]
    expected = sum(known) / len(known) if known else float("nan")
    assert 1 - it.passage_scores["judge_panel"] == pytest.approx(expected, nan_ok=True)


def test_p_true_falls_back_to_sampled_verdicts_without_logprobs(server, records):
    _, be = _chat_backend(server, logprobs=False)
    det = Detector(methods=["p_true"], llm=Sampler(be, concurrency=1),
                   method_options={"p_true": {"k": 4, "max_ideas": 1}})
    res = det.score(records)
    ev = res.items[0].evidence["p_true"][0]
    assert ev["p_true_from"] == "samples" and len(ev["replies"]) == 4
    votes = [parse_option(r) for r in ev["replies"]]
    assert ev["votes"] == votes
    known = [v for v in votes if v is not None]
    expected = sum(known) / len(known) if known else float("nan")
    assert 1 - res.items[0].passage_scores["p_true"] == pytest.approx(expected, nan_ok=True)
    assert "p_true_from: samples 1" in res.settings["methods"]["p_true"]["description"]
