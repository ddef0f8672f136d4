"""Rules as data: the :class:`Rule` registry, :class:`Finding` / :class:`Findings`, and :func:`check`.

A rule is a function ``(profile, ctx) -> list[Finding]`` registered with
:func:`rule`, which records its id, one-line description, the tables it needs
(alternatives: the rule runs when any one set is present), its parameters
with defaults, and its advice, per platform when the advice differs (``{"ipu":
..., "gpu": ...}``: a finding on a GPU trace gets the GPU text, chosen by data,
not by ``if`` in the rule). :func:`check` hands each rule a :class:`RuleContext`:
its resolved parameters, the profile's platform and a ``finding(...)`` builder
bound to the rule and platform, so a rule never looks itself up. A rule reads
its figures from :mod:`popprof.metrics` and adds a threshold, advice and a gain
formula (:class:`Gain`). A rule that cannot run raises
:class:`NotEvaluated` with the reason; :func:`check` reports it as
"not evaluated: needs ..." instead of failing.

:func:`check` orders findings by their estimated gain's :attr:`Gain.fraction`,
largest first; findings without a gain follow, worst severity first.

Thresholds are inclusive: a value exactly at a threshold is flagged (``>=``).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..io import jsonout, units
from ..io.config import Config
from ..io.plural import plural
from ..metrics.execution import total_time_us
from ..metrics.trace import time_origin
from ..model.errors import NotEvaluated, UsageError
from ..model.profile import NEEDS_HINT, Profile
from .platform import advice_platform as platform_advice
from .platform import platform_of
from .pricing import count_once

#: What a rule needs, by table, where the profile module's hint does not fit a rule's alternatives.
RULE_HINTS: dict[str, str] = {
    "memory_totals": "needs memory totals (a Poplar text summary)",
    "events": "needs a trace (.pvti or Chrome trace JSON)",
}

#: Platforms advice can be written for; ``ipu`` is popprof's home platform and the fallback. ``tpu`` is a
#: ``gpu`` profile whose advice speaks of JAX and XLA (:func:`popprof.rules.platform.advice_platform`).
PLATFORMS: tuple[str, ...] = ("ipu", "gpu", "tpu")
#: The advice a platform falls back on when a rule has none written for it (then the IPU's).
ADVICE_FALLBACK: dict[str, str] = {"tpu": "gpu"}

#: Severities, lowest first.
SEVERITIES: tuple[str, ...] = ("info", "warning", "error")
_RANK = {s: i for i, s in enumerate(SEVERITIES)}
#: Colour of each severity where findings are shown in a notebook.
SEVERITY_COLOURS = {"error": "#c62828", "warning": "#ef6c00", "info": "#1565c0"}


def severity_rank(severity: str | None) -> int:
    """Order of a severity (``None`` ranks below ``info``)."""
    return -1 if severity is None else _RANK[severity]


#: Units of an estimated gain: time (microseconds) or memory (bytes).
GAIN_UNITS: tuple[str, ...] = ("us", "bytes")


@dataclass(frozen=True)
class Gain:
    """What fixing a finding would buy at most: an honest upper bound and how it was derived.

    ``value`` is in ``unit`` (``us`` of device time, or ``bytes`` of memory) and never exceeds the time or
    memory the finding rests on; ``basis`` is one sentence saying how it was derived. ``whole`` is what the
    gain is a part of (the device's window in us, the memory in bytes), so gains of either unit rank
    together by :attr:`fraction`. ``rests_on`` names the time-account parts the gain is taken from
    (``idle_host``, ``communication``, ...), so that gains resting on the same time are counted once.
    ``device`` is the device whose account the gain is taken from, as the account labels it (``rank 1
    gpu:1``, ``gpu:0``), when the gain rests on one device's time (None: the devices' pooled time, or the
    device the finding's ``where["devices"]`` names alone). ``of`` names the whole in words where the unit and
    ``device`` do not say it (``tile 289's capacity``, ``the target's memory``): :attr:`whole_words`.
    ``spans``: the device time the gain rests on, when the rule knows it, as sorted, disjoint intervals
    ``(starts, ends)`` per device (by the account's label; ``None`` as the key: the gain's own device), so
    that counting once (:mod:`popprof.rules.pricing`) can tell gains on the same time from gains on the
    same part at other times. Not in the JSON.
    """

    value: float
    unit: str
    basis: str
    whole: float | None = None
    rests_on: tuple[str, ...] = ()
    device: str | None = None
    of: str | None = None
    spans: dict | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.unit not in GAIN_UNITS:
            raise ValueError(f"gain unit {self.unit!r}: expected one of {GAIN_UNITS}")

    @property
    def fraction(self) -> float:
        """The gain as a share of its whole (0 when the whole is unknown or empty)."""
        if not self.whole or self.whole <= 0:
            return 0.0
        return min(1.0, max(0.0, float(self.value) / float(self.whole)))

    @property
    def whole_words(self) -> str:
        """What :attr:`whole` is, in the words every rendering of the gain uses: ``of`` when the rule gave it,
        else a time gain's device window (``rank 1 gpu:1's window``) or, for a gain pooled over devices, ``the
        devices' windows`` (their sum); ``the memory`` for a byte gain whose rule did not say whose."""
        if self.of:
            return self.of
        if self.unit == "us":
            return f"{self.device}'s window" if self.device else "the devices' windows"
        return "the memory"

    def text(self) -> str:
        """The gain in words: ``up to 287.76 ms (23.4 % of rank 1 gpu:1's window) - <basis>``."""
        return units.gain(self.value, self.unit, self.whole, self.basis, self.whole_words)

    def to_dict(self) -> dict:
        """``{value, unit, basis}`` (plus ``whole`` and its words ``of``, ``rests_on`` and ``device`` when
        known), JSON-ready."""
        out: dict = {"value": _num(self.value), "unit": self.unit, "basis": self.basis}
        if self.whole is not None:
            out["whole"] = _num(self.whole)
            out["of"] = self.whole_words
        if self.rests_on:
            out["rests_on"] = list(self.rests_on)
        if self.device:
            out["device"] = self.device
        return out


