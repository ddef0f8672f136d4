"""The leak scan's second, independent detector: Yelp's detect-secrets over every output string.

The first half of the scan (:mod:`.sensitive`) looks for what the ORIGINAL held; this one knows
nothing of the original, of the vocabulary or of the redactor: it runs detect-secrets' own plugins
(token formats such as GitHub, AWS, Slack, JWT, private keys, basic-auth URLs; high-entropy base64
and hex strings; secret keywords) on each distinct output string, so a token hidden inside a name
that the vocabulary would accept is still caught. A finding is reported by its kind and place,
never by its value. This module imports nothing of the redaction's decisions.

Cost: the keyword plugin is by far the slowest, so it runs only on strings holding one of its
keywords; entropy plugins see each run of base64 / hex characters long enough to be a secret.
"""

from __future__ import annotations

import functools
import re

#: detect-secrets plugins run on every string (by class name), and their entropy limits.
TOKEN_PLUGINS = (
    "AWSKeyDetector",
    "ArtifactoryDetector",
    "AzureStorageKeyDetector",
    "BasicAuthDetector",
    "DiscordBotTokenDetector",
    "GitHubTokenDetector",
    "GitLabTokenDetector",
    "JwtTokenDetector",
    "MailchimpDetector",
    "NpmDetector",
    "OpenAIDetector",
    "PypiTokenDetector",
    "SendGridDetector",
    "SlackDetector",
    "SquareOAuthDetector",
    "StripeDetector",
    "TelegramBotTokenDetector",
    "TwilioKeyDetector",
)
BASE64_LIMIT = 4.5
HEX_LIMIT = 3.0
#: This module's own shape of a popprof pseudonym (``var_3f9a2c1b07de``): removed before detection,
#: since its hex digits are keyed output, not a secret of the input.
_OWN_PSEUDONYM = re.compile(r"\b[a-z]{2,8}_[0-9a-f]{12}(?:[0-9a-f]{12})?\b")
_KEYWORDS = re.compile(r"(?i)pass|pwd|secret|token|api.?key|auth|cred|private|BEGIN")
#: Runs scored for entropy: detect-secrets' base64 alphabet without ``_`` (C++ and kernel names join
#: their public words with it; an underscore-joined token is found by the token plugins).
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=-]{20,}")
_CHUNK = re.compile(r"\S+")
_HEX_RUN = re.compile(r"[0-9a-fA-F]{16,}")


class SecretDetector:
    """detect-secrets' plugins, loaded once; :meth:`find` names the first finding's type."""

    def __init__(self) -> None:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

        classes = {cls.__name__: cls for cls in get_mapping_from_secret_type_to_class().values()}
        self.tokens = [classes[name]() for name in TOKEN_PLUGINS if name in classes]
        self.contextual = [
            classes[name]() for name in ("KeywordDetector", "PrivateKeyDetector") if name in classes
        ]
        self.base64 = classes["Base64HighEntropyString"](limit=BASE64_LIMIT)
        self.hex = classes["HexHighEntropyString"](limit=HEX_LIMIT)
        self._cache: dict[str, str | None] = {}
        self._chunks: dict[str, str | None] = {}

    def find(self, text: str) -> str | None:
        """The detect-secrets type of a secret in ``text`` (``GitHub Token``...), or None."""
        hit = self._cache.get(text, False)
        if hit is not False:
            return hit  # type: ignore[return-value]
        hit = self._find(text)
        if len(self._cache) < 500_000:
            self._cache[text] = hit
        return hit

    def _find(self, text: str) -> str | None:
        text = _OWN_PSEUDONYM.sub(" ", text)
        if len(text) < 8:
            return None
        for chunk in set(_CHUNK.findall(text)):
            hit = self._chunks.get(chunk, False)
            if hit is False:
                hit = self._chunk(chunk)
                if len(self._chunks) < 500_000:
                    self._chunks[chunk] = hit
            if hit is not None:
                return hit  # type: ignore[return-value]
        if _KEYWORDS.search(text):  # plugins that read a secret from its context ("password = ...")
            for plugin in self.contextual:
                for _ in plugin.analyze_string(text):
                    return plugin.secret_type
        return None

    def _chunk(self, chunk: str) -> str | None:
        """Token formats and high-entropy runs in one white-space-free chunk."""
        if len(chunk) < 8:
            return None
        for plugin in self.tokens:
            for _ in plugin.analyze_string(chunk):
                return plugin.secret_type
        for run in _BASE64_RUN.findall(chunk):
            if self._high_entropy(self.base64, run):
                return self.base64.secret_type
        for run in _HEX_RUN.findall(chunk):
            if self._high_entropy(self.hex, run):
                return self.hex.secret_type
        return None

    @staticmethod
    def _high_entropy(plugin, run: str) -> bool:
        """A run above the plugin's entropy limit that detect-secrets' own filters do not dismiss."""
        from detect_secrets.filters.heuristic import is_sequential_string

        return plugin.calculate_shannon_entropy(run) > plugin.entropy_limit and not is_sequential_string(run)


@functools.cache
def detector() -> SecretDetector:
    """The process's detector (plugins are loaded once)."""
    return SecretDetector()
