"""Ids the trace readers stand in for ids written as text (pandas-free: the parse workers import it)."""

from __future__ import annotations

#: pid / tid values from here up are a reader's stand-ins for ids written as text (kineto's ``"Spans"``,
#: ``"stream 7"``): not in the file; the text is the process or thread name.
SYNTHETIC_ID_BASE = 1 << 40
