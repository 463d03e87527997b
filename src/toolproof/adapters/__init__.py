"""Outward faces of toolproof: the CLI, MCP and HTTP servers, framework adapters.

Nothing here is imported by ``toolproof/__init__.py``; optional dependencies
(LangChain, FastAPI, Celery) are imported only by the adapter that needs them.
"""
