"""HTML from Jinja2 templates with autoescaping, at the lowest layer: every part of popprof may render.

``Profile`` (``model/``), ``Findings`` (``rules/``), ``ProfileDiff`` and ``GateResult`` (``compare/``)
show themselves in Jupyter through :func:`render` and the templates in ``templates/``; ``report/``
builds its environment (with the number filters of ``io/units.py``) with :func:`make_environment`.
See ``docs/architecture.md``.
"""

from .render import make_environment, render, trusted

__all__ = ["make_environment", "render", "trusted"]
