"""What changed between two profiles, for a notebook or a script: the diff's two explanation blocks as an object.

``popprof.explain(change)`` (``change`` a :class:`~popprof.compare.core.ProfileDiff`) returns
:class:`WhatChanged`: its text repr is the lines that open ``popprof diff``'s text (the same function,
:func:`popprof.report.diff_blocks.explanation_lines`), its HTML repr the blocks of ``popprof diff --format
html``, and its documents the JSON's ``what_changed``, ``memory_changed`` and ``device_memory_changed``. It lives
here, not on the diff, because the diff (``compare/``, layer 5) does not import the report (layer 7); the facade
joins them.
"""

from __future__ import annotations

from ..compare.core import ProfileDiff
from ..compare.device_memory_changed import device_memory_changed
from ..compare.memory_changed import memory_changed
from ..compare.what_changed import what_changed
from .diff_blocks import explanation_lines
from .diff_html import what_changed_html
from .fit import WIDTH, fit_lines

__all__ = ["WhatChanged", "explain_diff"]


class WhatChanged:
    """The "What changed", "What changed in memory" and "What changed in device memory" blocks of a diff.

    ``what_changed``: the time account's document (JSON-ready, the diff JSON's ``what_changed``);
    ``memory_changed``: the memory document, None when neither profile has per-tile memory by category;
    ``device_memory_changed``: the GPU allocator peak's document, None when neither trace has allocator events;
    ``doc``: both, keyed as in the diff's JSON; ``diff``: the :class:`ProfileDiff` explained.
    """

    def __init__(self, result: ProfileDiff) -> None:
        self.diff = result
        self.what_changed = what_changed(result)
        self.memory_changed = memory_changed(result)
        self.doc: dict = {"what_changed": self.what_changed}
        if self.memory_changed is not None:
            self.doc["memory_changed"] = self.memory_changed
        self.device_memory_changed = device_memory_changed(result)
        if self.device_memory_changed is not None:
            self.doc["device_memory_changed"] = self.device_memory_changed

    def text(self, width: int = WIDTH) -> str:
        """The blocks as ``popprof diff`` prints them, laid out for ``width`` columns."""
        return "\n".join(fit_lines(explanation_lines(self.diff, width), width))

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return what_changed_html(self.diff)


def explain_diff(result: ProfileDiff) -> WhatChanged:
    """What changed between ``result``'s two profiles (:class:`WhatChanged`)."""
    return WhatChanged(result)
