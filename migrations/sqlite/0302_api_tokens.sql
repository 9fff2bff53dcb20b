-- API tokens (`fastview token`), accepted as `Authorization: Bearer`. Only
-- the SHA-256 of a token's secret is kept: the secret is shown once.
CREATE TABLE api_tokens (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id     INTEGER NOT NULL REFERENCES accounts(id),
    secret_sha256  TEXT NOT NULL UNIQUE,
    name           TEXT NOT NULL,
    -- Unix seconds.
    created_at     INTEGER NOT NULL,
    -- Unix seconds; NULL never expires.
    expires_at     INTEGER
);
CREATE INDEX api_tokens_by_account ON api_tokens(account_id);

-- Keys this deployment signs with (the push access of the event source),
-- one row per use, made once and read by every node.
CREATE TABLE server_keys (
    name  TEXT PRIMARY KEY,
    key   BLOB NOT NULL
);
