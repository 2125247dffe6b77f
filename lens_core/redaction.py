"""Secret redaction for attribute values: by the words of the key, and by credential shapes in text."""

from __future__ import annotations

__all__ = [
    "DEFAULT_REDACT_KEYS",
    "REDACTED",
    "is_secret_key",
    "key_words",
    "redact_allow",
    "redact_attributes",
    "redact_span_fields",
    "redact_text",
    "redact_value",
    "set_redact_allow",
]

#: What a redacted value (or the credential inside a text) is replaced with.
REDACTED = "[REDACTED]"

#: The words that make a key secret (after splitting it into words, see key_words):
#: credentials (password ... bearer) and free text that may hold user data (prompt, text).
#: A word also matches in the plural (``tokens``, ``api_keys``, ``credentials``).
DEFAULT_REDACT_KEYS = frozenset({
    # credentials
    "password", "passwd", "pwd", "passphrase", "secret", "token", "key", "apikey", "accesskey",
    "secretkey", "privatekey", "auth", "authorization", "credential", "cred", "cookie", "bearer", "jwt",
    # free text that may hold user data
    "prompt", "text",
})
# A single word ending in one of these is secret too, so run-together spellings such as
# ``hftoken``, ``clientsecret``, ``dbpassword`` or ``OPENAIAPIKEY`` match. (No suffix rule
# for "key": monkey, turkey, hockey.)
_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "apikey")

_KEY_CACHE_LIMIT = 4096  # distinct keys remembered; a full cache starts over
_CLEAN_TEXT_LIMIT = 4096  # recent clean texts remembered (each at most _CLEAN_TEXT_MAX long)
_CLEAN_TEXT_MAX = 256
_SHAPE_MIN = 8  # no credential shape below is shorter than this

_key_cache: dict = {}  # key -> secret? for DEFAULT_REDACT_KEYS and the allow-list
_clean_texts: set = set()
_allow: frozenset = frozenset()
# Compiled on first use (importing re and compiling cost more than the import budget allows).
_split_words = None
_substitutions = None
_pairs = None
_flag_items = None


def _compile() -> None:
    global _split_words, _substitutions, _pairs, _flag_items
    import re

    # Words: a run of capitals not followed by a lower-case letter (HTTP in HTTPCookie, API
    # in APIKey), or an optional capital and lower-case letters (Key, api), or digits.
    _split_words = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+").findall
    _substitutions = tuple((re.compile(pattern).sub, replacement) for pattern, replacement in _SHAPES)
    _pairs = tuple((re.compile(partner).search, in_original, re.compile(pattern).sub, replacement)
                   for partner, in_original, pattern, replacement in _PAIRS)
    _flag_items = tuple(re.compile(pattern).fullmatch for pattern in (_SECRET_FLAG, _USER_FLAG))


def key_words(key: str) -> list:
    """The lower-case words of ``key``: split at every character that is not an ASCII
    letter or digit, at lower-to-upper case changes (``apiKey``), before the last capital
    of a capital run followed by lower-case (``HTTPCookie`` -> http, cookie) and between
    letters and digits (``key2``)."""
    if _split_words is None:
        _compile()
    return [word.lower() for word in _split_words(key)]


def _is_listed(word: str, words) -> bool:
    return word in words or (word[-1:] == "s" and word[:-1] in words)  # plural: tokens, api_keys


def _key_matches(key: str, words, suffixes) -> bool:
    if key.lower() in words:  # a custom list may name whole keys ("user.ssn")
        return True
    for word in key_words(key):
        if _is_listed(word, words):
            return True
        if suffixes and word.rstrip("s").endswith(suffixes):
            return True
    return False


def is_secret_key(key: str) -> bool:
    """True when text under ``key`` is redacted whole: a word of the key (key_words) is in
    DEFAULT_REDACT_KEYS, singular or plural, or a word ends in token, secret, password,
    passwd or apikey; and the key is not in the allow-list (set_redact_allow). A repeated
    key costs one dict lookup (a bounded cache)."""
    try:
        hit = _key_cache.get(key)
    except TypeError:  # unhashable: no attribute key
        return False
    if hit is None:
        hit = isinstance(key, str) and key not in _allow and _key_matches(key, DEFAULT_REDACT_KEYS, _SECRET_SUFFIXES)
        if len(_key_cache) >= _KEY_CACHE_LIMIT:
            _key_cache.clear()  # in place: lens_core.spans holds this dict
        _key_cache[key] = hit
    return hit


