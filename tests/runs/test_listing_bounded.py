"""What a listing reads of a big run: the task from the spec's tail, calls counted once."""

from __future__ import annotations

from pathlib import Path

from toolproof.identity import canonical_json
from toolproof.runs.listing import count_tool_calls, spec_task


def _read_so_far() -> int:
    """Bytes this process has read (``rchar`` of /proc/self/io; 0 off Linux)."""
    io = Path("/proc/self/io")
    if not io.exists():
        return 0
    return int(next(x for x in io.read_text("ascii").splitlines() if x.startswith("rchar:"))[6:])


def _spec(tmp_path: Path, task: str, steps: int) -> Path:
    step = {"after": [], "arguments": {"task": "x"}, "id": "s", "kind": "call", "tool": "t"}
    document = {"schema_version": 1, "steps": [step] * steps, "task": task, "toolset": "t.toml"}
    path = tmp_path / "spec.json"
    path.write_bytes(canonical_json(document))
    return path


def test_a_small_spec_is_parsed_whole(tmp_path: Path) -> None:
    assert spec_task(_spec(tmp_path, "count the apples", 3)) == "count the apples"


def test_a_big_spec_gives_its_task_from_its_tail(tmp_path: Path) -> None:
    # every step has an argument named "task": only the top-level member is the task
    task = 'the "task":"decoy", \u202eevil\u202c and ünïcode'
    path = _spec(tmp_path, task, 20_000)
    assert path.stat().st_size > 1 << 20
    assert spec_task(path) == task


def test_a_big_spec_of_another_shape_has_no_task(tmp_path: Path) -> None:
    path = _spec(tmp_path, "t", 20_000)
    path.write_bytes(path.read_bytes()[:-1] + b',"zzz":1}')  # not what a RunSpec ends with
    assert spec_task(path) is None
    path.write_bytes(b"[" + b"1," * 600_000 + b"1]")
    assert spec_task(path) is None
    assert spec_task(tmp_path / "absent.json") is None


def test_tool_calls_are_counted_by_their_lines_and_remembered(tmp_path: Path) -> None:
    called = b'{"call":{},"idx":%d,"type":"tool_called"}\n'
    nested = b'{"idx":1,"result":{"value":{"type":"tool_called"}},"type":"tool_returned"}\n'
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes((called % 0 + nested) * 150_000)  # 16 MB: many 1 MiB blocks
    assert count_tool_calls(trace) == 150_000
    before = _read_so_far()
    assert count_tool_calls(trace) == 150_000  # remembered: not read again
    assert _read_so_far() - before < 64 * 1024
    trace.write_bytes(called % 0 + called % 1)  # a changed file is counted again
    assert count_tool_calls(trace) == 2
    assert count_tool_calls(tmp_path / "absent.jsonl") is None
