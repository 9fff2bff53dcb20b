-- Sending mail, part two (issue 17, RFC 8621 §7): EmailSubmission objects
-- and the queue their deliveries go through.

ALTER TABLE accounts ADD COLUMN submission_state bigint NOT NULL DEFAULT 0;

-- RFC 8621 §7. envelope: JSON Envelope; delivery_status: JSON
-- String[DeliveryStatus]; send_at in Unix seconds.
CREATE TABLE email_submissions (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id      bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    identity_id     bigint NOT NULL,
    email_id        bigint NOT NULL,
    thread_id       bigint NOT NULL,
    envelope        text NOT NULL,
    send_at         bigint NOT NULL,
    undo_status     text NOT NULL,
    delivery_status text NOT NULL
);
CREATE INDEX email_submissions_by_account ON email_submissions(account_id, id);

-- Deliveries not yet done: written with the submission, in its
-- transaction, and deleted when done, so a crash loses none; a node takes
-- one by setting lease_until, so two never work on one at once. blob_id:
-- the message as sent (Bcc removed), kept from the collector while here.
-- recipients: JSON array of addresses. Times in Unix seconds.
CREATE TABLE deliveries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    submission_id   bigint NOT NULL,
    account_id      bigint NOT NULL,
    blob_id         text NOT NULL,
    mail_from       text NOT NULL,
    recipients      text NOT NULL,
    send_at         bigint NOT NULL,
    attempts        bigint NOT NULL,
    next_attempt_at bigint NOT NULL,
    lease_until     bigint NOT NULL
);
CREATE INDEX deliveries_due ON deliveries(next_attempt_at);
CREATE INDEX deliveries_by_blob ON deliveries(blob_id);