def tile_whole(tile: str, used: float, capacity: float | None) -> str:
    """What a gain on one tile is a share of, in words: ``tile 289's capacity``, or ``the bytes on tile 289``
    when they are above its capacity (or it is unknown)."""
    return f"{tile}'s capacity" if capacity and float(capacity) >= float(used) else f"the bytes on {tile}"


@dataclass
class Finding:
    """One flagged observation of a rule.

    ``figure`` names the figure the finding rests on (a metric or time-account part), ``share`` is that
    figure's share of its whole (the run's window, the memory), and ``estimated_gain`` what fixing it
    would buy (:class:`Gain`).
    """

    rule_id: str
    severity: str
    title: str
    message: str
    value: float | None = None
    threshold: float | None = None
    where: dict = field(default_factory=dict)
    advice: str = ""
    evidence: pd.DataFrame | None = None
    figure: str | None = None
    share: float | None = None
    estimated_gain: Gain | None = None

    def to_dict(self) -> dict:
        """A JSON-ready dict (without the evidence frame; tuples become lists)."""
        return {
            "rule_id": self.rule_id,
            "severity": self.severity,
            "title": self.title,
            "message": self.message,
            "value": _num(self.value),
            "threshold": _num(self.threshold),
            "figure": self.figure,
            "share": _num(self.share),
            "estimated_gain": None if self.estimated_gain is None else self.estimated_gain.to_dict(),
            "where": jsonout.plain(self.where),
            "advice": self.advice,
        }


