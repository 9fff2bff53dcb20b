-- Sending mail, part one (issue 17, RFC 8621 §6, §8): the addresses an
-- account may send as, its Identity objects and its VacationResponse.

-- RFC 8620 §5.1 states of the new types: the modseq of their last change.
ALTER TABLE accounts ADD COLUMN identity_state INTEGER NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN vacation_state INTEGER NOT NULL DEFAULT 0;

-- Further addresses an operator lets an account send as
-- (`fastview account alias add`). An address belongs to one account.
CREATE TABLE account_aliases (
    address        TEXT PRIMARY KEY COLLATE NOCASE,
    account_id     INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE
);
CREATE INDEX account_aliases_by_account ON account_aliases(account_id);

-- RFC 8621 §6. reply_to and bcc: JSON EmailAddress[] or NULL. The
-- identity made with the account (its own address) has may_delete 0.
CREATE TABLE identities (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id     INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    email          TEXT NOT NULL,
    reply_to       TEXT,
    bcc            TEXT,
    text_signature TEXT NOT NULL,
    html_signature TEXT NOT NULL,
    may_delete     INTEGER NOT NULL
);
CREATE INDEX identities_by_account ON identities(account_id);
INSERT INTO identities (account_id, name, email, text_signature, html_signature, may_delete)
    SELECT id, '', email, '', '', 0 FROM accounts;

-- RFC 8621 §8: the one VacationResponse of an account, when it was ever
-- set (else it reads as disabled). Dates in Unix seconds.
CREATE TABLE vacation_responses (
    account_id     INTEGER PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
    is_enabled     INTEGER NOT NULL,
    from_date      INTEGER,
    to_date        INTEGER,
    subject        TEXT,
    text_body      TEXT,
    html_body      TEXT
);
