"""The one way popprof makes a Jinja2 environment, and the renderer of the notebook displays.

:func:`make_environment` is the configuration every HTML output shares: templates are package
data read with :mod:`importlib.resources` (they work from a wheel, a zip or a source tree),
autoescaping is on (a name from a profile cannot inject markup), an undefined name is an error,
and blocks do not leave blank lines. It lives in layer 0 so that ``model/`` may use it; its
caller adds the filters it needs (``report/templating.py`` adds the ``io/units.py`` formatters).
:func:`render` renders this package's own templates (the ``_repr_html_`` of Profile, Findings, ProfileDiff
and GateResult).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

#: Package holding the templates of :func:`render`.
TEMPLATE_PACKAGE = "popprof.markup"


def template_text(package: str, name: str) -> str:
    """The source of template ``name`` in ``package``'s ``templates/`` directory (package data)."""
    return resources.files(package).joinpath("templates", name).read_text("utf-8")


def make_environment(
    package: str, filters: Mapping[str, Callable[..., Any]] | None = None
) -> jinja2.Environment:
    """A Jinja2 environment for the templates of ``package`` (autoescaping on, undefined names an error)."""
    import jinja2

    def load(name: str) -> tuple[str, str, Callable[[], bool]]:
        return template_text(package, name), name, lambda: True

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(load),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(filters or {})
    return env


@cache
def _environment() -> jinja2.Environment:
    return make_environment(TEMPLATE_PACKAGE)


def render(template: str, /, **context: Any) -> str:
    """This package's ``template`` rendered with ``context`` (every value escaped unless :func:`trusted`)."""
    return _environment().get_template(template).render(**context)


def trusted(markup: str) -> Any:
    """Markup popprof made itself (an embedded figure, an escaped evidence table): not escaped again."""
    from markupsafe import Markup

    return Markup(markup)
