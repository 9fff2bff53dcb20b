-- The full-text index in receivedAt order (issue 16, ADR 0006): an FTS5
-- table returns its matches in rowid order and stops at a LIMIT, so the
-- rowid of an email's words is no longer its id but a search key that
-- orders them by account and time:
--
--   key = partition << 40 | hour << 16 | slot
--
-- partition: the account id (its low 23 bits: ids above 8,388,607 share a
-- partition, and the account column below tells them apart); hour: the
-- hour of receivedAt since 1970 (clamped to 0 … 2^24 - 1); slot: the next
-- free of the hour's 65,536. When an hour is full, the key is the next one
-- after the partition's highest, a later hour: a key's hour is never
-- earlier than its email's, which is all a newest-first walk relies on
-- (server/src/store/sql.rs, `search_walk`).
--
-- The words arrive folded, letters and digits only, one space apart
-- (server/src/mail/search.rs): the `ascii` tokenizer splits them at the
-- spaces as `unicode61` did, without looking each character up.
-- Prefix indexes now also of 4 characters: every query word is a prefix,
-- and a 4-letter one (`list`, `test`) otherwise merges the lists of the
-- hundreds of words it begins on every query.
--
-- The words of mail indexed before this migration are dropped with the old
-- table: `fastview reproject` indexes them again.
DROP TRIGGER email_search_forget;
DROP TABLE email_search;

CREATE VIRTUAL TABLE email_search USING fts5(
    headers,
    body,
    content = '',
    contentless_delete = 1,
    tokenize = 'ascii',
    prefix = '2 3 4'
);

-- Which email a search key names, with what a walk sorts and filters by.
CREATE TABLE email_search_keys (
    key            INTEGER PRIMARY KEY,
    email_id       INTEGER NOT NULL UNIQUE,
    account_id     INTEGER NOT NULL,
    received_at    INTEGER NOT NULL
);

-- The one way in: a row written here gets its key and its words indexed
-- under it; a row deleted here takes both away.
CREATE VIEW email_search_input (email_id, account_id, received_at, headers, body) AS
    SELECT email_id, account_id, received_at, NULL, NULL FROM email_search_keys;

CREATE TRIGGER email_search_input_insert INSTEAD OF INSERT ON email_search_input
BEGIN
    INSERT INTO email_search_keys (key, email_id, account_id, received_at)
    SELECT CASE
             WHEN b.last IS NULL THEN b.base
             WHEN b.last < b.base + 65535 THEN b.last + 1
             ELSE (SELECT max(key) + 1 FROM email_search_keys
                   WHERE key BETWEEN b.base AND b.base | 1099511627775)
           END,
           new.email_id, new.account_id, new.received_at
    FROM (SELECT x.base,
                 (SELECT max(key) FROM email_search_keys
                  WHERE key BETWEEN x.base AND x.base + 65535) AS last
          FROM (SELECT ((new.account_id & 8388607) << 40)
                       | (min(max(new.received_at / 3600, 0), 16777215) << 16) AS base) x) b;
    INSERT INTO email_search (rowid, headers, body)
    VALUES (last_insert_rowid(), new.headers, new.body);
END;

CREATE TRIGGER email_search_input_delete INSTEAD OF DELETE ON email_search_input
BEGIN
    DELETE FROM email_search
    WHERE rowid = (SELECT key FROM email_search_keys WHERE email_id = old.email_id);
    DELETE FROM email_search_keys WHERE email_id = old.email_id;
END;

-- A virtual table has no foreign key: an email's words go with it.
CREATE TRIGGER email_search_forget AFTER DELETE ON emails
BEGIN
    DELETE FROM email_search
    WHERE rowid = (SELECT key FROM email_search_keys WHERE email_id = old.id);
    DELETE FROM email_search_keys WHERE email_id = old.id;
END;
