"""Reading ``x-toolmend-calls`` the way docs/operations.md tells users to, through the real clients: the official
openai client (``with_raw_response``) and, when it is installed, LangChain's ``ChatOpenAI`` with
``include_response_headers=True``. The proxy under uvicorn in front of the strict upstream, on loopback."""

import openai

from tests.support.ci import declared
from tests.support.strict_upstream import Recorder

TOOLS = [{"type": "function", "function": {"name": "weather", "description": "Weather for a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
MODEL = "gpt-strict-test"
ONE_CALL = {"x-test-parallel-calls": "1"}  # the strict upstream answers a question with this many calls


def test_the_openai_client_sees_recalled_and_synthesized_calls_apart(proxy_url: str, recorder: Recorder) -> None:
    client = openai.OpenAI(base_url=proxy_url + "/v1", api_key="sk-framework-openai", default_headers=ONE_CALL)
    history: list[dict] = [{"role": "user", "content": "Weather in Paris?"}]
    answer = client.chat.completions.create(model=MODEL, messages=history, tools=TOOLS)
    [emitted] = answer.choices[0].message.tool_calls
    # A forgetful framework: keeps the result, drops the call; then a result of a call nobody ever made.
    history.append({"role": "tool", "tool_call_id": emitted.id, "content": "18C"})
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=history, tools=TOOLS)
    assert (raw.headers["x-toolmend-repairs"], raw.headers["x-toolmend-calls"]) == ("TM101=1", "recalled=1,synthesized=0")
    history += [{"role": "user", "content": "And Rome?"}, {"role": "tool", "tool_call_id": "call_never_made", "content": "24C"}]
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=history, tools=TOOLS)
    assert (raw.headers["x-toolmend-repairs"], raw.headers["x-toolmend-calls"]) == ("TM101=2", "recalled=1,synthesized=1")
    assert raw.parse().choices[0].message.content.startswith("Received 1 tool result")
    assert recorder.rejections == []


def test_langchain_reads_the_header_from_response_metadata(proxy_url: str, recorder: Recorder) -> None:
    chat_openai = declared("langchain_openai")
    messages = declared("langchain_core.messages")
    llm = chat_openai.ChatOpenAI(model=MODEL, base_url=proxy_url + "/v1", api_key="sk-framework-langchain",
                                 include_response_headers=True, default_headers=ONE_CALL, max_retries=0)
    question = messages.HumanMessage("Weather in Paris?")
    asked = llm.bind_tools(TOOLS).invoke([question])
    [emitted] = asked.tool_calls
    forgetful = [question, messages.AIMessage(asked.content), messages.ToolMessage("18C", tool_call_id=emitted["id"])]
    answer = llm.invoke(forgetful)
    assert answer.response_metadata["headers"]["x-toolmend-calls"] == "recalled=1,synthesized=0"
    first, *_ = llm.stream(forgetful)  # streaming: the headers ride on the first chunk
    assert first.response_metadata["headers"]["x-toolmend-calls"] == "recalled=1,synthesized=0"
    invented = llm.invoke([question, messages.ToolMessage("18C", tool_call_id="call_never_made")])
    assert invented.response_metadata["headers"]["x-toolmend-calls"] == "recalled=0,synthesized=1"
    assert recorder.rejections == []
