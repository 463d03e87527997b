"""Agents' sessions: the one session port, a session's frozen replay, the cassette.

The floor between ``config`` and ``backends`` (DESIGN section 2). The :class:`Session`
facade itself is :mod:`toolproof.adapters.session`.
"""
