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
