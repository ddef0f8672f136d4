"""HTML through Jinja2 templates with autoescaping: every value from a profile is escaped on output.

The templates (``popprof/report/templates/``) are package data, read with
:mod:`importlib.resources`, so they work from a wheel, a zip or a source tree alike. Numbers are
formatted only by :mod:`popprof.io.units` (filters ``bytes``, ``time``, ``share`` for a fraction,
``points`` for a value already in percent, ``n`` for a count); long names are shortened by ``short``
as in the text tables.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

#: Package holding the templates directory.
TEMPLATE_PACKAGE = "popprof.report"


def template_text(name: str) -> str:
    """The source of template ``name`` (package data)."""
    return resources.files(TEMPLATE_PACKAGE).joinpath("templates", name).read_text("utf-8")


@cache
def environment() -> jinja2.Environment:
    """The one Jinja2 environment: autoescaping on, undefined names an error, popprof's filters."""
    import jinja2

    from ..io import units
    from .names import short_name

    def load(name: str) -> tuple[str, str, Any]:
        return template_text(name), name, lambda: True

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(load),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        bytes=units.nbytes,
        time=units.duration,
        share=units.percent,
        points=lambda value: units.value(value, "%", missing="-"),
        n=units.count,
        short=short_name,
    )
    return env


def render_template(name: str, **context: Any) -> str:
    """Template ``name`` rendered with ``context`` (values are escaped unless marked :func:`trusted`)."""
    return environment().get_template(name).render(**context)


def trusted(markup: str) -> Any:
    """Markup popprof made itself (an embedded figure, an escaped evidence table): not escaped again."""
    from markupsafe import Markup

    return Markup(markup)
