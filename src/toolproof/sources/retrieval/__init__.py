"""Retrieval: a pinned corpus and its ranked index, as a tool."""
