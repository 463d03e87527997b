"""A recorded run served as a cassette to an application's own tests.

The cassette is :mod:`toolproof.sessions.cassette` (served through the one replay
matcher, :mod:`toolproof.runs.matcher`); this module is its place in the test kit.

The record mode (VCR's vocabulary) says what happens to a call the cassette cannot
serve (one not recorded, or one more repeat than recorded):

* ``none`` (the default): fail closed. The tool returns a ``cassette_miss`` failure
  naming the call, with the nearest recorded call as a unified diff; the miss is kept
  in :attr:`Cassette.misses` (the pytest fixture fails the test with it). The
  cassette must exist.
* ``once``: record the cassette if ``path`` does not exist (every call runs the real
  tool and is recorded), else behave as ``none``.
* ``new_episodes``: serve what was recorded (tool calls and model turns alike), run
  and record only what was not, and append it: :meth:`Cassette.save` writes a new run
  at ``path`` holding the recorded calls and turns (in their order, with their step
  ids) followed by the new ones.

An agent session's run is served whole: ``toolproof.Session.from_cassette(cassette)``
is a session for the same agent code whose tool calls the cassette answers and whose
model turns (``session.pydantic_ai_model``, ``openai_agents_model``,
``httpx_transport``) it serves by match key and occurrence (:meth:`Cassette.serve_turn`;
a request not recorded fails closed, raising ``InputError`` with a diff of the
nearest recorded request). While a cassette records, a model turn it holds is served
from it (:meth:`Cassette.known_turn`) and only the others are asked of the live model
and recorded.

Recording runs the real tools of the Toolset given to :meth:`Cassette.toolset`
through the one session recorder (:mod:`toolproof.runs.live`); :meth:`Cassette.save`
finalizes it into an ordinary run directory at ``path`` (the directory's name need
not be the run id). :meth:`Cassette.override` supplies a result for one call in one
test.
"""

from toolproof.sessions.cassette import RECORD_MODES, Cassette, RecordMode, ServedTurn

__all__ = ["RECORD_MODES", "Cassette", "RecordMode", "ServedTurn"]
