"""What a session reports: the HTML page (:mod:`.html`) and the results file (:mod:`.results`).

``activeeval.session.report`` was the HTML report's module before session/ was split into rooms (issue 29):
its names stay importable from here.
"""

from typing import Any

from activeeval.session.report import html as _html
from activeeval.session.report.html import readable_options, render_report, write_report

__all__ = ["readable_options", "render_report", "write_report"]


def __getattr__(name: str) -> Any:  # the old module's other names (OPTION_NAMES, ...)
    try:
        return getattr(_html, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
