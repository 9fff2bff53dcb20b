-- API tokens (`fastview token`), accepted as `Authorization: Bearer`. Only
-- the SHA-256 of a token's secret is kept: the secret is shown once.
CREATE TABLE api_tokens (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id     bigint NOT NULL REFERENCES accounts(id),
    secret_sha256  text NOT NULL UNIQUE,
    name           text NOT NULL,
    -- Unix seconds.
    created_at     bigint NOT NULL,
    -- Unix seconds; NULL never expires.
    expires_at     bigint
);
CREATE INDEX api_tokens_by_account ON api_tokens(account_id);

-- Keys this deployment signs with (the push access of the event source),
-- one row per use, made once and read by every node.
CREATE TABLE server_keys (
    name  text PRIMARY KEY,
    key   bytea NOT NULL
);
