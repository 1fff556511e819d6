import asyncio

from llama_index.core import get_response_synthesizer
from llama_index.core.llms import ChatMessage
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_graphrag_ext.core.usage import count_llm_calls
from llama_index_graphrag_ext.testing import ScriptedLLM


def test_counts_outermost_calls_only_and_reported_tokens():
    llm = ScriptedLLM(default="two words")
    with count_llm_calls() as counter:
        llm.complete("one two three")
        llm.chat([ChatMessage(role="user", content="hello there")])  # chat runs complete inside
        asyncio.run(llm.acomplete("async call"))
    assert counter.calls == 3
    # ScriptedLLM reports whitespace word counts as usage
    assert counter.prompt_tokens >= 3 + 2 and counter.completion_tokens == 6
    total = counter.total_tokens
    assert counter.take() == (3, total)
    assert counter.calls == 0 and counter.take() == (0, 0)  # take() resets


def test_counts_calls_made_by_a_synthesizer_that_swaps_callback_managers():
    llm = ScriptedLLM(default="Paris")
    synth = get_response_synthesizer(llm=llm, response_mode="compact")
    nodes = [NodeWithScore(node=TextNode(text="Paris is the capital of France."), score=1.0)]
    with count_llm_calls() as counter:
        assert str(synth.synthesize("capital of France?", nodes=nodes)) == "Paris"
    assert counter.calls == 1


def test_nothing_counted_outside_the_block():
    llm = ScriptedLLM(default="x")
    with count_llm_calls() as counter:
        pass
    llm.complete("after")
    assert counter.calls == 0
