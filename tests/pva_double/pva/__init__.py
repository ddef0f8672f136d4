"""Test double of the Poplar SDK's ``pva`` module (NOT the SDK). See ../README.md.

``report`` implements ``openReport`` (profile.pop), ``OperationAnalysis``, ``ProgramVisitor``
and the pybind11-style enums ``Program.Type``, ``Target.Type``, ``IPU.Architecture``;
``trace`` implements ``openTrace`` (.pvti). Both read storage files of the double's own making.
"""

from .report import IPU, OperationAnalysis, Program, ProgramVisitor, Target, openReport  # noqa: F401
from .trace import openTrace  # noqa: F401
