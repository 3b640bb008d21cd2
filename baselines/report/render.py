"""Render the report data into the one-file HTML report (template shipped as package data).

The data goes into a ``<script type="application/json">`` block; :func:`embed_json` escapes
``<``, ``>``, ``&``, U+2028 and U+2029, so no text from a model (``</script>``, HTML, ...) can end the
block or become markup, and the page's script renders every string with ``textContent``.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from typing import Any

PLACEHOLDER = "__REPORT_DATA__"
_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _finite(value: Any) -> Any:
    """``value`` with NaN/inf floats replaced by None, recursively (JSON.parse refuses NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def embed_json(data: Any) -> str:
    """JSON text of ``data`` that is safe inside an HTML ``<script>`` element."""
    text = json.dumps(_finite(data), ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=str)
    for raw, esc in _ESCAPES.items():
        text = text.replace(raw, esc)
    return text


def template() -> str:
    return resources.files("baselines.report").joinpath("template.html").read_text(encoding="utf-8")


def render(data: dict[str, Any]) -> str:
    """The whole HTML page for ``data`` (:func:`baselines.report.data.collect`)."""
    head, sep, tail = template().partition(PLACEHOLDER)
    if not sep:
        raise RuntimeError(f"the report template has no {PLACEHOLDER} slot")
    return head + embed_json(data) + tail


def extract(html: str) -> Any:
    """The data embedded in a report page (for tests and tools)."""
    start = html.index('<script type="application/json" id="report-data">') + len(
        '<script type="application/json" id="report-data">')
    return json.loads(html[start: html.index("</script>", start)])
