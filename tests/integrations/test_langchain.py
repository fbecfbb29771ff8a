"""LangChain: the retriever in a real runnable chain, and the chat history on the log, sync and async.

The chain is retriever → prompt → langchain-core's ``ParrotFakeChatModel`` (which answers with the
prompt it was given), so what reaches the model is what the memory returned.
"""

from __future__ import annotations

import uuid

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnablePassthrough

from adamem.integrations.langchain import AdaMemChatMessageHistory, AdaMemRetriever
from adamem.memory import Memory


def _chain(retriever: AdaMemRetriever) -> Runnable[str, str]:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the memory."), ("human", "Memory:\n{context}\n\nQuestion: {question}")]
    )

    def context(docs: list[Document]) -> str:
        return "\n".join(f"- [{d.metadata['layer']}] {d.page_content}" for d in docs)

    return (
        {"context": retriever | context, "question": RunnablePassthrough()}
        | prompt
        | ParrotFakeChatModel()
        | StrOutputParser()
    )


def test_documents_carry_the_score_breakdown_and_provenance(memory: Memory) -> None:
    docs = AdaMemRetriever(memory=memory, user_id="alice", top_k=5).invoke("What food does Alice like?")
    assert 1 <= len(docs) <= 5 and any("spicy" in d.page_content for d in docs)
    assert [d.metadata["rank"] for d in docs] == list(range(1, len(docs) + 1))
    for d in docs:
        assert set(d.metadata["breakdown"]) == {"semantic", "graph", "temporal", "fact"}
        assert d.metadata["provenance"] and d.metadata["owner_id"] == "default:alice"
        assert all(
            p["source_topic"].endswith(".analyses") and p["source_offset"] >= 0 for p in d.metadata["provenance"]
        )
    scores = [d.metadata["score"] for d in docs]
    assert all(isinstance(s, float) for s in scores)


def test_the_retriever_in_a_runnable_chain_sync_and_async(memory: Memory) -> None:
    chain = _chain(AdaMemRetriever(memory=memory, user_id="alice"))
    out = chain.invoke("Why did Alice start working out?")
    assert "Question: Why did Alice start working out?" in out
    assert "blood lipids" in out or "more exercise" in out  # the reason, from memory


async def test_the_chain_async_and_as_of_a_past_time(memory: Memory) -> None:
    now = await _chain(AdaMemRetriever(memory=memory, user_id="alice")).ainvoke("Is Alice thinking about a pet?")
    then = AdaMemRetriever(memory=memory, user_id="alice", as_of=1710892800000)  # 2024-03-20
    before = await _chain(then).ainvoke("Is Alice thinking about a pet?")
    assert "Mochi" in now and "Mochi" not in before


def test_chat_history_appends_to_the_log_and_reads_working_memory(memory: Memory) -> None:
    user = f"fay-{uuid.uuid4().hex[:6]}"
    history = AdaMemChatMessageHistory(memory, user, conversation_id="c1")
    assert history.messages == []  # a user with no memory yet
    history.add_messages([HumanMessage("I grow tomatoes on my balcony."), AIMessage("How many plants?")])
    history.add_user_message("Six plants, all cherry tomatoes.")
    other = AdaMemChatMessageHistory(memory, user, conversation_id="c2")
    other.add_messages([SystemMessage("You are a gardener's assistant.")])

    got = history.messages
    assert [type(m) for m in got] == [HumanMessage, AIMessage, HumanMessage]
    assert [m.text for m in got] == [
        "I grow tomatoes on my balcony.",
        "How many plants?",
        "Six plants, all cherry tomatoes.",
    ]
    assert got[0].name == user and got[1].name == "assistant"
    assert [(type(m), m.text) for m in other.messages] == [(SystemMessage, "You are a gardener's assistant.")]
    recalled = memory.recall(user, "What do I grow?")  # what the history appended is memory now
    assert any("tomatoes" in i.content for i in recalled.items)

    history.clear()
    assert history.messages == [] and [m.text for m in other.messages] == ["You are a gardener's assistant."]
    assert not any("balcony" in i.content for i in memory.recall(user, "What do I grow?").items)


async def test_chat_history_async(memory: Memory) -> None:
    user = f"gus-{uuid.uuid4().hex[:6]}"
    history = AdaMemChatMessageHistory(memory, user)
    await history.aadd_messages([HumanMessage("My dog is called Pepper."), AIMessage("Lovely name!")])
    assert [m.text for m in await history.aget_messages()] == ["My dog is called Pepper.", "Lovely name!"]
    await history.aclear()
    assert await history.aget_messages() == []
