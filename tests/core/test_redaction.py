"""Secret redaction: by the words of a key, by credential shapes in text, the allow-list, the caches."""

import pytest

import lens_core
from lens_core import redaction
from lens_core.redaction import (
    REDACTED,
    is_secret_key,
    key_words,
    redact_allow,
    redact_text,
    redact_value,
    set_redact_allow,
)
from lens_core.spans import sanitize_attributes
from secret_cases import LOOK_ALIKE_TEXTS, SECRET_CASES, SHAPES, VISIBLE_CASES


@pytest.fixture(autouse=True)
def no_allow_list():
    """Each test starts and ends with an empty allow-list."""
    set_redact_allow(())
    yield
    set_redact_allow(())


def _exported(value):
    # what sanitising makes of a sequence: a tuple
    return tuple(value) if isinstance(value, list) else value


# ---- the table ----------------------------------------------------------------------------------


def test_the_table_has_the_35_secret_cases_and_enough_look_alikes():
    assert len(SECRET_CASES) == 35 and len(SECRET_CASES) + len(VISIBLE_CASES) >= 50


@pytest.mark.parametrize("key, value, expected", SECRET_CASES, ids=[c[0] for c in SECRET_CASES])
def test_secret_bearing_attributes_are_redacted(key, value, expected):
    """Regression: of these 35 secret-bearing attributes, 22 were written verbatim (camelCase
    and plural keys, passwd/pwd/auth/cookie/credentials/bearer, Bearer tokens under headers,
    credentials in URLs, provider tokens under innocuous keys)."""
    assert sanitize_attributes({key: value}) == {key: _exported(expected)}
    assert redact_value(key, value) == expected


@pytest.mark.parametrize("key, value", VISIBLE_CASES, ids=[c[0] for c in VISIBLE_CASES])
def test_look_alikes_numbers_and_booleans_are_kept_as_they_are(key, value):
    assert sanitize_attributes({key: value}) == {key: _exported(value)}
    assert redact_value(key, value) is value


# ---- keys ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("key, words", [
    ("apiKey", ["api", "key"]),
    ("openaiApiKey", ["openai", "api", "key"]),
    ("HTTPCookie", ["http", "cookie"]),
    ("APIKey", ["api", "key"]),
    ("x-api-key", ["x", "api", "key"]),
    ("gen_ai.usage.input_tokens", ["gen", "ai", "usage", "input", "tokens"]),
    ("AWS_SECRET_ACCESS_KEY", ["aws", "secret", "access", "key"]),
    ("token2", ["token", "2"]),
    ("keyframe", ["keyframe"]),
])
def test_keys_split_into_words_at_separators_case_changes_and_digits(key, words):
    assert key_words(key) == words


@pytest.mark.parametrize("key", ["HFTOKEN", "hftoken", "clientsecret", "dbpassword", "OPENAIAPIKEY", "accesskey"])
def test_run_together_spellings_are_secret(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["keyframe", "monkey", "keyboard", "turkey", "author", "secretary", "rl.num_groups"])
def test_word_based_matching_keeps_keys_that_merely_contain_a_secret_word(key):
    assert not is_secret_key(key)


def test_text_under_a_token_count_key_is_redacted_and_numbers_are_not():
    """The documented choice: a key's words decide, so text under max_tokens is redacted
    (a text value there is unusual; we cannot tell it from a token string) while the
    numbers such keys hold are never touched; the allow-list makes the text visible."""
    assert redact_value("max_tokens", "512") == REDACTED
    assert redact_value("max_tokens", 512) == 512
    set_redact_allow(["max_tokens"])
    assert redact_value("max_tokens", "512") == "512"


def test_a_repeated_key_is_answered_from_the_bounded_cache():
    assert is_secret_key("svc.apiKey") is True
    assert redaction._key_cache["svc.apiKey"] is True
    for i in range(redaction._KEY_CACHE_LIMIT + 10):
        is_secret_key(f"k{i}.label")
    assert len(redaction._key_cache) <= redaction._KEY_CACHE_LIMIT


def test_unhashable_and_non_str_keys_are_not_secret():
    assert is_secret_key(["token"]) is False
    assert is_secret_key(5) is False


