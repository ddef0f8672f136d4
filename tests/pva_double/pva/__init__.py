"""Test double of the Poplar SDK's ``pva`` module (NOT the SDK). See ../README.md.

``report`` implements ``openReport`` (profile.pop); ``trace`` implements
``openTrace`` (.pvti). Both read storage files of the double's own making.
"""

try:
    from .report import OperationAnalysis, ProgramVisitor, openReport  # noqa: F401
except ImportError:  # pragma: no cover - part not written yet
    pass
try:
    from .trace import openTrace  # noqa: F401
except ImportError:  # pragma: no cover - part not written yet
    pass
