"""Render the report data into the one-file HTML report (template shipped as package data).

The data goes into a ``<script type="application/json">`` block (gzip + base64 above
:data:`COMPRESS_ABOVE` bytes); :func:`embed_json` escapes
``<``, ``>``, ``&``, U+2028 and U+2029, so no text from a model (``</script>``, HTML, ...) can end the
block or become markup, and the page's script renders every string with ``textContent``.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
from importlib import resources
from typing import Any

PLACEHOLDER = "<!--__REPORT_DATA__-->"
#: JSON above this many bytes is embedded gzip-compressed and base64-encoded (the browser unpacks it with its
#: own DecompressionStream): a 100-step run's samples shrink ~10x, and the page then opens well under 2 s
COMPRESS_ABOVE = 2_000_000
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


def render(data: dict[str, Any], compress_above: int = COMPRESS_ABOVE) -> str:
    """The whole HTML page for ``data`` (:func:`baselines.report.data.collect`)."""
    head, sep, tail = template().partition(PLACEHOLDER)
    if not sep:
        raise RuntimeError(f"the report template has no {PLACEHOLDER} slot")
    text = embed_json(data)
    if len(text) > compress_above:
        packed = base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)).decode("ascii")
        block = f'<script type="application/gzip+base64" id="report-data" data-encoding="gzip+base64">{packed}</script>'
    else:
        block = f'<script type="application/json" id="report-data">{text}</script>'
    return head + block + tail


def extract(html: str) -> Any:
    """The data embedded in a report page, either encoding (for tests and tools)."""
    start = html.index('id="report-data"')
    body = html[html.index(">", start) + 1: html.index("</script>", start)]
    if 'data-encoding="gzip+base64"' in html[start: html.index(">", start)]:
        body = gzip.decompress(base64.b64decode(body)).decode("utf-8")
    return json.loads(body)
