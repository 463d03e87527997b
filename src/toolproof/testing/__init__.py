"""The conformance kit for toolproof extensions (a pytest plugin; see ``docs/extending.md``).

Not imported by ``toolproof``; import it in your tests. The fixtures
(``toolproof_cassette``, ``toolproof_run``) load through the ``pytest11`` entry point.
"""

from toolproof.testing.calls import assert_call_fails, assert_call_ok
from toolproof.testing.cassette import Cassette
from toolproof.testing.conformance import (
    assert_check_conforms,
    assert_reasoner_conforms,
    assert_retrieval_conforms,
)
from toolproof.testing.errors import ConformanceError
from toolproof.testing.identity import assert_identity_stable, identity_of
from toolproof.testing.runs import (
    assert_frozen_replay,
    assert_manifest_covers,
    assert_replay_refuses,
    assert_run_conforms,
    assert_supports_exact,
)

__all__ = [
    "Cassette",
    "ConformanceError",
    "assert_call_fails",
    "assert_call_ok",
    "assert_check_conforms",
    "assert_frozen_replay",
    "assert_identity_stable",
    "assert_manifest_covers",
    "assert_reasoner_conforms",
    "assert_replay_refuses",
    "assert_retrieval_conforms",
    "assert_run_conforms",
    "assert_supports_exact",
    "identity_of",
]