def _num(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


@dataclass(frozen=True)
class Rule:
    """A registered rule: id, description, needed tables, parameters with defaults, advice per platform."""

    id: str
    description: str
    needs: tuple[tuple[str, ...], ...]
    params: dict[str, object]
    advice_by_platform: dict[str, str]
    func: Callable[[Profile, RuleContext], list[Finding]]

    @property
    def advice(self) -> str:
        """The advice for popprof's home platform (the IPU), or the only advice the rule has."""
        return self.advice_for("ipu")

    def advice_for(self, platform: str | None) -> str:
        """The advice written for ``platform`` (``ipu`` | ``gpu`` | ``tpu``), else its fallback's
        (:data:`ADVICE_FALLBACK`), else the IPU text."""
        texts = self.advice_by_platform
        platform = platform or "ipu"
        return (
            texts.get(platform)
            or texts.get(ADVICE_FALLBACK.get(platform, "ipu"))
            or texts.get("ipu")
            or next(iter(texts.values()), "")
        )

    @property
    def family(self) -> str:
        """The rule family: the id's first part (``memory`` of ``memory.headroom``)."""
        return self.id.split(".", 1)[0]

    def needs_text(self) -> str:
        """The needed tables as text, alternatives joined by ``or``."""
        return " or ".join(" + ".join(alt) for alt in self.needs) if self.needs else "nothing"

    def missing_reason(self, profile: Profile) -> str | None:
        """Why the rule cannot run on ``profile`` (``None`` when one set of needed tables is present)."""
        if not self.needs or any(not profile.missing(alt) for alt in self.needs):
            return None
        hints = []
        for alt in self.needs:
            for table in profile.missing(alt):
                hint = RULE_HINTS.get(table) or NEEDS_HINT.get(table, f"needs a {table!r} table")
                if hint not in hints:
                    hints.append(hint)
        return "; or ".join(hints)

    def finding(
        self,
        severity: str,
        title: str,
        message: str,
        *,
        value: float | None = None,
        threshold: float | None = None,
        where: dict | None = None,
        evidence: pd.DataFrame | None = None,
        advice: str | None = None,
        platform: str | None = None,
        figure: str | None = None,
        share: float | None = None,
        gain: Gain | None = None,
    ) -> Finding:
        """Make a finding of this rule, its advice filled in for ``platform`` (the IPU when not given)."""
        return Finding(
            self.id,
            severity,
            title,
            message,
            value,
            threshold,
            dict(where or {}),
            self.advice_for(platform) if advice is None else advice,
            evidence,
            figure,
            share,
            gain,
        )


@dataclass(frozen=True)
class RuleContext:
    """What :func:`check` hands a rule: its resolved ``params``, the profile's ``platform`` (``ipu`` | ``gpu``,
    :func:`popprof.rules.platform.platform_of`) and :meth:`finding`, bound to the rule and the platform."""

    rule: Rule
    params: Mapping[str, object]
    platform: str = "ipu"
    #: the platform the advice is written for (``tpu`` on a TPU trace, whose ``platform`` is ``gpu``)
    advice_platform: str | None = None

    def finding(self, severity: str, title: str, message: str, **fields: Any) -> Finding:
        """A finding of this rule with the advice for this profile's platform: :meth:`Rule.finding`'s keyword
        fields (``value``, ``threshold``, ``where``, ``evidence``, ``figure``, ``share``, ``gain``, ...);
        ``platform=`` overrides the profile's (the IPU for a finding on IPU execution steps, whatever else
        the profile holds)."""
        fields["platform"] = fields.get("platform") or self.advice_platform or self.platform
        return self.rule.finding(severity, title, message, **fields)


def ipu_run_gain(
    profile: Profile, spent_us: float | None, basis: str, rests_on: tuple[str, ...]
) -> Gain | None:
    """A time gain of ``spent_us`` (on the mean IPU) out of the run's window, the busiest IPU's time
    (:func:`popprof.metrics.execution.total_time_us`), never above it; None without a clock or a time."""
    window = total_time_us(profile)
    if spent_us is None or not window:
        return None
    return Gain(min(spent_us, window), "us", basis, whole=window, rests_on=rests_on)


#: The registry: rule id -> Rule, in registration order.
RULES: dict[str, Rule] = {}


def rule(
    rule_id: str,
    description: str,
    *,
    needs: Iterable[Iterable[str]] | Iterable[str] = (),
    params: Mapping[str, object] | None = None,
    advice: str | Mapping[str, str] = "",
) -> Callable:
    """Register a rule function ``(profile, ctx) -> list[Finding]`` (``ctx``: a :class:`RuleContext`).

    ``needs`` is a list of table names, or a list of alternatives (lists of
    table names): the rule runs when all tables of any one alternative are
    present and non-empty. ``advice`` is one text, or one per platform
    (``{"ipu": ..., "gpu": ...}``; see :data:`PLATFORMS`).
    """
    by_platform = {"ipu": advice} if isinstance(advice, str) else dict(advice)
    unknown = set(by_platform) - set(PLATFORMS)
    if unknown:
        raise ValueError(f"rule {rule_id!r}: advice for unknown platform(s) {sorted(unknown)}")
    needs_list = list(needs)
    if needs_list and isinstance(needs_list[0], str):
        alternatives: tuple[tuple[str, ...], ...] = (tuple(needs_list),)  # type: ignore[arg-type]
    else:
        alternatives = tuple(tuple(alt) for alt in needs_list)

    def register(
        func: Callable[[Profile, RuleContext], list[Finding]],
    ) -> Callable[[Profile, RuleContext], list[Finding]]:
        if rule_id in RULES:
            raise ValueError(f"rule {rule_id!r} registered twice")
        RULES[rule_id] = Rule(rule_id, description, alternatives, dict(params or {}), by_platform, func)
        if not func.__doc__:  # the registry's description, for help()
            func.__doc__ = f"Rule ``{rule_id}``: {description}."
        return func

    return register


def band(value: float | None, warning: float | None, error: float | None) -> tuple[str | None, float | None]:
    """The severity a value falls in (inclusive thresholds) and the threshold it met."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None, None
    if error is not None and value >= error:
        return "error", error
    if warning is not None and value >= warning:
        return "warning", warning
    return None, None


def held_to_stake(severity: str, stake: float | None, warning: float, error: float) -> str:
    """A finding's severity held to what fixing it could buy, ``stake`` (a share of its whole): at most a
    warning from ``warning`` and an error from ``error`` of it, info below. A finding whose figure is in the
    error band but whose fix would buy 5 % of the run is not an error."""
    if stake is None:
        return severity
    allowed = band(stake, warning, error)[0] or "info"
    return min(severity, allowed, key=severity_rank)


def held_words(held: str, params: Mapping[str, Any]) -> str:
    """What a message adds after the stake when :func:`held_to_stake` lowered its severity to ``held``, with
    the rule's ``span_warning`` and ``span_error``: ``", so info (warning at >= 10 % of it, error at >= 30 %)"``."""
    return (
        f", so {held} (warning at >= {units.limit_percent(params['span_warning'])} of it, error at >= "
        f"{units.limit_percent(params['span_error'])})"
    )


# -- selection and parameters ---------------------------------------------


def select_rules(rules: Iterable[str] | None = None, skip: Iterable[str] | None = None) -> list[Rule]:
    """Rules matching ``rules`` (ids, globs or family names; all when ``None``) minus ``skip``, in registry order.

    A pattern that matches no rule is a :class:`UsageError`.
    """
    chosen = set(RULES) if rules is None else set(_match_all(rules))
    skipped = set(_match_all(skip or ()))
    return [r for rid, r in RULES.items() if rid in chosen and rid not in skipped]  # registry order


def _match_all(patterns: Iterable[str]) -> list[str]:
    out: list[str] = []
    for pattern in patterns:
        hits = _match(pattern)
        if not hits:
            raise UsageError(f"unknown rule {pattern!r}; known: {', '.join(RULES)} (see `popprof rules`)")
        out.extend(h for h in hits if h not in out)
    return out


def _match(pattern: str) -> list[str]:
    if pattern in RULES:
        return [pattern]
    if any(ch in pattern for ch in "*?["):
        return [r for r in RULES if fnmatch.fnmatchcase(r, pattern)]
    return [r for r in RULES if r.startswith(pattern + ".")]  # a family name such as "memory"


def flatten_params(params: Mapping[str, object] | None) -> dict[str, object]:
    """``{"a.b": {"c": 1}}`` or nested TOML tables -> ``{"a.b.c": 1}``."""
    flat: dict[str, object] = {}

    def walk(prefix: str, value: object) -> None:
        if isinstance(value, Mapping):
            for key, sub in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)
        else:
            flat[prefix] = value

    walk("", params or {})
    return flat


