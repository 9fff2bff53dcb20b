-- Sending mail, part two (issue 17, RFC 8621 §7): EmailSubmission objects
-- and the queue their deliveries go through.

ALTER TABLE accounts ADD COLUMN submission_state INTEGER NOT NULL DEFAULT 0;

-- RFC 8621 §7. envelope: JSON Envelope; delivery_status: JSON
-- String[DeliveryStatus]; send_at in Unix seconds.
CREATE TABLE email_submissions (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id      INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    identity_id     INTEGER NOT NULL,
    email_id        INTEGER NOT NULL,
    thread_id       INTEGER NOT NULL,
    envelope        TEXT NOT NULL,
    send_at         INTEGER NOT NULL,
    undo_status     TEXT NOT NULL,
    delivery_status TEXT NOT NULL
);
CREATE INDEX email_submissions_by_account ON email_submissions(account_id, id);

-- Deliveries not yet done: written with the submission, in its
-- transaction, and deleted when done, so a crash loses none; a node takes
-- one by setting lease_until, so two never work on one at once. blob_id:
-- the message as sent (Bcc removed), kept from the collector while here.
-- recipients: JSON array of addresses. Times in Unix seconds.
CREATE TABLE deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    submission_id   INTEGER NOT NULL,
    account_id      INTEGER NOT NULL,
    blob_id         TEXT NOT NULL,
    mail_from       TEXT NOT NULL,
    recipients      TEXT NOT NULL,
    send_at         INTEGER NOT NULL,
    attempts        INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    lease_until     INTEGER NOT NULL
);
CREATE INDEX deliveries_due ON deliveries(next_attempt_at);
CREATE INDEX deliveries_by_blob ON deliveries(blob_id);
