"""JUnit XML, the one dialect ``popprof check`` and ``popprof diff`` both write.

The layout is the one CI test reporters read (Jenkins, GitLab, the GitHub
test-report actions): always a ``<testsuites>`` root holding one
``<testsuite>`` per profile (or engine), each with ``<testcase>`` children
that may hold one ``<failure>``, one ``<skipped>`` and a ``<system-out>``.
Counts are written on both levels; the root carries no ``skipped`` count
because the common schema (Jenkins xUnit's ``junit-10.xsd``) does not allow
one there. The tests validate the output against that schema.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field


@dataclass
class Failure:
    """Why a test case failed: a one-line ``message``, a ``kind`` (the XML ``type``) and details."""

    message: str
    kind: str
    details: str = ""


@dataclass
class Case:
    """One test case: passed unless it has a ``failure`` or a ``skipped`` reason."""

    name: str
    classname: str
    failure: Failure | None = None
    skipped: str | None = None
    output: str | None = None


@dataclass
class Suite:
    """A named group of test cases (one profile, or one engine of a run directory)."""

    name: str
    cases: list[Case] = field(default_factory=list)

    @property
    def failures(self) -> int:
        """Test cases that failed."""
        return sum(case.failure is not None for case in self.cases)

    @property
    def skipped(self) -> int:
        """Test cases skipped (and not failed)."""
        return sum(case.failure is None and case.skipped is not None for case in self.cases)


def render(suites: list[Suite], name: str) -> str:
    """The JUnit XML document (with its XML declaration) for ``suites`` under a root named ``name``."""
    root = ET.Element(
        "testsuites",
        name=name,
        tests=str(sum(len(s.cases) for s in suites)),
        failures=str(sum(s.failures for s in suites)),
        errors="0",
    )
    for suite in suites:
        node = ET.SubElement(
            root,
            "testsuite",
            name=suite.name,
            tests=str(len(suite.cases)),
            failures=str(suite.failures),
            errors="0",
            skipped=str(suite.skipped),
        )
        for case in suite.cases:
            _case(node, case)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _case(parent: ET.Element, case: Case) -> None:
    node = ET.SubElement(parent, "testcase", classname=case.classname, name=case.name)
    if case.failure is not None:
        failure = ET.SubElement(node, "failure", message=_clean(case.failure.message), type=case.failure.kind)
        failure.text = _clean(case.failure.details or case.failure.message)
    elif case.skipped is not None:
        ET.SubElement(node, "skipped", message=_clean(case.skipped))
    if case.output:
        ET.SubElement(node, "system-out").text = _clean(case.output)


def _clean(text: str) -> str:
    """Drop the control characters XML 1.0 cannot hold (they would make the whole report unreadable)."""
    return "".join(ch for ch in str(text) if ch in "\t\n\r" or ord(ch) >= 0x20)
