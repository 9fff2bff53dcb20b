-- The IMAP proxy (ADR 0008), issue 45: a message Email/import (or Email/set
-- `create`) APPENDed that the upstream stored with other octets than those
-- sent (Cyrus's `munge8bit` turns the 8-bit octets of a header into `X`).
-- `sent_blob_id` is the blob id of the octets sent, `email_id` the email
-- the upstream's copy became: a retry of the same octets is that email,
-- not a second APPEND. Only rewritten messages have a row (the others are
-- found by their blob id); it goes with the email.
CREATE TABLE upstream_appends (
    account_id     INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    sent_blob_id   TEXT NOT NULL,
    email_id       INTEGER NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
    PRIMARY KEY (account_id, sent_blob_id)
);
CREATE INDEX upstream_appends_by_email ON upstream_appends (email_id);