def set_redact_allow(keys) -> None:
    """Attribute keys that are never redacted by key (exact, case-sensitive), replacing
    the current list: an iterable of str. Credential shapes in their text are still
    redacted. otel_bridge.setup_telemetry applies ``LensConfig.redact_allow``."""
    global _allow
    keys = frozenset(keys)
    if not all(isinstance(k, str) for k in keys):
        raise TypeError(f"set_redact_allow takes attribute keys (str), got {sorted(map(repr, keys))}")
    _allow = keys
    _key_cache.clear()


def redact_allow() -> frozenset:
    """The current allow-list (see set_redact_allow)."""
    return _allow


# ---- credential shapes in text -----------------------------------------------------------------

_MYSQL = (r"m(?<![A-Za-z0-9_]m)(?:ysql(?:dump|admin|import|check|show|pump)?|ariadb(?:-dump)?)(?:\.exe)?")
_KV_WORDS = "|".join(  # spelled out per first letter: a literal first lets the engine skip
    f"{first}(?i:{rest})" for word in (
        "password", "passwd", "pwd", "passphrase", "secret", "token", "cookie", "credentials?", "auth",
        "api[_.-]?key", "access[_.-]?key", "secret[_.-]?key", "private[_.-]?key(?:[_.-]?id)?", "signing[_.-]?key",
        "account[_.-]?key", "shared[_.-]?access[_.-]?key")
    for first, rest in ((word[0], word[1:]), (word[0].upper(), word[1:])))


def _keep(group: str):
    """A replacement: the text of ``group`` (kept), then REDACTED."""
    return lambda match: match.group(group) + REDACTED


def _basic(match) -> str:
    # "Basic training" is no credential: only base64 of "user:password" is.
    import base64
    import binascii

    try:
        credential = b":" in base64.b64decode(match.group("token"), validate=True)
    except (binascii.Error, ValueError):
        credential = False
    return match.group("keep") + REDACTED if credential else match.group()


# (pattern, replacement), applied in this order. Every pattern starts with a literal or a
# small set of characters (checks on what precedes come after it), so the regex engine
# skips all other positions in C.
_SHAPES = (
    # -----BEGIN ... PRIVATE KEY----- blocks, to their END line (or the end of the text)
    (r"-----BEGIN[A-Z ]*PRIVATE KEY-----(?s:.*?)(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)", REDACTED),
    # user:password@ in a URL (a user name has no ":", so one split point: linear time)
    (r"(?P<keep>://)[^\s/?#@:]*:[^\s/?#]*(?=@)", _keep("keep")),
    # an Authorization header's credential after its scheme: Basic (even user:password
    # written raw, or short), Token, ApiKey, Key, JWT, Negotiate, NTLM (Bearer below)
    (r"(?P<keep>[aA](?i:uthorization)[\"']?\s*[=:]\s*[\"']?(?i:basic|token|api-?key|key|jwt|negotiate|ntlm)[ \t]+)"
     r"(?![\s\"'])[^\s\"',;]+", _keep("keep")),
    # an Authorization value: Bearer <token>; Basic <base64 of user:password>
    (r"(?P<keep>[bB](?i:earer)\s+)[A-Za-z0-9._~+/-]{8,}=*", _keep("keep")),
    (r"(?P<keep>[bB](?i:asic)\s+)(?P<token>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])", _basic),
    # name=value, name: value, "name": "value", where the name ends in a credential word
    # (so max_tokens=512 is kept); and --name value, with at most three words before it
    (rf"(?P<keep>(?:{_KV_WORDS})[\"']?\s*[=:]\s*[\"']?)[^\s\"'&;,]+", _keep("keep")),
    (rf"(?P<keep>-(?<![A-Za-z0-9-]-)-?(?:[A-Za-z0-9]+[_.-]){{0,3}}(?:{_KV_WORDS})\s+)(?![-\s])[^\s\"'&;,]+",
     _keep("keep")),
    # JSON Web Tokens: base64url header.payload.signature, the header a JSON object; only
    # at the start of a run (else "eyJeyJeyJ..." would rescan the run from every eyJ)
    (r"e(?<![A-Za-z0-9_-]e)yJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", REDACTED),
    # provider tokens, marked by their prefix (and not glued to a word before it)
    (r"s(?<![A-Za-z0-9]s)k(?:-[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic (sk-proj-, sk-ant-)
     r"|_(?:live|test)_[A-Za-z0-9]{16,})|r(?<![A-Za-z0-9]r)k_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
     r"|h(?<![A-Za-z0-9]h)f_[A-Za-z0-9]{30,}"  # Hugging Face
     r"|g(?<![A-Za-z0-9]g)(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{30,}|lpat-[A-Za-z0-9_-]{20,})"
     r"|x(?<![A-Za-z0-9]x)ox[abposre]-[A-Za-z0-9-]{10,}"  # Slack
     r"|A(?<![A-Za-z0-9]A)(?:(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Z0-9])|Iza[A-Za-z0-9_-]{35})"  # AWS, Google
     r"|n(?<![A-Za-z0-9]n)pm_[A-Za-z0-9]{36}|p(?<![A-Za-z0-9]p)ypi-[A-Za-z0-9_-]{50,}", REDACTED),  # npm, PyPI
    # an Azure SAS signature: the sig= parameter of a query (sigma=, design= are not it)
    (r"(?P<keep>[?&;]sig=)[^\s&#\"'<>]+", _keep("keep")),
    # webhook URLs whose path is the credential (Slack, Discord)
    (r"(?P<keep>h(?<![A-Za-z0-9.-]h)ooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9_/-]+"
     r"|(?P<keep2>d(?<![A-Za-z0-9.-]d)iscord(?:app)?\.com/api/webhooks/[0-9]+/)[A-Za-z0-9_-]+",
     lambda m: (m.group("keep") or m.group("keep2")) + REDACTED),
    # a MySQL / MariaDB client's password glued to -p (-pS3cret; "-p" alone prompts, -P is the
    # port): at most twelve words after the command, so the scan stays linear
    (rf"(?P<keep>{_MYSQL}(?:[ \t]+[^\s]+){{0,12}}?[ \t]+-p[\"']?)(?![\s\"'])[^\s\"']+", _keep("keep")),
)

