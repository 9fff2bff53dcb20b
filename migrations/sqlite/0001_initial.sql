-- Fastview schema (SQLite). Metadata rows apart from header blocks apart from
-- the raw message (blob store), and the fast-view projection beside them
-- (ADR 0002, ADR 0003).

CREATE TABLE accounts (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    email          TEXT NOT NULL UNIQUE COLLATE NOCASE,
    password_hash  TEXT NOT NULL,
    -- Modification sequence: advanced by every write of the account.
    modseq         INTEGER NOT NULL DEFAULT 0,
    -- RFC 8620 §5.1 state of each type: the modseq of its last change.
    email_state    INTEGER NOT NULL DEFAULT 0,
    mailbox_state  INTEGER NOT NULL DEFAULT 0,
    thread_state   INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE mailboxes (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id     INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    parent_id      INTEGER REFERENCES mailboxes(id),
    name           TEXT NOT NULL,
    role           TEXT,
    sort_order     INTEGER NOT NULL DEFAULT 0,
    is_subscribed  INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX mailboxes_by_account ON mailboxes(account_id);

CREATE TABLE emails (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id     INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    blob_id        TEXT NOT NULL,
    thread_id      INTEGER NOT NULL,
    size           INTEGER NOT NULL,
    received_at    INTEGER NOT NULL,
    sent_at        INTEGER,
    -- Sorted lowercase keywords separated by single spaces.
    keywords       TEXT NOT NULL DEFAULT '',
    message_id     TEXT,
    base_subject   TEXT NOT NULL DEFAULT '',
    subject        TEXT NOT NULL DEFAULT '',
    from_sort      TEXT NOT NULL DEFAULT '',
    to_sort        TEXT NOT NULL DEFAULT '',
    from_text      TEXT NOT NULL DEFAULT '',
    to_text        TEXT NOT NULL DEFAULT '',
    cc_text        TEXT NOT NULL DEFAULT '',
    bcc_text       TEXT NOT NULL DEFAULT '',
    has_attachment INTEGER NOT NULL DEFAULT 0,
    UNIQUE (account_id, blob_id)
);
CREATE INDEX emails_by_thread ON emails(account_id, thread_id);

-- Mailbox membership, keyed for Email/query inMailbox + receivedAt.
CREATE TABLE email_mailboxes (
    mailbox_id     INTEGER NOT NULL REFERENCES mailboxes(id) ON DELETE CASCADE,
    received_at    INTEGER NOT NULL,
    email_id       INTEGER NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
    PRIMARY KEY (mailbox_id, received_at, email_id)
) WITHOUT ROWID;
CREATE INDEX email_mailboxes_by_email ON email_mailboxes(email_id, mailbox_id);

-- The raw header block of each message (header read level).
CREATE TABLE email_headers (
    email_id       INTEGER PRIMARY KEY REFERENCES emails(id) ON DELETE CASCADE,
    header_block   BLOB NOT NULL
);

-- The fast-view projection (ADR 0003).
CREATE TABLE fast_view (
    email_id       INTEGER PRIMARY KEY REFERENCES emails(id) ON DELETE CASCADE,
    preview        TEXT NOT NULL,
    has_attachment INTEGER NOT NULL
);

-- Message ids seen in each thread (own Message-ID and referenced ids), so a
-- message arriving before or after its relatives finds their thread.
CREATE TABLE thread_refs (
    account_id     INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    message_id     TEXT NOT NULL,
    thread_id      INTEGER NOT NULL,
    base_subject   TEXT NOT NULL,
    PRIMARY KEY (account_id, message_id, thread_id)
) WITHOUT ROWID;

-- Blobs an account may read: its messages and its uploads.
CREATE TABLE account_blobs (
    account_id     INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    blob_id        TEXT NOT NULL,
    size           INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (account_id, blob_id)
) WITHOUT ROWID;
