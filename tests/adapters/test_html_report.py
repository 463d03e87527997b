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
