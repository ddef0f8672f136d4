"""Who a run is: run id, commit, branch and job from the options or the CI environment, and its time.

CI systems recognised (their documented variables): GitHub Actions (``GITHUB_RUN_ID``,
``GITHUB_RUN_ATTEMPT``, ``GITHUB_JOB``, ``GITHUB_SHA``, ``GITHUB_HEAD_REF`` / ``GITHUB_REF_NAME``),
GitLab CI (``CI_PIPELINE_ID``, ``CI_JOB_ID``, ``CI_JOB_NAME``, ``CI_COMMIT_SHA``, ``CI_COMMIT_REF_NAME``)
and Jenkins (``BUILD_TAG``, ``JOB_NAME``, ``GIT_COMMIT``, ``BRANCH_NAME`` / ``GIT_BRANCH``).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model.errors import UsageError


@dataclass(frozen=True)
class Identity:
    """What the catalogue records about a run besides its data (None where unknown)."""

    run_id: str | None = None
    commit: str | None = None
    branch: str | None = None
    ci_job: str | None = None
    labels: dict[str, str] = field(default_factory=dict)


def from_ci(env: Mapping[str, str] | None = None) -> Identity:
    """The run identity the CI environment gives (an empty Identity outside CI)."""
    env = os.environ if env is None else env
    if env.get("GITHUB_RUN_ID"):
        return Identity(
            run_id=f"{env['GITHUB_RUN_ID']}.{env.get('GITHUB_RUN_ATTEMPT') or '1'}",
            commit=env.get("GITHUB_SHA") or None,
            branch=env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or None,
            ci_job=env.get("GITHUB_JOB") or None,
        )
    if env.get("CI_PIPELINE_ID") or env.get("GITLAB_CI"):
        pipeline, job = env.get("CI_PIPELINE_ID", ""), env.get("CI_JOB_ID", "")
        return Identity(
            run_id=".".join(p for p in (pipeline, job) if p) or None,
            commit=env.get("CI_COMMIT_SHA") or None,
            branch=env.get("CI_COMMIT_REF_NAME") or None,
            ci_job=env.get("CI_JOB_NAME") or None,
        )
    if env.get("BUILD_TAG") or env.get("JENKINS_URL"):
        run_id = env.get("BUILD_TAG") or (
            f"{env['JOB_NAME']}-{env['BUILD_NUMBER']}"
            if env.get("JOB_NAME") and env.get("BUILD_NUMBER")
            else None
        )
        branch = env.get("BRANCH_NAME") or env.get("GIT_BRANCH") or None
        return Identity(
            run_id=run_id,
            commit=env.get("GIT_COMMIT") or None,
            branch=branch.removeprefix("origin/") if branch else None,
            ci_job=env.get("JOB_NAME") or None,
        )
    return Identity()


def resolve(
    run_id: str | None,
    commit: str | None,
    branch: str | None,
    labels: Mapping[str, str],
    env: Mapping[str, str] | None = None,
) -> Identity:
    """The options given, completed from the CI environment where an option is absent."""
    ci = from_ci(env)
    return Identity(
        run_id=run_id if run_id is not None else ci.run_id,
        commit=commit if commit is not None else ci.commit,
        branch=branch if branch is not None else ci.branch,
        ci_job=ci.ci_job,
        labels=dict(labels),
    )


def parse_labels(values: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``k=v`` strings as a dict; UsageError for one without ``=``."""
    out = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--label {value!r}: expected KEY=VALUE")
        out[key.strip()] = text
    return out


def parse_time(text: str) -> dt.datetime:
    """An ISO 8601 time as an aware UTC datetime (a time without zone is taken as UTC)."""
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--time {text!r}: not an ISO 8601 time (e.g. 2026-06-01T12:00:00Z)") from None
    try:
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    except OverflowError:  # 0001-01-01T00:00+05:00 is before the year 1 in UTC
        raise UsageError(f"--time {text!r}: outside the years 1-9999 in UTC") from None


def month_of(time: dt.datetime) -> str:
    """The partition month (YYYY-MM) of a run's time; the year always has four digits (``strftime("%Y")``
    gives ``1`` for the year 1 on glibc, a month no compaction would see)."""
    utc = time.astimezone(dt.UTC)
    return f"{utc.year:04d}-{utc.month:02d}"