def test_custom_redact_keys_match_words_plurals_and_whole_keys():
    assert redact_value("patient.ssns", ("1", "2"), redact_keys=frozenset({"ssn"})) == REDACTED
    assert redact_value("Patient-SSN", "123", redact_keys=frozenset({"ssn"})) == REDACTED
    assert redact_value("user.ssn", "123", redact_keys=frozenset({"user.ssn"})) == REDACTED
    assert redact_value("password", "x", redact_keys=frozenset({"ssn"})) == "x"
    assert redact_value("note", f"see {'sk-' + 'a' * 24}", redact_keys=frozenset({"ssn"})) == f"see {REDACTED}"


# ---- the allow-list -----------------------------------------------------------------------------


def test_the_allow_list_stops_key_redaction_but_not_credential_shapes():
    set_redact_allow(["tokenizer.eos_token", "api_key"])
    assert redact_allow() == frozenset({"tokenizer.eos_token", "api_key"})
    assert redact_value("tokenizer.eos_token", "</s>") == "</s>"
    assert redact_value("api_key", "not-a-real-key") == "not-a-real-key"
    assert redact_value("api_key", "sk-proj-0123456789abcdefghijkl") == REDACTED  # still a credential shape
    assert redact_value("Api_Key", "x") == REDACTED  # exact keys only
    set_redact_allow(())
    assert redact_value("tokenizer.eos_token", "</s>") == REDACTED


def test_the_allow_list_takes_only_str_keys():
    with pytest.raises(TypeError, match="set_redact_allow takes attribute keys"):
        set_redact_allow([1])


def test_setup_telemetry_applies_the_configs_allow_list():
    from otel_bridge import setup_telemetry

    setup_telemetry(lens_core.LensConfig(redact_allow="stop_tokens, max_tokens"))  # a quiet setup
    assert redact_allow() == frozenset({"stop_tokens", "max_tokens"})
    assert sanitize_attributes({"stop_tokens": ("</s>",)}) == {"stop_tokens": ("</s>",)}


# ---- text ---------------------------------------------------------------------------------------


def test_clean_text_is_returned_as_the_same_object():
    text = "rollout worker 17 finished batch 3 of 8"
    assert redact_text(text) is text
    assert redact_text(text) is text  # now from the clean-text cache
    short = "pwd=ab"
    assert redact_text(short) is short  # shorter than any credential shape


@pytest.mark.parametrize("text, expected", [
    ("Basic dXNlcjpodW50ZXIy", f"Basic {REDACTED}"),
    ("bearer abcdefgh12345678", f"bearer {REDACTED}"),
    ('{"password": "hunter2", "user": "bob"}', f'{{"password": "{REDACTED}", "user": "{REDACTED}"}}'),
    ("PASSWORD=hunter2 next", f"PASSWORD={REDACTED} next"),
    ("secret_key: abc=def", f"secret_key: {REDACTED}"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\ntail", f"{REDACTED}\ntail"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1", REDACTED),
    ("keys: sk_live_0123456789abcdefABCD and rk_test_0123456789abcdefABCD", f"keys: {REDACTED} and {REDACTED}"),
    ("glpat-0123456789abcdefghij", REDACTED),
    ("AIzaSyA-0123456789abcdefghijklmnopqrstu", REDACTED),
    ("npm_0123456789abcdefghijklmnopqrstuvwxyz", REDACTED),
    ("https://u:p@a.example/x and https://v:q@b.example/y", f"https://{REDACTED}@a.example/x and https://{REDACTED}@b.example/y"),
], ids=repr)
def test_credential_shapes_in_text_are_redacted(text, expected):
    assert redact_text(text) == expected


@pytest.mark.parametrize("text", [
    "Basic training loop", "bearer of bad news", "task-00000000000000000000000001", "disk_live_0123456789abcdef",
    "ASIAN-FOOD-MARKET-LISTING", "ssh://git@github.com/org/repo", "http://host:8080/path?next=a@b",
    "max_tokens=512 tokens: 1024", "--max-tokens 512", "tokenizer=gpt2 author=bob", "high light through",
], ids=repr)
def test_texts_that_only_resemble_credentials_are_kept(text):
    assert redact_text(text) is text