def resolve_params(overrides: Mapping[str, object] | None) -> dict[str, dict[str, object]]:
    """Every rule's parameters: defaults updated with ``overrides`` (``"rule.param" -> value``).

    Unknown rules or parameters and values of the wrong type raise :class:`UsageError`.
    """
    resolved = {rid: dict(r.params) for rid, r in RULES.items()}
    for key, raw in flatten_params(overrides).items():
        rule_id, _, name = key.rpartition(".")
        if rule_id not in RULES:
            raise UsageError(
                f"unknown rule in parameter {key!r}; expected RULE.PARAM, e.g. "
                "memory.headroom.warning (see `popprof rules`)"
            )
        if name not in RULES[rule_id].params:
            known = ", ".join(RULES[rule_id].params) or "none"
            raise UsageError(f"rule {rule_id!r} has no parameter {name!r}; its parameters: {known}")
        resolved[rule_id][name] = coerce_param(key, RULES[rule_id].params[name], raw)
    return resolved


def coerce_param(key: str, default: object, raw: object) -> object:
    """Convert ``raw`` (a string from ``--set`` or a TOML value) to the type of ``default``."""
    try:
        if isinstance(default, bool):
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in {"true", "1", "yes", "on"}:
                return True
            if text in {"false", "0", "no", "off"}:
                return False
            raise ValueError(raw)
        if isinstance(default, int):
            number = float(raw) if not isinstance(raw, int) else raw
            if number != int(number):
                raise ValueError(raw)
            return int(number)
        if isinstance(default, float):
            if isinstance(raw, bool):
                raise ValueError(raw)
            number = units.parse_share(raw)
            if math.isnan(number):  # a NaN threshold would silently never flag anything
                raise ValueError(raw)
            return number
        return str(raw)
    except (TypeError, ValueError):
        kind = type(default).__name__
        raise UsageError(f"bad value {raw!r} for {key}: expected {kind} (default {default!r})") from None


