-- The projection proxy in front of an IMAP server (issue 18, ADR 0008).
-- `upstream_source`: the one upstream a data dir serves, recorded by the
-- first `serve --upstream`; other commands refuse to add mail or accounts
-- to such a data dir. `upstream_mailboxes`: which upstream mailbox (its
-- full name as on the wire, modified UTF-7) a local mailbox mirrors, at
-- which UIDVALIDITY and HIGHESTMODSEQ. `upstream_messages`: which email
-- each UID of a mirrored mailbox is (the same message in two mailboxes is
-- one email), with that copy's flags. `upstream_evicted`: message blobs the
-- bounded cache (`--upstream-cache-mb`) deleted; read again by UID on use.
-- `upstream_syncs`: when each account last finished a sync (unix seconds):
-- how far behind its mirror may be (`fastview account list`).
CREATE TABLE upstream_source (
    id             bigint PRIMARY KEY CHECK (id = 1),
    url            text NOT NULL
);

CREATE TABLE upstream_mailboxes (
    mailbox_id     bigint PRIMARY KEY REFERENCES mailboxes(id) ON DELETE CASCADE,
    account_id     bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name           text NOT NULL,
    uid_validity   bigint NOT NULL,
    -- RFC 7162 HIGHESTMODSEQ when last read whole (NULL: unknown, or no
    -- CONDSTORE): an unchanged one means nothing in it changed.
    highest_modseq bigint,
    UNIQUE (account_id, name)
);

CREATE TABLE upstream_messages (
    mailbox_id     bigint NOT NULL REFERENCES mailboxes(id) ON DELETE CASCADE,
    uid            bigint NOT NULL,
    email_id       bigint NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
    -- The copy's flags as keywords, sorted, space-separated: an email's
    -- keywords are the union over its copies.
    keywords       text NOT NULL DEFAULT '',
    PRIMARY KEY (mailbox_id, uid)
);
CREATE INDEX upstream_messages_by_email ON upstream_messages (email_id);

CREATE TABLE upstream_evicted (
    blob_id        text PRIMARY KEY,
    size           bigint NOT NULL
);

CREATE TABLE upstream_syncs (
    account_id     bigint PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
    synced_at      bigint NOT NULL
);
