-- The mirror of a JMAP upstream (issue 19, ADR 0009). A data dir in front
-- of a JMAP server keeps one local account per upstream account, whose
-- emails are ordinary rows written by the ingest path; these tables map
-- them to the upstream's names, which are what clients see.
-- `jmap_mirror_accounts`: the upstream accountId of a local account, and
-- the upstream Email state the mirror is at (NULL until a first sync ends).
-- `jmap_mirror_mailboxes`: the upstream Mailbox id of a local mailbox.
-- `jmap_mirror_emails`: the upstream Email id, blobId, threadId and part
-- blobIds of a local email (the upstream's threads are kept as they are: its threading
-- need not be Fastview's).
CREATE TABLE jmap_mirror_accounts (
    account_id     INTEGER PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
    upstream_id    TEXT NOT NULL UNIQUE,
    email_state    TEXT
);

CREATE TABLE jmap_mirror_mailboxes (
    mailbox_id     INTEGER PRIMARY KEY REFERENCES mailboxes(id) ON DELETE CASCADE,
    account_id     INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    upstream_id    TEXT NOT NULL,
    UNIQUE (account_id, upstream_id)
);

CREATE TABLE jmap_mirror_emails (
    email_id       INTEGER PRIMARY KEY REFERENCES emails(id) ON DELETE CASCADE,
    account_id     INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    upstream_id    TEXT NOT NULL,
    blob_id        TEXT NOT NULL,
    thread_id      TEXT NOT NULL,
    -- The upstream's blobId of each part, by partId (a JSON object), when
    -- its bodyStructure has the partIds of Fastview's; NULL otherwise (the
    -- body properties of such an email are the upstream's to answer).
    parts          TEXT,
    UNIQUE (account_id, upstream_id)
);