def parse_set(items: Iterable[str]) -> dict[str, str]:
    """Parse ``--set rule.param=value`` items into a dict (UsageError on bad syntax)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or "." not in key:
            raise UsageError(
                f"bad --set {item!r}: expected RULE.PARAM=VALUE, e.g. memory.headroom.warning=0.8"
            )
        out[key.strip()] = value.strip()
    return out


# -- results ----------------------------------------------------------------

FRAME_COLUMNS = ["rule_id", "severity", "title", "message", "value", "threshold", "where", "advice"]


@dataclass
class Findings:
    """The result of :func:`check` on one profile."""

    items: list[Finding] = field(default_factory=list)
    not_evaluated: list[tuple[str, str]] = field(default_factory=list)
    evaluated: list[str] = field(default_factory=list)
    profile_name: str = ""
    source: str = ""
    #: The run's limit (:func:`popprof.metrics.limit.run_limit`), as summary states it; None without a time account.
    limit: dict | None = None

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    @property
    def worst(self) -> str | None:
        """The highest severity among the findings, or ``None`` when there are none."""
        return max((f.severity for f in self.items), key=severity_rank, default=None)

    def at_least(self, severity: str) -> list[Finding]:
        """Findings at or above ``severity``."""
        return [f for f in self.items if severity_rank(f.severity) >= severity_rank(severity)]

    def counts(self) -> dict[str, int]:
        """Number of findings per severity (every severity present as a key)."""
        out = dict.fromkeys(SEVERITIES, 0)
        for f in self.items:
            out[f.severity] += 1
        return out

    def by_rule(self, rule_id: str) -> list[Finding]:
        """The findings of one rule."""
        return [f for f in self.items if f.rule_id == rule_id]

    @property
    def frame(self) -> pd.DataFrame:
        """The findings as a DataFrame (one row per finding, in :func:`check`'s order: largest gain first)."""
        rows = [{c: getattr(f, c) for c in FRAME_COLUMNS} for f in self.items]
        frame = pd.DataFrame(rows, columns=FRAME_COLUMNS)
        if not frame.empty:
            frame["value"] = frame["value"].astype("float64")
            frame["threshold"] = frame["threshold"].astype("float64")
        return frame

    def to_dict(self) -> dict:
        """A JSON-ready dict of this profile's results."""
        return {
            "profile": self.profile_name,
            "source": self.source,
            "worst": self.worst,
            "counts": self.counts(),
            "findings": [f.to_dict() for f in self.items],
            "not_evaluated": [{"rule_id": r, "reason": why} for r, why in self.not_evaluated],
            "passed": [r for r in self.evaluated if not self.by_rule(r)],
            "limit": self.limit,
        }

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in self.counts().items() if n)
        return (
            f"<Findings {self.profile_name!r}: {counts or 'no findings'}; "
            f"{len(self.not_evaluated)} not evaluated>"
        )

    def _repr_html_(self) -> str:
        """The findings in Jupyter, largest gain first, then what was not evaluated
        (``markup/templates/findings.html.j2``)."""
        from ..markup import render

        gains = [g.text() if (g := f.estimated_gain) is not None else "" for f in self.items]
        return render(
            "findings.html.j2",
            profile=self.profile_name,
            findings=self.items,
            gains=gains,
            not_evaluated=self.not_evaluated,
            colours=SEVERITY_COLOURS,
        )


