"""Test double of the Poplar SDK's ``pva`` module (NOT the SDK). See ../README.md.

``report`` implements ``openReport`` (profile.pop); ``trace`` implements
``openTrace`` (.pvti). Both read storage files of the double's own making.
"""

from .report import OperationAnalysis, ProgramVisitor, openReport  # noqa: F401
from .trace import openTrace  # noqa: F401
