"""long_lived: a finalize's long-lived objects are kept off the collector's full collections."""

from __future__ import annotations

import gc

from toolproof.runs.run import long_lived


def test_long_lived_freezes_what_is_alive_and_gives_it_back_at_the_outermost_exit() -> None:
    assert gc.get_freeze_count() == 0
    held = [[index] for index in range(1000)]
    with long_lived():
        outer = gc.get_freeze_count()
        assert outer >= 1000  # the lists above, among everything alive
        later = [[index] for index in range(1000)]
        with long_lived():  # entered again: what was allocated since is frozen too
            assert gc.get_freeze_count() >= outer + 1000
        assert gc.get_freeze_count() >= outer + 1000  # still held until the outermost exit
    assert gc.get_freeze_count() == 0
    assert len(held) == len(later) == 1000


def test_long_lived_leaves_a_freeze_of_the_process_alone() -> None:
    gc.freeze()  # the process's own (a server that forks, say)
    try:
        frozen = gc.get_freeze_count()
        alive = [[index] for index in range(1000)]  # not frozen: long_lived must leave them
        with long_lived():
            inside = gc.get_freeze_count()
        after = gc.get_freeze_count()
        # a frozen object freed meanwhile (by another test's thread) lowers the count by
        # one; a freeze here would add the 1,000 lists, an unfreeze would empty it
        assert frozen - 100 <= inside < frozen + 1000
        assert frozen - 100 <= after < frozen + 1000
        assert len(alive) == 1000
    finally:
        gc.unfreeze()