def plan(
    rules: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    params: Mapping[str, object] | None = None,
    config: Mapping[str, object] | None = None,
) -> tuple[list[Rule], dict[str, dict[str, object]]]:
    """The rules to run and their resolved parameters (UsageError on unknown rules or bad parameters).

    See :func:`check` for the arguments.
    """
    rules = [rules] if isinstance(rules, str) else rules
    skip = [skip] if isinstance(skip, str) else skip
    raw = Config.of(config).rules
    if not isinstance(raw, Mapping):
        raise UsageError(
            "the [rules] configuration must be a table, e.g. [tool.popprof.rules] with "
            '"memory.headroom.warning" = 0.8'
        )
    section = dict(raw)
    enable = section.pop("enable", None)
    disable = section.pop("disable", None) or []
    enable = [enable] if isinstance(enable, str) else enable  # one pattern, not its characters
    disable = [disable] if isinstance(disable, str) else disable
    for key in ("fail_on", "fail-on"):
        section.pop(key, None)
    if rules is not None:  # rules named explicitly replace the config's enable and disable lists
        enable, disable = rules, []
    selected = select_rules(enable, [*disable, *(skip or [])])
    merged = flatten_params(section)
    merged.update(flatten_params(params))
    return selected, resolve_params(merged)


def _device_side_reason(profile: Profile, reason: str) -> str:
    """A rule's reason for not running, told as the device side being missing when it is (kernel launches
    on the host and no device event: the profiler did not record the device, and no device map helps)."""
    from ..metrics.devices import launches_without_device
    from ..trace.intervals import NO_DEVICE

    if reason != NO_DEVICE:
        return reason
    calls = profile.cached("rules.launches_without_device", lambda: launches_without_device(profile))
    if not calls:
        from ..metrics.devices import named_devices_without_activity

        named = named_devices_without_activity(profile)
        if named:  # the GPUs are named, none of their work was recorded
            return (
                f"needs device activity: no device activity was recorded (the trace names "
                f"{plural(len(named), 'device')}, {', '.join(sorted(set(named)))}, but holds no kernel, copy or "
                "launch): record with the device's activity (torch.profiler's ProfilerActivity.CUDA)"
            )
        return reason
    return (
        f"needs device activity: the trace's device side is missing ({sum(calls.values()):,} kernel launch(es) "
        "on the host, no device event; see host.launches-without-device): the profiler did not record the "
        "device, or stopped before writing it; --device-map cannot bring it back"
    )