# ---- credentials travel in pairs -----------------------------------------------------------------
# Where one half of a credential was recognised (and redacted) above, the other half in the
# same value goes too: the user name beside a password, a client's id beside its secret, an
# access key id beside its secret key, an Azure account or policy name beside its key, and
# the secret key written after an AWS access key id. Only a text that had something
# redacted is looked at again, so clean text pays nothing for this.
_R = r"\[REDACTED\]"
_SEP = r"[\"']?\s*[=:]\s*[\"']?"  # name=value, name: value, "name": "value"
_VALUE = r"(?![\s\"'])[^\s\"'&;,]+"


def _named(names: str) -> str:
    """A pattern for ``name=value`` (or ``--name value``) whose name ends in one of ``names``."""
    return (rf"(?P<keep>(?i:{names}){_SEP}|-(?<![A-Za-z0-9-]-)-?(?:[A-Za-z0-9]+[_.-]){{0,3}}(?i:{names})\s+)"
            rf"{_VALUE}")


# (the partner half that shows, redacted, in the text; True: look for it in the original
# text instead; the other half's pattern; its replacement)
_PAIRS = (
    (rf"(?i:pass(?:word|wd|phrase)|pwd)(?:{_SEP}|\s+){_R}|\s-p[\"']?{_R}", False,
     rf"{_named('user(?:[_.-]?name)?|login')}|(?P<url>://)[^\s/?#@:\[]+(?=@)"
     rf"|(?P<mysql>{_MYSQL}(?:[ \t]+[^\s]+){{0,12}}?[ \t]+-u[ \t]*)(?![\s\"'-])[^\s\"']+",
     lambda m: (m.group("keep") or m.group("url") or m.group("mysql")) + REDACTED),
    (rf"(?i:secret|private[_.-]?key(?:[_.-]?id)?){_SEP}{_R}", False,
     _named(r"client[_.-]?(?:id|email)"), _keep("keep")),
    (rf"(?i:secret[_.-]?(?:access[_.-]?)?key){_SEP}{_R}", False, _named(r"access[_.-]?key[_.-]?id"), _keep("keep")),
    (rf"(?i:account[_.-]?key|shared[_.-]?access[_.-]?key){_SEP}{_R}", False,
     _named(r"account[_.-]?name|shared[_.-]?access[_.-]?key[_.-]?name"), _keep("keep")),
    # an AWS secret access key: 40 base64 characters (a 40-digit hex hash is kept)
    (r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])", True,
     r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
     lambda m: m.group() if all(c in "0123456789abcdefABCDEF" for c in m.group()) else REDACTED),
)
# A sequence (argv) holding a flag item and its value item: ["--password", "hunter2"]
_SECRET_FLAG = rf"--?(?:[A-Za-z0-9]+[_.-]){{0,3}}(?:{_KV_WORDS})"
_USER_FLAG = r"--?(?:[A-Za-z0-9]+[_.-]){0,3}(?i:user(?:[_.-]?name)?|login)"


