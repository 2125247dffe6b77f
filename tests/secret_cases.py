"""The secret-bearing attributes of issue #9 (item 13) and the look-alikes that must stay visible."""

R = "[REDACTED]"
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
OPENAI = "sk-proj-4fJk2mQ9xZ7pL1vB8nR3tY6wE0aS5dG"
HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
GITHUB = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
SLACK = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOp"

# (attribute key, value, what must be exported): 35 cases, by key and by value shape.
SECRET_CASES = [
    # by key: the spellings that were written verbatim, and the ones that were already caught
    ("apiKey", "abc123def456", R),
    ("hfToken", "tok-1234", R),
    ("openaiApiKey", "abc123def456", R),
    ("clientSecret", "s3cr3t-value", R),
    ("tokens", ("tok-a", "tok-b"), R),
    ("secrets", ["s1-value", "s2-value"], R),
    ("api_keys", ["k1-value", "k2-value"], R),
    ("passwd", "hunter2", R),
    ("pwd", "hunter2", R),
    ("auth", "user:hunter2", R),
    ("cookie", "sid=31d4d96e407aad42", R),
    ("credentials", "user:hunter2", R),
    ("bearer", "abc123def456", R),
    ("password", "hunter2", R),
    ("db.password", "hunter2", R),
    ("token", "abc123def456", R),
    ("HF_TOKEN", "abc123def456", R),
    ("openai.api_key", "abc123def456", R),
    ("x-api-key", "abc123def456", R),
    ("Authorization", "Token abc123def456", R),
    ("set-cookie", "sid=31d4d96e407aad42; HttpOnly", R),
    ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", R),
    ("ssh.private_key", "MIIEowIBAAKCAQEA7bq", R),
    ("user.prompt", "my card number is 4111 1111 1111 1111", R),
    # by value shape, under keys that say nothing
    ("headers", f"Authorization: Bearer {JWT}", "Authorization: Bearer " + R),
    ("http.url", "https://alice:hunter2@db.example.com:5432/prod", f"https://{R}@db.example.com:5432/prod"),
    ("model.endpoint_config", OPENAI, R),
    ("hub.repo_access", HF, R),
    ("session", JWT, R),
    ("aws.identity", AWS_ID, R),
    ("ci.remote", f"https://x-access-token:{GITHUB}@github.com/org/repo.git", f"https://{R}@github.com/org/repo.git"),
    ("notify.hook", SLACK, R),
    ("process.command", "python train.py --wandb-api-key 0123456789abcdef --lr 3e-4",
     f"python train.py --wandb-api-key {R} --lr 3e-4"),
    ("request.query", "user=bob&access_token=0123456789abcdef&page=2", f"user=bob&access_token={R}&page=2"),
    ("launch.args", ("--lr=3e-4", f"--hf_token={HF}"), ("--lr=3e-4", f"--hf_token={R}")),
]

# (attribute key, value): recorded exactly as given.
VISIBLE_CASES = [
    ("max_tokens", 512),
    ("token_count", 3),
    ("tokens_per_second", 12.5),
    ("input_tokens", 100),
    ("gen_ai.usage.input_tokens", 7),
    ("rl.num_prompt_groups", 8),
    ("api_key.rotated", True),
    ("keyframe", "frame-000123"),
    ("monkey", "banana-split"),
    ("keyboard", "qwerty-layout"),
    ("author", "bob the builder"),
    ("context", "long-context-eval"),
    ("secretary", "front desk, floor 2"),
    ("model", "Qwen/Qwen2.5-7B-Instruct"),
    ("server.url", "http://10.0.0.1:8000/v1/chat/completions"),
    ("git.remote", "ssh://git@github.com/org/repo.git"),
    ("phase", "Basic training loop"),
    ("task", "task-00000000000000000000000001"),
    ("trace.parent", "4bf92f3577b34da6a3ce929d0e0e4736"),
    ("cmd", "python train.py --max-tokens 512 --tokenizer gpt2"),
    ("tags", ("rollout", "grpo", "tokenizer-v2")),
]

