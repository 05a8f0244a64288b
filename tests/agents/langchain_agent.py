"""LangChain: ChatOpenAI(streaming=True) and ChatAnthropic."""

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from _harness import HELLO, SYSTEM, ProviderServer, report

MESSAGES = [SystemMessage(SYSTEM), HumanMessage(HELLO)]

with ProviderServer() as server:
    chat = ChatOpenAI(model="gpt-4o", base_url=server.openai_base_url, api_key="k", streaming=True,
                      stream_usage=True, max_retries=0)
    reply = chat.invoke(MESSAGES)
    results = [[reply.content, reply.usage_metadata["input_tokens"]]]
    claude = ChatAnthropic(model="claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key="k",
                           max_retries=0, max_tokens=16)
    reply = claude.invoke(MESSAGES)
    results.append([reply.content, reply.usage_metadata["input_tokens"]])  # reply.id: a fresh run id
    report(server, results)
