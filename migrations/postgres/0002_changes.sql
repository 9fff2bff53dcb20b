-- The per-account change log behind Foo/changes and Foo/queryChanges
-- (RFC 8620 §5.2, §5.6); the same table and semantics as
-- migrations/sqlite/0002_changes.sql. Every write transaction that advances
-- the account's modseq records here, in the same transaction, one row per
-- object it changed; a type's state string stays the modseq of its last
-- change.
--
-- type: 1 Email, 2 Mailbox, 3 Thread.
-- kind: 0 created, 1 updated, 2 destroyed.
-- counts_only: for a Mailbox update, only totalEmails/unreadEmails/
--   totalThreads/unreadThreads changed (RFC 8621 §2.2 updatedProperties).
CREATE TABLE changes (
    account_id     bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    type           smallint NOT NULL,
    modseq         bigint NOT NULL,
    object_id      bigint NOT NULL,
    kind           smallint NOT NULL,
    counts_only    boolean NOT NULL DEFAULT false,
    PRIMARY KEY (account_id, type, modseq, object_id)
);

-- The oldest modseq from which changes can be calculated: the log holds
-- every change after it. Accounts that existed before the log start at
-- their current modseq; the log may later be truncated up to a modseq.
ALTER TABLE accounts ADD COLUMN changes_from bigint NOT NULL DEFAULT 0;
UPDATE accounts SET changes_from = modseq;

-- The mailboxHasChild check and the parent_id foreign key check of a
-- mailbox delete: 0001 already has mailboxes_by_parent (partial, non-null
-- parents) on PostgreSQL; this keeps the two schemas' index sets the same.
CREATE INDEX IF NOT EXISTS mailboxes_by_parent ON mailboxes (parent_id) WHERE parent_id IS NOT NULL;