def check(
    profile: Profile,
    rules: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    params: Mapping[str, object] | None = None,
    config: Mapping[str, object] | None = None,
) -> Findings:
    """Run the enabled rules on ``profile`` and collect their findings.

    ``rules``/``skip``: ids, globs (``memory.*``) or family names. ``params``:
    ``{"memory.headroom.warning": 0.8}`` (or nested). ``config``: the
    ``[tool.popprof]`` table (see :func:`popprof.config.load_config`); its
    ``rules`` sub-table gives ``enable``, ``disable`` and parameters; explicit
    ``rules`` replace both lists, ``skip`` adds to ``disable``, and ``params``
    override the config's parameters. No config file is read here.
    """
    selected, resolved = plan(rules, skip, params, config)
    result = Findings(profile_name=profile.name, source=profile.source)
    # The platform is decided when the first rule runs (a profile no rule can read is not looked at).
    platform: str | None = None
    advice_platform: str | None = None
    replay: str | None | bool = False  # why a trace's times cannot be judged; looked at once, when needed
    for r in selected:
        reason = r.missing_reason(profile)
        if reason is None and any("events" in alt for alt in r.needs):
            if replay is False:
                replay = _replay_reason(profile)
            reason = replay
        if reason is None:
            try:
                if platform is None:
                    platform, advice_platform = platform_of(profile), platform_advice(profile)
                found = r.func(profile, RuleContext(r, resolved[r.id], platform, advice_platform)) or []
            except NotEvaluated as exc:
                reason = _device_side_reason(profile, str(exc))
            else:
                result.evaluated.append(r.id)
                result.items.extend(found)
                continue
        result.not_evaluated.append((r.id, reason))
    _add_time_origin(profile, result.items)
    result.items.sort(key=rank_key)  # stable: rule order within equal keys
    count_once(
        profile, result.items
    )  # in ranking order: what a higher-ranked finding claimed is not sold twice
    result.items.sort(key=rank_key)
    result.limit = _limit(profile)
    return result


def _limit(profile: Profile) -> dict | None:
    """The run's limit beside the findings (what the rules judge against: the same account), None when the
    profile has no account to read."""
    from ..metrics.limit import run_limit

    try:
        return run_limit(profile)
    except NotEvaluated:
        return None


def _replay_reason(profile: Profile) -> str | None:
    """Why no rule judges a CUPTI range-profiler trace's times (``metrics.counters``): each kernel was replayed
    under counters, so its times are the profiler's; None for any other profile."""
    from ..metrics.counters import replay_section

    replay = replay_section(profile)
    if replay is None:
        return None
    return (
        f"needs the run's times: the trace's {plural(replay['kernels'], 'kernel')} were replayed by CUPTI's range "
        f"profiler under hardware counters (median range {units.duration(replay['median_range_us'])}), so its "
        "times are the profiler's; popprof summary shows the counters"
    )


def rank_key(finding: Finding) -> tuple[int, float, int]:
    """The order :func:`check` gives findings: by the estimated gain's share of its whole, largest first;
    findings without a gain after them, worst severity first. (Severity still decides the exit code.)"""
    gain = finding.estimated_gain
    if gain is None:
        return (1, 0.0, -severity_rank(finding.severity))
    return (0, -gain.fraction, -severity_rank(finding.severity))


#: ``where`` keys holding absolute trace times (microseconds, as in the events table).
TIME_KEYS = ("time_us", "phases")


def _add_time_origin(profile: Profile, items: list[Finding]) -> None:
    """Give each finding that points at trace times the trace's time origin (``where["origin_us"]``).

    The times stay absolute in JSON; text shows them as offsets from this origin (``docs/figures.md``).
    """
    if not any(key in f.where for f in items for key in TIME_KEYS):
        return
    origin = time_origin(profile)
    if origin is None:
        return
    for f in items:
        if any(key in f.where for key in TIME_KEYS):
            f.where.setdefault("origin_us", origin)
