"""Canonical JSON throughput: toolproof.canonical_json against the rfc8785 package.

One command: ``python benchmarks/bench_canonical.py [--events N] [--repeat R]``.

Encodes N realistic trace events (10-20 fields: index, kind, previous digest, call
ids, tool name, small argument objects, floats, unicode text) with
``toolproof.canonical_json`` (pure Python since issue 29: no C extension) and with
``rfc8785.dumps`` (the anchor, measured in the same run). Checks that both give
identical bytes, then prints MB/s of canonical output and the ratio to the anchor.
Target (issue 5, before issue 29 removed the C encoder): canonical_json >= 10x rfc8785.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
from collections.abc import Callable
from typing import Any

import rfc8785

from toolproof.identity import canonical_json

KINDS = ("tool_called", "tool_returned", "evidence_registered", "claim_emitted", "step_started")
TOOLS = ("stock", "total", "git_log", "search_docs", "fetch_page", "weather.now")
WORDS = ("apple", "pear", "plum", "shelf", "Zürich", "naïve", "東京", "delivery", "€", "🙂")


def _hex(rng: random.Random) -> str:
    return hashlib.sha256(rng.randbytes(16)).hexdigest()


def make_event(index: int, rng: random.Random) -> dict[str, Any]:
    """One trace event shaped like the runs layer's (a dict of 10-20 fields)."""
    event: dict[str, Any] = {
        "idx": index,
        "kind": rng.choice(KINDS),
        "prev": "sha256:" + _hex(rng),
        "run_id": "run_" + _hex(rng),
        "step": f"s{rng.randrange(40)}",
        "call_id": "call_" + _hex(rng),
        "tool": rng.choice(TOOLS),
        "arguments": {
            "item": rng.choice(WORDS),
            "limit": rng.randrange(1, 100),
            "threshold": round(rng.random(), rng.randrange(1, 6)),
            "tags": [rng.choice(WORDS) for _ in range(rng.randrange(0, 4))],
        },
        "elapsed_s": rng.random() * rng.choice((1e-3, 1.0, 100.0)),
        "attempt": rng.randrange(1, 4),
        "ok": rng.random() > 0.1,
        "schema_version": 1,
    }
    for extra in range(rng.randrange(0, 8)):
        key = rng.choice(("note", "score", "offset", "length", "retryable", "where", "detail"))
        event[f"{key}_{extra}"] = rng.choice(
            (
                rng.random() * 10 ** rng.randrange(-8, 22),
                rng.randrange(-(2**53) + 1, 2**53),
                " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 12))),
                None,
                rng.random() > 0.5,
                {"start": rng.randrange(10_000), "end": rng.randrange(10_000, 20_000)},
            )
        )
    return event


def measure(encoders: list[Callable[[Any], bytes]], events: list[Any], repeat: int) -> list[float]:
    """Best wall time in seconds of each encoder over ``repeat`` passes over every event.

    The passes are interleaved (anchor, candidate, anchor, ...) so that load from other
    processes on the machine falls on every encoder alike.
    """
    best = [float("inf")] * len(encoders)
    for _ in range(repeat):
        for index, encode in enumerate(encoders):
            start = time.perf_counter()
            for event in events:
                encode(event)
            best[index] = min(best[index], time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--target", type=float, default=10.0, help="required ratio to rfc8785")
    args = parser.parse_args(argv)
    rng = random.Random(8785)
    events = [make_event(index, rng) for index in range(args.events)]
    for event in events:
        expected = rfc8785.dumps(event)
        if canonical_json(event) != expected:
            print(f"MISMATCH on event {event['idx']}", file=sys.stderr)
            return 1
    size = sum(len(canonical_json(event)) for event in events)
    labels = [
        "rfc8785.dumps (anchor)",
        "canonical_json (pure Python)",
    ]
    times = measure([rfc8785.dumps, canonical_json], events, args.repeat)
    anchor = times[0]
    rows = list(zip(labels, times, strict=True))
    print(f"{args.events} trace events, {size / 1e6:.2f} MB canonical, best of {args.repeat}")
    for label, seconds in rows:
        print(
            f"  {label:<40} {seconds * 1e3:8.1f} ms  {size / seconds / 1e6:8.1f} MB/s"
            f"  {anchor / seconds:6.1f}x"
        )
    ratio = anchor / rows[-1][1]
    verdict = "PASS" if ratio >= args.target else "FAIL"
    print(f"canonical_json / rfc8785 = {ratio:.1f}x (target >= {args.target:g}x): {verdict}")
    return 0 if ratio >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