@pytest.mark.parametrize("name, text, expected", SHAPES, ids=[c[0] for c in SHAPES])
def test_the_twenty_credential_shapes_are_redacted_in_free_text(name, text, expected):
    """Regression (issue #18): GCP private_key_id, Azure AccountKey=, Azure SAS sig=, Slack
    webhook URLs, mysql -p<pw> and github_pat_ tokens passed every redaction path (the
    prefilter looked for "gh", which github_pat_ lacks)."""
    assert redact_text(text) == expected


AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize("text, expected", [
    # a user name beside a password: the query string, JSON, env lines, flags, a URL, mysql
    ("https://db.example/q?user=bob&password=hunter2", f"https://db.example/q?user={REDACTED}&password={REDACTED}"),
    ("https://alice@db.example/x?password=hunter2", f"https://{REDACTED}@db.example/x?password={REDACTED}"),
    ("PGUSER=bob PGPASSWORD=hunter2", f"PGUSER={REDACTED} PGPASSWORD={REDACTED}"),
    ("username: bob\npassword: hunter2", f"username: {REDACTED}\npassword: {REDACTED}"),
    ("login=bob passwd=hunter2", f"login={REDACTED} passwd={REDACTED}"),
    ("--user bob --password hunter2", f"--user {REDACTED} --password {REDACTED}"),
    ("mysql -h db.internal -utrainer -pS3cr3t runs", f"mysql -h db.internal -u{REDACTED} -p{REDACTED} runs"),
    # a client's id (and a service account's email) beside its secret or private key
    ("client_id=abc123def456&client_secret=s3cr3tvalue99", f"client_id={REDACTED}&client_secret={REDACTED}"),
    ('{"private_key_id": "0f1e2d3c", "client_email": "a@p.iam.gserviceaccount.com", "client_id": "1234"}',
     f'{{"private_key_id": "{REDACTED}", "client_email": "{REDACTED}", "client_id": "{REDACTED}"}}'),
    # an access key id beside its secret, written any way
    (f"aws_access_key_id=AKIAIOSFODNN7EXAMPLE&aws_secret_access_key={AWS_SECRET}",
     f"aws_access_key_id={REDACTED}&aws_secret_access_key={REDACTED}"),
    (f"access_key_id=LTAI5tXyz0123456789 secret_access_key={AWS_SECRET}",
     f"access_key_id={REDACTED} secret_access_key={REDACTED}"),
    (f"AWS Access Key ID: AKIAIOSFODNN7EXAMPLE, AWS Secret Access Key: {AWS_SECRET}",
     f"AWS Access Key ID: {REDACTED}, AWS Secret Access Key: {REDACTED}"),
    (f"Access key ID,Secret access key\nAKIAIOSFODNN7EXAMPLE,{AWS_SECRET}",
     f"Access key ID,Secret access key\n{REDACTED},{REDACTED}"),
    # an Authorization header: its credential whatever the scheme's encoding
    ("Authorization: Basic alice:hunter2", f"Authorization: Basic {REDACTED}"),
    ('"Authorization": "Basic YTpi"', f'"Authorization": "Basic {REDACTED}"'),
    ("Authorization: Token abc123def456", f"Authorization: Token {REDACTED}"),
    # Azure Service Bus: the policy name beside its key
    ("Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=abcdefghijklmnop=",
     f"Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName={REDACTED};SharedAccessKey={REDACTED}"),
], ids=repr)
def test_the_other_half_of_a_recognised_credential_goes_too(text, expected):
    """Regression (issue 40): where one half of a credential pair was recognised, the other
    half in the same value survived: the user beside a password ({"password": ..., "user":
    "bob"}, mysql -u trainer -p..., ?user=bob&password=...), AccountName beside AccountKey,
    client_id beside client_secret, a secret access key after an AWS key id, and the raw
    user:password of "Authorization: Basic"."""
    assert redact_text(text) == expected


@pytest.mark.parametrize("text", [
    "user=bob page=2", "the user bob logged in", "Authorization failed: retry", "authorization: pending review",
    "user=bob&access_token=0123456789abcdef&page=2",  # a bearer token is a whole credential: no pair
    "AKIAIOSFODNN7EXAMPLE commit 4bf92f3577b34da6a3ce929d0e0e4736a1b2c3d4",  # a hex hash is no AWS secret
    "client_id=abc123 region=us-east-1", "AccountName=lensruns;EndpointSuffix=core.windows.net",
], ids=repr)
def test_a_half_whose_partner_is_absent_or_no_secret_is_kept(text):
    """Only a recognised partner makes a user name or an id a secret: alone they stay."""
    kept = text.replace("0123456789abcdef", REDACTED).replace("AKIAIOSFODNN7EXAMPLE", REDACTED)
    assert redact_text(text) == kept