def _pair_halves(original: str, redacted: str, target: str) -> str:
    """``target`` with the other half of each pair whose recognised half shows in
    ``redacted`` (or in ``original``) redacted too."""
    for partner, in_original, substitute, replacement in _pairs:
        if partner(original if in_original else redacted):
            target = substitute(replacement, target)
    return target


def _may_hold_credential(value: str) -> bool:
    # The cheap check before any regex: every shape above holds one of these substrings
    # (the words of the first line in any letter case). Plain `in` tests, unrolled: each
    # is a fast C search, far cheaper than one regex scan over the text.
    lowered = value.lower()
    return ("://" in lowered or "bearer" in lowered or "basic" in lowered or "pass" in lowered
            or "pwd" in lowered or "secret" in lowered or "token" in lowered or "cookie" in lowered
            or "credential" in lowered or "auth" in lowered or "key" in lowered
            or "-----BEGIN" in value or "eyJ" in value or "sk-" in value or "k_live_" in value
            or "k_test_" in value or "hf_" in value or "gh" in value or "glpat-" in value or "xox" in value
            or "AKIA" in value or "ASIA" in value or "ABIA" in value or "ACCA" in value or "AIza" in value
            or "npm_" in value or "pypi-" in value or "github_pat_" in value or "sig=" in value
            or "mysql" in lowered or "mariadb" in lowered)  # (a webhook URL has "://")


def redact_text(value: str) -> str:
    """``value`` itself (the same object) when no credential shape is in it; else a copy
    with each credential replaced by REDACTED. The shapes: a PEM private-key block; the
    ``user:password`` of a URL (``https://[REDACTED]@host/path``); ``Bearer <token>``;
    ``Basic <base64 of user:password>``; ``name=value`` / ``name: value`` /
    ``"name": "value"`` / ``--name value`` where the name ends in password, passwd, pwd,
    passphrase, secret, token, cookie, credential(s), auth or api/access/secret/private/
    signing key, a GCP ``private_key_id``, an Azure ``AccountKey`` / ``SharedAccessKey``; JWTs;
    provider tokens marked by their prefix (``sk-``, ``sk_live_``, ``hf_``, ``ghp_``,
    ``github_pat_``, ``glpat-``, ``xoxb-``, ``AKIA``, ``AIza``, ``npm_``, ``pypi-``); an Azure
    SAS ``sig=`` query parameter; the token path of a Slack or Discord webhook URL; and a
    MySQL/MariaDB client's ``-p<password>``; an ``Authorization:`` header's credential after
    its scheme. Credentials travel in pairs: once one half was recognised, the other half in
    the same text goes too (the user name beside a password, ``client_id`` / ``client_email``
    beside a secret or private key, an access key id beside its secret key, an Azure
    account or policy name beside its key, a 40-character secret after an AWS key id). Text
    shorter than 8 characters is never changed; a clean text is remembered, so a repeated
    one costs a set lookup."""
    if len(value) < _SHAPE_MIN or value in _clean_texts:
        return value
    out = value
    if _may_hold_credential(value):
        if _substitutions is None:
            _compile()
        for substitute, replacement in _substitutions:
            out = substitute(replacement, out)
        if out != value:
            out = _pair_halves(value, out, out)
        if out == value:  # a match kept as it was ("Basic training") still built a copy
            out = value
    if out is value and len(value) <= _CLEAN_TEXT_MAX:
        if len(_clean_texts) >= _CLEAN_TEXT_LIMIT:
            _clean_texts.clear()
        _clean_texts.add(value)
    return out


