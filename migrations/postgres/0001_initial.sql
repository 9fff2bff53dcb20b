-- Fastview schema (PostgreSQL). The same tables, columns and semantics as
-- migrations/sqlite/0001_initial.sql: metadata rows apart from header blocks
-- apart from the raw message (blob store), and the fast-view projection
-- beside them (ADR 0002, ADR 0003).
--
-- Differences from SQLite are of type and index only:
-- - ids are `bigint GENERATED ALWAYS AS IDENTITY` (never reused, like
--   SQLite's AUTOINCREMENT; a failed insert may leave a gap);
-- - flags are `boolean`, header blocks `bytea`, times `bigint` unix seconds;
-- - the login is unique case-insensitively through a unique index on
--   lower(email) (SQLite: COLLATE NOCASE, which folds ASCII only);
-- - mailboxes_by_parent serves the mailboxHasChild check;
-- - the emails id sequence is also advanced by the store directly
--   (nextval, OVERRIDING SYSTEM VALUE) so a batch knows its ids up front;
-- - covering indexes let the hot reads run as index-only scans once the
--   visibility map is set (autovacuum, or VACUUM after a bulk import):
--   * the Email/query fast path (inMailbox + receivedAt) walks the
--     email_mailboxes primary key (mailbox_id, received_at, email_id) and
--     fetches each page row's thread_id from the emails primary key (which
--     INCLUDEs account_id and thread_id), so neither table's heap is read;
--   * the projection read (Email/get preview/hasAttachment) is served from
--     fast_view's primary key, which INCLUDEs both projection columns, joined
--     to the emails primary key for the account check;
--   * email_meta's mailbox ids come from email_mailboxes_by_email.

CREATE TABLE accounts (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email          text NOT NULL,
    password_hash  text NOT NULL,
    -- Modification sequence: advanced by every write of the account.
    modseq         bigint NOT NULL DEFAULT 0,
    -- RFC 8620 §5.1 state of each type: the modseq of its last change.
    email_state    bigint NOT NULL DEFAULT 0,
    mailbox_state  bigint NOT NULL DEFAULT 0,
    thread_state   bigint NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX accounts_by_email ON accounts (lower(email));

CREATE TABLE mailboxes (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id     bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    parent_id      bigint REFERENCES mailboxes(id),
    name           text NOT NULL,
    role           text,
    sort_order     bigint NOT NULL DEFAULT 0,
    is_subscribed  boolean NOT NULL DEFAULT true
);
CREATE INDEX mailboxes_by_account ON mailboxes (account_id);
-- The mailboxHasChild check and the parent_id foreign key.
CREATE INDEX mailboxes_by_parent ON mailboxes (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE emails (
    id             bigint GENERATED ALWAYS AS IDENTITY,
    account_id     bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    blob_id        text NOT NULL,
    thread_id      bigint NOT NULL,
    size           bigint NOT NULL,
    received_at    bigint NOT NULL,
    sent_at        bigint,
    -- Sorted lowercase keywords separated by single spaces.
    keywords       text NOT NULL DEFAULT '',
    message_id     text,
    base_subject   text NOT NULL DEFAULT '',
    subject        text NOT NULL DEFAULT '',
    from_sort      text NOT NULL DEFAULT '',
    to_sort        text NOT NULL DEFAULT '',
    from_text      text NOT NULL DEFAULT '',
    to_text        text NOT NULL DEFAULT '',
    cc_text        text NOT NULL DEFAULT '',
    bcc_text       text NOT NULL DEFAULT '',
    has_attachment boolean NOT NULL DEFAULT false,
    -- Covering: the listing's thread_id and the account check of batched
    -- reads joined on email id come from the key, without visiting the heap.
    PRIMARY KEY (id) INCLUDE (account_id, thread_id),
    UNIQUE (account_id, blob_id)
);
CREATE INDEX emails_by_thread ON emails (account_id, thread_id);

-- Mailbox membership, keyed for Email/query inMailbox + receivedAt.
CREATE TABLE email_mailboxes (
    mailbox_id     bigint NOT NULL REFERENCES mailboxes(id) ON DELETE CASCADE,
    received_at    bigint NOT NULL,
    email_id       bigint NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
    PRIMARY KEY (mailbox_id, received_at, email_id)
);
CREATE INDEX email_mailboxes_by_email ON email_mailboxes (email_id, mailbox_id);

-- The raw header block of each message (header read level).
CREATE TABLE email_headers (
    email_id       bigint PRIMARY KEY REFERENCES emails(id) ON DELETE CASCADE,
    header_block   bytea NOT NULL
);

-- The fast-view projection (ADR 0003). The primary key covers both columns
-- (a preview is at most 256 characters, well under the index tuple limit).
CREATE TABLE fast_view (
    email_id       bigint NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
    preview        text NOT NULL,
    has_attachment boolean NOT NULL,
    PRIMARY KEY (email_id) INCLUDE (preview, has_attachment)
);

-- Message ids seen in each thread (own Message-ID and referenced ids), so a
-- message arriving before or after its relatives finds their thread.
CREATE TABLE thread_refs (
    account_id     bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    message_id     text NOT NULL,
    thread_id      bigint NOT NULL,
    base_subject   text NOT NULL,
    PRIMARY KEY (account_id, message_id, thread_id)
);

-- Blobs an account may read: its messages and its uploads.
CREATE TABLE account_blobs (
    account_id     bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    blob_id        text NOT NULL,
    size           bigint NOT NULL,
    created_at     bigint NOT NULL,
    PRIMARY KEY (account_id, blob_id)
);
