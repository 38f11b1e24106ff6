"""Secret scrubbing for everything the records layer writes to disk.

Three nets, applied to every string (dict keys included):

* values of environment variables whose NAME contains KEY, TOKEN, SECRET or
  PASSWORD/PASSWD (case-insensitive, values of at least 6 characters), wherever
  they occur as substrings, and so do their common encodings: reversed, hex (lower and
  upper case), and base64 (standard and URL-safe) at each of the three alignments the value
  can have inside a longer encoded text (the characters that depend on the value alone,
  with the one before and the ones after that also carry some of its bits);
* well-known credential shapes: PEM private-key blocks, ``sk-...`` / ``sk-ant-...`` API
  keys, ``Bearer <token>``,
  GitHub/Hugging Face tokens, metaeval gateway tokens (``mgw-...``), AWS access key ids, and
  ``SOME_API_KEY=value``
  assignments (as printed by ``env`` or found in ``.env`` files);
* whole values under dict keys that name a credential (``api_key``, ``Authorization``,
  ``x-api-key``, ``password``, ``client_secret``, ``access_token``, ...).

The environment's secret values are compiled into one pattern once and again whenever
os.environ changes, so secrets set after import are covered. Secrets the process makes
itself and never puts in its environment (a gateway's token) join them through `add_secret`,
so their encoded forms are scrubbed too (the shape net alone sees only the token as it is).
"""

from __future__ import annotations

import base64
import functools
import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"
MIN_ENV_SECRET_LEN = 6

