"""Framework adapters: pydantic-ai, the OpenAI Agents SDK, LangChain, httpx, callables."""
