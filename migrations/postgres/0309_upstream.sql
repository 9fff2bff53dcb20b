-- The projection proxy in front of an IMAP server (issue 18, ADR 0008).
-- `upstream_source`: the one upstream a data dir serves, recorded by the
-- first `serve --upstream`; other commands refuse to add mail or accounts
-- to such a data dir. `upstream_mailboxes`: which upstream mailbox (its
-- full name as on the wire, modified UTF-7) a local mailbox mirrors, at
-- which UIDVALIDITY. `upstream_messages`: which email each UID of a
-- mirrored mailbox is (the same message in two mailboxes is one email).
CREATE TABLE upstream_source (
    id             bigint PRIMARY KEY CHECK (id = 1),
    url            text NOT NULL
);

CREATE TABLE upstream_mailboxes (
    mailbox_id     bigint PRIMARY KEY REFERENCES mailboxes(id) ON DELETE CASCADE,
    account_id     bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name           text NOT NULL,
    uid_validity   bigint NOT NULL,
    UNIQUE (account_id, name)
);

CREATE TABLE upstream_messages (
    mailbox_id     bigint NOT NULL REFERENCES mailboxes(id) ON DELETE CASCADE,
    uid            bigint NOT NULL,
    email_id       bigint NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
    PRIMARY KEY (mailbox_id, uid)
);
CREATE INDEX upstream_messages_by_email ON upstream_messages (email_id);