def redact_value(key: str, value, redact_keys=None):
    """The value to record for attribute ``key``: numbers and booleans unchanged; text (or
    a sequence holding text) replaced whole by REDACTED when the key is secret
    (is_secret_key, or with ``redact_keys`` given: a word of the key, or the whole key, is
    in that set instead); otherwise text with credential shapes redacted (redact_text),
    item by item in a sequence, where pairs also cross items (``["--password", "x"]``, a
    ``--user`` or ``PGUSER=`` item beside a redacted password)."""
    if not isinstance(value, (str, list, tuple)):
        return value
    if redact_keys is None or redact_keys is DEFAULT_REDACT_KEYS:
        secret = is_secret_key(key)
    else:
        secret = key not in _allow and _key_matches(key, redact_keys, ())
    if isinstance(value, str):
        return REDACTED if secret else redact_text(value)
    if not any(isinstance(item, str) for item in value):
        return value
    if secret:
        return REDACTED
    items = [redact_text(item) if isinstance(item, str) else item for item in value]
    unchanged = all(new is old for new, old in zip(items, value))
    if unchanged and "\x00-" not in "\x00" + "\x00".join([i for i in value if type(i) is str]):
        return value  # nothing redacted and no flag item: no pair to look for
    _pair_items(value, items)
    if all(new is old for new, old in zip(items, value)):
        return value
    return type(value)(items)


def _pair_items(value, items) -> None:
    """Pairs across the items of a sequence (an argv): the item after a credential flag
    (``--password``, ``--api-key``) is redacted, and, once anything was, the other half of a
    pair in any item (``--user``'s value, ``PGUSER=bob`` beside ``PGPASSWORD=...``)."""
    flags = [i for i, item in enumerate(value[:-1]) if type(item) is str and item[:1] == "-"]
    if flags:
        if _flag_items is None:
            _compile()
        for i in flags:
            after = value[i + 1]
            if isinstance(after, str) and after[:1] != "-" and _flag_items[0](value[i]):
                items[i + 1] = REDACTED
    if all(new is old for new, old in zip(items, value)):
        return
    texts = [i for i, item in enumerate(value) if isinstance(item, str)]
    original = "\n".join(value[i] for i in texts)
    redacted = "\n".join(items[i] for i in texts)
    for i in texts:
        items[i] = _pair_halves(original, redacted, items[i])
    if _pairs[0][0]("\n".join(items[i] for i in texts)):  # a password was redacted: --user's value goes too
        for i in flags:
            after = value[i + 1]
            if isinstance(after, str) and after[:1] != "-" and _flag_items[1](value[i]):
                items[i + 1] = REDACTED


def redact_attributes(attrs):
    """``attrs`` (a dict) itself when no value under it is secret; else a copy with each
    value passed through redact_value. For attributes that entered without Lens's
    sanitising (an SDK span's ``set_attribute``, a raw OpenTelemetry span, a resource):
    values keep their types, only secret text changes."""
    if not attrs:
        return attrs
    out = None
    for key, value in attrs.items():
        if not isinstance(value, (str, list, tuple)):
            continue
        try:
            new = redact_value(key, value)
        except Exception:  # a key or value of a type we cannot read: left to the encoder's checks
            continue
        if new is not value:
            if out is None:
                out = dict(attrs)
            out[key] = new
    return attrs if out is None else out


def _text(value):
    return redact_text(value) if isinstance(value, str) else value


def redact_span_fields(name, attrs, events, links, status_message):
    """None when nothing in a span's fields is secret; else ``(name, attrs, events, links,
    status_message)`` redacted: credential shapes in the name, the status message and each
    event's name (redact_text), attribute values of the span, its events and links
    (redact_attributes). ``events`` is a list of ``(name, time_ns, attrs)``, ``links`` of
    ``(trace_id, span_id, trace_state, attrs, remote)``, either may be None."""
    new_name, new_attrs, new_message = _text(name), redact_attributes(attrs), _text(status_message)
    changed = new_name is not name or new_attrs is not attrs or new_message is not status_message
    new_events = events
    if events:
        redacted = [(_text(n), t, redact_attributes(a)) for n, t, a in events]
        if any(new[0] is not old[0] or new[2] is not old[2] for new, old in zip(redacted, events)):
            new_events, changed = redacted, True
    new_links = links
    if links:
        redacted = [(t, s, st, redact_attributes(a), r) for t, s, st, a, r in links]
        if any(new[3] is not old[3] for new, old in zip(redacted, links)):
            new_links, changed = redacted, True
    return (new_name, new_attrs, new_events, new_links, new_message) if changed else None