# ---- the 20 credential shapes of issue #18, item 9, found in free text ---------------------------
# Each (name, text, what must remain): the text as it would reach any path (a span name, a log
# message, an exception message, an event, a resource attribute) under a key that says nothing.
GCP_KEY_ID = "0f1e2d3c4b5a69788796a5b4c3d2e1f00a1b2c3d"
AZURE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
SAS_SIG = "XwQz2%2FkQ7Jd9vY3n6bT1pL0aR5sE8fH4gK2mN1cV7xZ%3D"
SLACK_HOOK = "T0A1B2C3D/B0E1F2G3H/AbCdEfGhIjKlMnOpQrStUvWx"
MYSQL_PW = "S3cr3tPassw0rd"
GITHUB_PAT = "github_pat_11ABCDEFG0123456789abc_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"
STRIPE = "sk_live_51HxYzAbCdEfGhIjKlMnOpQr"
GLPAT = "glpat-0123456789abcdefghij"
GOOGLE = "AIzaSyA-0123456789abcdefghijklmnopqrstu"
NPM = "npm_0123456789abcdefghijklmnopqrstuvwxyz"
PYPI = "pypi-AgEIcHlwaS5vcmcCJDAxMjM0NTY3LTg5YWItY2RlZi0wMTIzLTQ1Njc4OWFiY2RlZgACKlszLCJhYmMiXQ"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"

SHAPES = [
    ("gcp private_key_id", f'{{"type": "service_account", "private_key_id": "{GCP_KEY_ID}"}}',
     f'{{"type": "service_account", "private_key_id": "{R}"}}'),
    ("azure AccountKey", f"DefaultEndpointsProtocol=https;AccountName=lensruns;AccountKey={AZURE_KEY};"
                         "EndpointSuffix=core.windows.net",
     f"DefaultEndpointsProtocol=https;AccountName={R};AccountKey={R};EndpointSuffix=core.windows.net"),
    ("azure SAS sig", f"https://lensruns.blob.core.windows.net/ckpt/step100.pt?sv=2022-11-02&sp=r&sig={SAS_SIG}&se=x",
     f"https://lensruns.blob.core.windows.net/ckpt/step100.pt?sv=2022-11-02&sp=r&sig={R}&se=x"),
    ("slack webhook", f"posting to https://hooks.slack.com/services/{SLACK_HOOK} failed",
     f"posting to https://hooks.slack.com/services/{R} failed"),
    ("mysql -p", f"mysql -h db.internal -u trainer -p{MYSQL_PW} runs", f"mysql -h db.internal -u {R} -p{R} runs"),
    ("github_pat", f"token {GITHUB_PAT} rejected", f"token {R} rejected"),
    ("bearer jwt", f"Authorization: Bearer {JWT}", f"Authorization: Bearer {R}"),
    ("url credentials", "https://alice:hunter2@db.example.com:5432/prod", f"https://{R}@db.example.com:5432/prod"),
    ("openai", f"using key {OPENAI}", f"using key {R}"),
    ("hugging face", f"hub login {HF}", f"hub login {R}"),
    ("jwt", f"session {JWT}", f"session {R}"),
    ("aws key id", f"aws identity {AWS_ID}", f"aws identity {R}"),
    ("github classic", f"https://x-access-token:{GITHUB}@github.com/org/repo.git", f"https://{R}@github.com/org/repo.git"),
    ("slack token", f"notify {SLACK}", f"notify {R}"),
    ("cli flag", "python train.py --wandb-api-key 0123456789abcdef --lr 3e-4", f"python train.py --wandb-api-key {R} --lr 3e-4"),
    ("query token", "user=bob&access_token=0123456789abcdef&page=2", f"user=bob&access_token={R}&page=2"),
    ("stripe", f"charge with {STRIPE}", f"charge with {R}"),
    ("gitlab", f"clone with {GLPAT}", f"clone with {R}"),
    ("google api key", f"maps {GOOGLE}", f"maps {R}"),
    ("pem block", f"key: {PEM} end", f"key: {R} end"),
]

# Texts that only resemble credentials: kept exactly (hashes, uuids, paths, model names).
LOOK_ALIKE_TEXTS = [
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "commit 4bf92f3577b34da6a3ce929d0e0e4736a1b2c3d4",
    "run 123e4567-e89b-12d3-a456-426614174000 started",
    "/home/trainer/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B-Instruct/snapshots/abc",
    "model meta-llama/Llama-3.1-8B-Instruct on mistralai/Mixtral-8x7B-v0.1",
    "loss sigma=0.125 design=ablation-b",
    "mysql -u trainer -p -h db.internal runs",
    "mysql -P 3306 -h db.internal",
    "https://hooks.example.com/services/retry",
    "github.com/org/repo/pull/123",
    "tokenizer gpt2 max_tokens=512",
    "AccountName=lensruns;EndpointSuffix=core.windows.net",
    "https://lensruns.blob.core.windows.net/ckpt/step100.pt?sv=2022-11-02&sp=r",
    "ghost-writer v2 github_path_prefix",
]