def test_pairs_across_the_items_of_an_argv_are_redacted():
    """Regression (issue 40): a sequence redacted item by item kept the value of
    ["--password", "hunter2"] (the flag and its value are separate items) and the user
    beside a redacted password."""
    argv = ["train.py", "--user", "bob", "--password", "hunter2", "--lr", "3"]
    assert redact_value("argv", argv) == ["train.py", "--user", REDACTED, "--password", REDACTED, "--lr", "3"]
    env = ("PGUSER=bob", "PGPASSWORD=hunter2", "HOME=/root")
    assert redact_value("env", env) == (f"PGUSER={REDACTED}", f"PGPASSWORD={REDACTED}", "HOME=/root")
    assert redact_value("argv", ["--api-key", "abc", "--max-tokens", "5"]) == ["--api-key", REDACTED, "--max-tokens", "5"]
    clean = ["--user", "bob", "--lr", "3", 7, True]
    assert redact_value("argv", clean) is clean
    assert redact_value("flags", [1, 2.5, False]) == [1, 2.5, False]


@pytest.mark.parametrize("text", LOOK_ALIKE_TEXTS, ids=repr)
def test_hashes_uuids_paths_and_model_names_are_kept(text):
    assert redact_text(text) is text


def test_a_sequence_keeps_its_clean_items_and_is_returned_unchanged_when_clean():
    clean = ("rollout", "grpo-step")
    assert redact_value("tags", clean) is clean
    assert redact_value("args", ["--x=1", "Bearer abcdefgh12345678"]) == ["--x=1", f"Bearer {REDACTED}"]
    assert redact_value("ids", (1, 2)) == (1, 2)


@pytest.mark.parametrize("unit, prefix", [
    ("eyJ", ""), ("b:", "://a:"), ("bearer ", ""), ("password", ""), ("-a", ""), ("sk-", ""), ("hf_", ""),
    ("AKIA", ""), ("Basic QUJD", ""), ("x", "-----BEGIN RSA PRIVATE KEY-----"),
    ("mysql a ", ""), ("mysql -pa ", ""), ("&sig=", ""), ("hooks.slack.com/services/", "://"), ("github_pat_", ""),
    ("user=a pwd=bb ", ""), ("a/", "AKIAIOSFODNN7EXAMPLE "), ("mysql -u ", "mysql -pa "),
], ids=["jwt", "url", "bearer", "kv", "flag", "sk", "hf", "aws", "basic", "pem", "mysql", "mysql-p", "sas", "slack",
        "github-pat", "pair-kv", "pair-aws", "pair-mysql"])
def test_redaction_takes_linear_time_on_pathological_text(unit, prefix):
    """Regression: "eyJ" * 20000 took 0.85 s (every eyJ rescanned the run to its end: quadratic).
    Ten times the text must cost about as much as the short text ten times (a same-run ratio).

    Held on a loaded machine (as "best of 3 wall-clock runs, large < 40x small" some case
    failed in 20 of 20 runs with two busy processes at load ~19): both sides do the same amount
    of linear work, so each timing window is as long as the other; the sides alternate round
    by round and each keeps its least disturbed round; and the clock is this thread's CPU
    time, which a busy machine does not advance while it runs something else (with wall time,
    some case still failed in 8 of 20 runs). Linear: ~1x; quadratic: ~10x."""
    import time

    short, long_ = prefix + unit * 2000, prefix + unit * 20000

    def timed(text, times):
        started = time.thread_time()
        for _ in range(times):
            redaction._clean_texts.clear()
            redact_text(text)
        return time.thread_time() - started

    timed(prefix + unit * 10, 1)  # compile the patterns
    best_short = best_long = float("inf")
    for round_ in range(7):
        if round_ % 2:
            best_long = min(best_long, timed(long_, 1))
            best_short = min(best_short, timed(short, 10))
        else:
            best_short = min(best_short, timed(short, 10))
            best_long = min(best_long, timed(long_, 1))
    assert best_long < 4 * best_short, (best_long, best_short)  # linear: ~1x; quadratic: ~10x
