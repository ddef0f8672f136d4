"""HTML through Jinja2 templates with autoescaping: every value from a profile is escaped on output.

The templates (``popprof/report/templates/``) are package data, read with
:mod:`importlib.resources`, so they work from a wheel, a zip or a source tree alike; the environment
is the one :func:`popprof.markup.make_environment` makes for every HTML output. Numbers are
formatted only by :mod:`popprof.io.units` (filters ``bytes``, ``time``, ``share`` for a fraction,
``points`` for a value already in percent, ``n`` for a count, ``bandwidth`` for GB/s, ``number`` for a
figure without a unit); long names are shortened by ``short``
as in the text tables; a category code reads in its platform's word through ``word(platform)``
(:func:`popprof.io.words.category_word`).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from ..markup import trusted

if TYPE_CHECKING:
    import jinja2

__all__ = ["TEMPLATE_PACKAGE", "environment", "render_template", "template_text", "trusted"]

#: Package holding the templates directory.
TEMPLATE_PACKAGE = "popprof.report"


def template_text(name: str) -> str:
    """The source of template ``name`` (package data)."""
    from ..markup.render import template_text as package_template

    return package_template(TEMPLATE_PACKAGE, name)


@cache
def environment() -> jinja2.Environment:
    """The report's Jinja2 environment (:func:`popprof.markup.make_environment`) with popprof's filters."""
    from ..io import units, words
    from ..io.names import shape_words, short_name, short_names
    from ..markup import make_environment

    return make_environment(
        TEMPLATE_PACKAGE,
        {
            "bytes": units.nbytes,
            "time": units.duration,
            "share": units.percent,
            "points": lambda value: units.value(value, "%", missing="-"),
            "n": units.count,
            "bandwidth": lambda value: units.bandwidth(value, missing="-"),
            "gflop": lambda value: "-" if value is None else units.rate(value / 1e9, "GFLOP"),
            "number": lambda value: units.number(value, missing="-"),
            "short": short_name,
            "short_names": short_names,  # the names of one table: those that read the same are numbered
            "shapes": lambda value: shape_words(value, width=60) or "-",
            "word": words.category_word,
        },
    )


def render_template(name: str, **context: Any) -> str:
    """Template ``name`` rendered with ``context`` (values are escaped unless marked :func:`trusted`)."""
    return environment().get_template(name).render(**context)
