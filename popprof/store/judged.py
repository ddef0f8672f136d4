"""The ``findings`` and ``account`` kinds: each run's findings and time account, kept by ``store add``.

Nothing is computed here. Both come from the analysis tables ``popprof query`` gives one profile
(:mod:`popprof.analysis_tables`): ``findings`` is :func:`popprof.rules.check` with the configuration ``store
add`` reads (``[tool.popprof.rules]``, else the defaults), as ``popprof check`` runs it; ``account`` is the run
rows of :func:`popprof.metrics.account.run_account`; the run's limit (:func:`limit_entry`) goes into the
catalogue manifest's ``judged`` beside them. A profile the account does not apply to (no device time)
gets no ``account`` rows, as one with no finding gets no ``findings`` rows.

Each findings row carries :func:`rules_hash` of the rule settings that judged it (the rules enabled and every
parameter, resolved: the defaults and a configuration repeating them hash alike) and the popprof version that
ran them, so two runs' findings can be seen to come from the same judge.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._version import __version__
from ..model.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from ..model.profile import Profile

#: Hex digits of the rule settings' SHA-256 kept on each findings row.
RULES_HASH_DIGITS = 16


def rules_hash(config: Mapping | None = None) -> str:
    """The first :data:`RULES_HASH_DIGITS` hex digits of the SHA-256 of the rule settings ``config`` gives:
    the ids of the rules ``check`` runs and each one's resolved parameters (a UsageError on a bad rules
    table, before any profile is read)."""
    from ..rules.base import plan

    selected, params = plan(config=config)
    ids = sorted(r.id for r in selected)
    settings = {"rules": ids, "params": {rid: params[rid] for rid in ids}}
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:RULES_HASH_DIGITS]


def findings_frame(profile: Profile, config: Mapping | None = None) -> pd.DataFrame:
    """The run's findings: the ``findings`` analysis table of ``profile`` (``popprof.rules.check`` with
    ``config``), with ``rules_sha256`` (:func:`rules_hash`) and ``popprof_version`` on every row."""
    from ..analysis_tables import build

    frame = build(profile, "findings", config).copy()
    frame["rules_sha256"] = rules_hash(config)
    frame["popprof_version"] = __version__
    return frame


def account_frame(profile: Profile) -> pd.DataFrame:
    """The run's time account: the ``account`` analysis table of ``profile`` (one row per device); empty when
    it does not apply (the profile records no device time)."""
    import pandas as pd

    from ..analysis_tables import build
    from ..metrics.account import COLUMNS

    try:
        return build(profile, "account")
    except UsageError:
        return pd.DataFrame(columns=COLUMNS)


def limit_entry(profile: Profile) -> dict | None:
    """The run's limit as summary states it (:func:`popprof.metrics.limit.run_limit`): ``{"limit", "share"}``,
    kept in the manifest's ``judged``; None without a time account."""
    from ..metrics.limit import run_limit

    limit = run_limit(profile)
    return None if limit is None else {"limit": limit["limit"], "share": limit["share"]}


__all__ = ["RULES_HASH_DIGITS", "account_frame", "findings_frame", "limit_entry", "rules_hash"]