_ENV_NAME_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # PEM private keys (SSH, TLS): the whole block, or from its header to the end of a cut.
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*\Z)",
            re.DOTALL,
        ),
        REDACTED,
    ),
    # OpenAI / Anthropic style keys (sk-..., sk-proj-..., sk-ant-...).
    # (The look-behind sits after the literal, so the scan jumps from "sk-" to "sk-": every
    # "task-" holds one, and a look-behind first made the engine test each position.)
    (re.compile(r"sk-(?<![A-Za-z0-9_-]sk-)[A-Za-z0-9_-]{16,}"), REDACTED),
    # HTTP bearer tokens: keep the scheme, drop the credential.
    (re.compile(r"(?i)\b(Bearer)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 " + REDACTED),
    # GitHub and Hugging Face tokens, AWS access key ids.
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), REDACTED),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), REDACTED),
    # metaeval gateway and PACT tokens (`loopback.access.new_token`): each opens a gateway that holds a key.
    (re.compile(r"\bmgw-[A-Za-z0-9_-]{20,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    # NAME_KEY=value assignments (env dumps, .env files, shell history).
    (
        re.compile(
            r"\b((?:[A-Z][A-Z0-9_]*_)?(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD))"
            r"=(?!\[REDACTED\])(\"[^\"\n]{6,}\"|'[^'\n]{6,}'|[^\s\"']{6,})"
        ),
        r"\1=" + REDACTED,
    ),
]

# Dict keys (normalised to snake_case) whose values are credentials. A key matches
# when it equals one of these or ends with "_" + one of these.
# Literal text each pattern above cannot match without (same order): a substring test in C
# skips a regex scan of long texts (prompts, logs) that hold no such shape at all.
_GUARDS: list[tuple[str, ...]] = [
    ("PRIVATE KEY-----",),
    ("sk-",),
    ("bearer",),  # tested against the lower-cased text (the pattern ignores case)
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ("hf_",),
    ("mgw-",),
    ("AKIA", "ASIA"),
    ("KEY=", "TOKEN=", "SECRET=", "PASSWORD=", "PASSWD="),
]
_LOWER_GUARD = 2

_SECRET_FIELD_SUFFIXES = (
    "api_key",
    "apikey",
    "access_key",
    "secret_key",
    "private_key",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "authorization",
    "cookie",
    "access_token",
    "auth_token",
    "refresh_token",
    "id_token",
    "session_token",
    "api_token",
    "bearer_token",
    "oauth_token",
    "github_token",
    "gh_token",
    "hf_token",
)
# "token" alone is a credential; "eos_token", "max_tokens", "input_tokens" are not.
_SECRET_FIELD_EXACT = frozenset({"token"})

_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

_env_cache: tuple[object, re.Pattern[str] | None, tuple[str, ...]] = (None, None, ())


@functools.lru_cache(maxsize=4096)
def is_secret_field(name: str) -> bool:
    """True when a dict key (``api_key``, ``Authorization``, ``x-api-key``) names a secret."""
    norm = _CAMEL_RE.sub("_", name).lower().replace("-", "_").strip("_")
    if norm in _SECRET_FIELD_EXACT:
        return True
    return any(norm == s or norm.endswith("_" + s) for s in _SECRET_FIELD_SUFFIXES)


MAX_ADDED_SECRETS = 256
"""`add_secret` keeps the most recent this many (a long audit makes a gateway token per agent
run; the live ones are far fewer, and every one kept lengthens the pattern)."""
_added_secrets: tuple[str, ...] = ()


def add_secret(value: str) -> None:
    """Scrub `value` and its encoded forms from everything redacted from now on, as if it were
    a secret environment value (for the process's own secrets, such as a gateway token)."""
    global _added_secrets
    value = value.strip()
    if len(value) >= MIN_ENV_SECRET_LEN and value not in _added_secrets:
        _added_secrets = (*_added_secrets, value)[-MAX_ADDED_SECRETS:]


def secret_env_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values (length >= 6) of environment variables whose names look like credentials, and
    (for the process's own environment) the secrets given to `add_secret`."""
    env = os.environ if environ is None else environ
    values = {
        v.strip()
        for k, v in env.items()
        if _ENV_NAME_RE.search(k) and len(v.strip()) >= MIN_ENV_SECRET_LEN
    }
    if environ is None:
        values.update(_added_secrets)
    return sorted(values, key=lambda v: (-len(v), v))


def encoded_forms(value: str) -> list[str]:
    """The literal forms of `value` searched for besides itself: reversed, hex lower and
    upper, and the base64 core (standard and URL-safe) at each alignment: the characters of
    base64(k filler bytes + value) that no byte outside the value changes, k = 0, 1, 2."""
    data = value.encode()
    forms = [value[::-1], data.hex(), data.hex().upper()]
    for k in range(3):
        encoded = base64.b64encode(b"\0" * k + data).decode()
        core = encoded[-(-8 * k // 6) : (8 * (k + len(data))) // 6]
        forms += [core, core.translate(_URLSAFE)]
    return list(dict.fromkeys(f for f in forms if f != value))


_URLSAFE = str.maketrans("+/", "-_")
_B64_CHAR = "[A-Za-z0-9+/_-]"


def _value_pattern(value: str) -> str:
    """The regex of one secret value and its encoded forms (a base64 core with the partial
    characters around it)."""
    parts = [re.escape(value)]
    data = value.encode()
    plain = {value[::-1], data.hex(), data.hex().upper()}
    for form in encoded_forms(value):
        if form in plain:
            parts.append(re.escape(form))
        else:
            parts.append(f"{_B64_CHAR}?{re.escape(form)}{_B64_CHAR}?=*")
    return "|".join(parts)


def _environ_fingerprint() -> object:
    """A cheap value that changes whenever os.environ does (a C-level copy of its data)."""
    data = getattr(os.environ, "_data", None)
    return dict(data) if isinstance(data, dict) else tuple(sorted(os.environ.items()))


def _env_pattern() -> re.Pattern[str] | None:
    """The pattern of secret environment values, rebuilt only when os.environ changed."""
    global _env_cache
    fingerprint = (_environ_fingerprint(), _added_secrets)
    if fingerprint != _env_cache[0]:
        values = secret_env_values()
        pattern = re.compile("|".join(_value_pattern(v) for v in values)) if values else None
        literals = [form for v in values for form in (v, *encoded_forms(v))]
        _env_cache = (fingerprint, pattern, tuple(literals))
    return _env_cache[1]


# Every credential shape above and every secret environment value is at least this long.
_SHORTEST_SECRET = 6
# Short strings (dict keys, statuses, ids) recur in every record: their scrubbed form is
# remembered per environment pattern, bounded in size.
_SHORT_TEXT = 64
_SHORT_CACHE_MAX = 8192
# (environment pattern, cache): replaced whole, so a thread still holding the old pair
# never files a result under a newer pattern
_short_cache: tuple[object, dict[str, str]] = (None, {})
_CASED_GUARDS = tuple(g for i, group in enumerate(_GUARDS) if i != _LOWER_GUARD for g in group)


def _redact_str(text: str, env_re: re.Pattern[str] | None) -> str:
    if len(text) < _SHORTEST_SECRET:
        return text
    if len(text) <= _SHORT_TEXT:
        global _short_cache
        owner, cache = _short_cache
        if owner is not env_re:
            cache = {}
            _short_cache = (env_re, cache)
        cached = cache.get(text)
        if cached is None:
            cached = _scrub(text, env_re)
            if len(cache) >= _SHORT_CACHE_MAX:
                cache.clear()
            cache[text] = cached
        return cached
    return _scrub(text, env_re)


def _scrub(text: str, env_re: re.Pattern[str] | None) -> str:
    if env_re is not None:
        values = _env_cache[2] if env_re is _env_cache[1] else None
        if values is None or any(v in text for v in values):
            text = env_re.sub(REDACTED, text)
    lowered = text.lower()
    for cased in _CASED_GUARDS:
        if cased in text:
            break
    else:
        if not any(g in lowered for g in _GUARDS[_LOWER_GUARD]):
            return text  # no shape's literal part occurs: nothing to scan for
    for index, ((pattern, repl), guard) in enumerate(zip(_PATTERNS, _GUARDS, strict=True)):
        if index == _LOWER_GUARD:
            if not any(g in lowered for g in guard):
                continue
        elif not any(g in text for g in guard):
            continue
        text = pattern.sub(repl, text)
    return text


def redact_text(text: str) -> str:
    """Scrub secrets from one string."""
    return _redact_str(text, _env_pattern())


def _redact(obj: Any, env_re: re.Pattern[str] | None) -> Any:
    if isinstance(obj, str):
        return _redact_str(obj, env_re)
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            new_key = _redact_str(key, env_re) if isinstance(key, str) else key
            if (
                isinstance(key, str)
                and is_secret_field(key)
                and value not in (None, "")
                and not isinstance(value, bool)
            ):
                out[new_key] = REDACTED
            else:
                out[new_key] = _redact(value, env_re)
        return out
    if isinstance(obj, list | tuple):
        return [_redact(v, env_re) for v in obj]
    return obj


def redact(obj: Any) -> Any:
    """Return a copy of a JSON-like value with every secret replaced by ``[REDACTED]``.

    Strings are scrubbed everywhere (nested in dicts and lists, dict keys included);
    values under credential-named keys are replaced whole. Tuples become lists.
    """
    return _redact(obj, _env_pattern())


def redact_bytes(data: bytes) -> bytes:
    """Scrub secrets from bytes: UTF-8 text is scrubbed as text, anything else byte-wise."""
    env_re = _env_pattern()
    try:
        text = data.decode("utf-8")
        encoding = "utf-8"
    except UnicodeDecodeError:
        # latin-1 maps bytes 1:1 to code points, so ASCII secrets are still found.
        text = data.decode("latin-1")
        encoding = "latin-1"
    scrubbed = _redact_str(text, env_re)
    return data if scrubbed == text else scrubbed.encode(encoding)


_ARG_SECRET_RE = re.compile(r"^--?([A-Za-z0-9_-]+)(=(.*))?$")


def redact_argv(argv: list[str] | tuple[str, ...]) -> list[str]:
    """Scrub a command line: ``--api-key X`` and ``--token=X`` lose their values, then `redact`."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        m = _ARG_SECRET_RE.match(arg)
        if m and is_secret_field(m.group(1)):
            if m.group(2) is not None:
                out.append(arg[: arg.index("=") + 1] + REDACTED)
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return redact(out)


_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY-----")


class LineRedactor:
    """Redacts a text stream line by line (a log pump), including multi-line PEM keys:
    every line from a private key's BEGIN marker to its END marker becomes `[REDACTED]`."""

    def __init__(self) -> None:
        self._in_key = False

    def line(self, text: str) -> str:
        """The redacted form of one line (its line ending kept)."""
        ending = "\n" if text.endswith("\n") else ""
        if self._in_key:
            if _PEM_END.search(text):
                self._in_key = False
            return ""
        begin = _PEM_BEGIN.search(text)
        if begin and not _PEM_END.search(text, begin.end()):
            self._in_key = True
            return redact_text(text[: begin.start()]) + REDACTED + ending
        return redact_text(text)
