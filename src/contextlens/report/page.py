"""What every page of the report shares: the template environment, the inline CSS and
scripts with a Content-Security-Policy that allows only them, and JSON for scripts.

A page loads nothing from anywhere. Everything from the evaluated system is escaped by
Jinja2's autoescape; data for scripts goes through ``<script type="application/json">``
blocks with ``<``, ``>`` and ``&`` escaped, and the scripts build the DOM from it with
``textContent``, never ``innerHTML``. Secrets are masked in each value before it is
escaped or serialized (each string a template prints, each string of the data for scripts,
the ids in links), never in the page's text, so a mask cannot cut a string or a bracket
of the JSON the scripts read.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from functools import cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from contextlens.files import make_folder, write_parts
from contextlens.redact import redact, redact_value
from contextlens.report.format import fmt_count, fmt_score
from contextlens.runfiles import confined, plain_name

__all__ = ["case_href", "clean", "page_path", "render_page", "script_json", "write_page"]


def case_href(case_id: Any, metric: Any = None) -> str:
    """The link that opens a case in the report (``#case=ID``, and ``&metric=NAME`` to open
    it on that metric's evidence), each part percent-encoded."""
    href = "#case=" + quote(redact(str(case_id)), safe="")
    return href if metric is None else f"{href}&metric={quote(redact(str(metric)), safe='')}"


def script_json(data: Any) -> Markup:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&``; the
    secrets in its strings masked."""
    data = redact_value(data)
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=_masked_str)
    except ValueError:  # a NaN or an infinity: null in strict JSON
        text = json.dumps(clean(data), ensure_ascii=False, allow_nan=False, default=_masked_str)
    for char, code in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, code)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


def _masked_str(value: Any) -> str:
    """A value JSON cannot hold (a date, a path) as its text, masked."""
    return redact(str(value))


def clean(value: Any) -> Any:
    """``value`` with non-finite floats as None, for strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


@cache
def asset(name: str) -> str:
    return (
        resources.files("contextlens.report")
        .joinpath("templates")
        .joinpath(name)
        .read_text("utf-8")
    )


def _printed(value: Any) -> Any:
    """What a template prints, its secrets masked: markup the report built (the data for
    scripts, its plots) is masked where it is made and kept as it is."""
    if hasattr(value, "__html__") or value is None or isinstance(value, (int, float)):
        return value
    return redact(str(value))


@cache
def environment() -> Environment:
    env = Environment(
        finalize=_printed,
        loader=PackageLoader("contextlens.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["score"] = fmt_score
    env.filters["count"] = fmt_count
    env.filters["case_href"] = case_href
    return env


def _csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def version() -> str:
    try:
        return metadata.version("contextlens")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return ""


def render_page(template: str, *, scripts: Sequence[str], **context: Any) -> str:
    """The page ``template`` with ``context``, the report's CSS and the script files
    ``scripts`` (one inline script, allowed by its hash and nothing else)."""
    script = "\n".join(asset(name) for name in scripts)
    return (
        environment()
        .get_template(template)
        .render(
            script=Markup(script),
            styles=Markup(asset("report.css")),
            csp=f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
            f"script-src '{_csp_hash(script)}'; base-uri 'none'; form-action 'none'",
            version=version(),
            generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            **context,
        )
    )


def page_path(path: str | Path, default_name: str) -> Path:
    """The file a page for ``path`` is written to (a folder gets ``default_name``), its
    folder made. ``default_name`` (made of run ids, which may come from elsewhere) must be
    a plain file name that stays in the folder: else an
    :class:`~contextlens.files.OutputError`."""
    target = Path(path)
    if target.is_dir() and not target.is_symlink():
        target = confined(target, default_name)
    elif not plain_name(default_name):  # a page path its caller joined from the name
        confined(target.parent, default_name)
    make_folder(target.parent)
    return target


def write_page(page: str | Iterable[str], path: str | Path, default_name: str) -> Path:
    """Write ``page`` (its text, or its pieces) to :func:`page_path` whole and return the
    file; the page was masked as it was rendered (:func:`render_page`, :func:`script_json`).
    Nothing is written when ``default_name`` is not a plain name."""
    return write_parts(page_path(path, default_name), [page] if isinstance(page, str) else page)
