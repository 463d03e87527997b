"""A recorded run served as a cassette to an application's own tests.

The cassette is :mod:`toolproof.sessions.cassette` (served through the one replay
matcher, :mod:`toolproof.runs.matcher`); this module is its place in the test kit.
"""

from toolproof.sessions.cassette import RECORD_MODES, Cassette, RecordMode, ServedTurn

__all__ = ["RECORD_MODES", "Cassette", "RecordMode", "ServedTurn"]
