"""The self-contained HTML page of ``show --html``: every text escaped, controls shown."""

from __future__ import annotations

from toolproof.adapters.html_report import render_html

CLAIM = {
    "statement": "<b>\u202eevil\u202c</b>",
    "type": "fact",
    "status": "validated",
    "supports": [],
}


def test_bidi_controls_are_isolated_and_labelled_and_markup_is_escaped() -> None:
    page = render_html("run_1", [CLAIM], {"ok": True, "policy": "strict", "failures": []})
    assert (
        "1. &lt;b&gt;<span class='ctl' data-cp='U+202E' title='U+202E'>\u202e</span>evil"
        "<span class='ctl' data-cp='U+202C' title='U+202C'>\u202c</span>&lt;/b&gt;</div>"
    ) in page
    assert ".ctl{unicode-bidi:isolate}\n" in page
    assert "<b>" not in page.split("<body>", 1)[1]


def test_a_run_without_claims_shows_its_calls() -> None:
    calls = [
        {"tool": "total", "arguments": {"items": ["plum"]}, "ok": True, "value": 7},
        {
            "tool": "explode",
            "arguments": {},
            "ok": False,
            "value": None,
            "failure": {"kind": "tool_error", "message": "<boom>"},
        },
    ]
    page = render_html("run_1", [], {"ok": True, "policy": "audit", "failures": []}, calls)
    body = page.split("</div>", 1)[1]  # after the verdict
    assert body == (
        "<h2>Calls (2)</h2>"
        "<div class='claim'><div class='statement'>"
        "1. total({&quot;items&quot;: [&quot;plum&quot;]})</div>"
        "<div class='meta'><span class='ok'>ok</span></div><pre>7</pre></div>"
        "<div class='claim'><div class='statement'>2. explode({})</div>"
        "<div class='meta'><span class='bad'>failed</span> tool_error: &lt;boom&gt;</div></div>"
        "</body></html>\n"
    )
    empty = render_html("run_1", [], {"ok": True, "policy": "audit", "failures": []})
    assert empty.endswith("</div><p class='meta'>No claims.</p></body></html>\n")
