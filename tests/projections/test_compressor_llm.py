"""The LLM compressor against a real local HTTP server: its text is recorded, replay folds it without the model."""

from __future__ import annotations

import pytest

from adamem.errors import MalformedModelAnswer
from adamem.projections.compressor import propose
from adamem.projections.compressor_llm import OpenAICompatibleCompressor
from adamem.projections.folds import EpisodicRow, Positioned
from adamem.projections.folds.testing import Chat, fold
from tests.analysis import test_llm
from tests.analysis.test_llm import FakeEndpoint, Reply, chat
from tests.projections.test_fold_compressed import RUNS_ZH, episodic, series

endpoint = test_llm.endpoint  # the fake OpenAI-compatible server of the extractor's tests

DISTILLED = "2024年3月至5月，王先生大约每两周跑一次步，多在下班后，体检之后更坚持。"


def compressor(url: str) -> OpenAICompatibleCompressor:
    return OpenAICompatibleCompressor(url, "qwen2.5-7b-instruct", timeout_s=2.0, retries=1, backoff_s=0.01)


def test_the_model_writes_the_text_and_replay_folds_it_without_the_model(endpoint: FakeEndpoint) -> None:
    chat_ = Chat(user="wang")
    events = series(chat_, RUNS_ZH)
    state, _ = fold(events, user="wang")
    endpoint.replies.append(chat(DISTILLED))
    [ev] = propose(state.owner_id, episodic(state), compressor=compressor(endpoint.url))
    assert (ev.content, ev.compressor, ev.compressor_version) == (DISTILLED, "openai", "1/qwen2.5-7b-instruct")
    [(path, _, body)] = endpoint.requests
    assert path == "/v1/chat/completions" and body["model"] == "qwen2.5-7b-instruct"
    prompt = body["messages"][1]["content"]
    assert prompt.startswith("running (2024年3月至5月):") and all(run in prompt for run in RUNS_ZH)

    log = [*events, Positioned(ev, "adamem.analyses", 0, chat_._next())]
    live, _ = fold(log, user="wang")
    replayed, _ = fold(log, user="wang")  # no reply is scripted: a call would fail
    assert replayed.tables == live.tables and len(endpoint.requests) == 1
    [summary] = [r for r in episodic(live) if isinstance(r, EpisodicRow) and r.status == "active"]
    assert summary.content == DISTILLED


def test_an_empty_answer_is_malformed_and_nothing_is_proposed(endpoint: FakeEndpoint) -> None:
    state, _ = fold(series(Chat(user="wang"), RUNS_ZH), user="wang")
    endpoint.replies.append(chat("   "))
    with pytest.raises(MalformedModelAnswer, match="no text for the summary of 'running'"):
        propose(state.owner_id, episodic(state), compressor=compressor(endpoint.url))
    endpoint.replies.append(Reply(body={"choices": []}))
    with pytest.raises(MalformedModelAnswer, match="without choices"):
        propose(state.owner_id, episodic(state), compressor=compressor(endpoint.url))
