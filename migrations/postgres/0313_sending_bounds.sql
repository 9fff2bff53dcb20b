-- Sending, bounded (issue 43, items 4 and 5).
--
-- lease_token fences a delivery's lease: each take of a delivery adds one,
-- and a node records an attempt, or renews its hold, only while the token
-- it took is still the row's. A node whose lease another node took over
-- (it stalled past the lease) can neither record its attempt nor hold the
-- delivery again. The node that queued a delivery holds it with token 0.
ALTER TABLE deliveries ADD COLUMN lease_token bigint NOT NULL DEFAULT 0;

-- What each account sent, for the hourly send limits: one row per
-- submission (local recipients included), written in its transaction.
-- Kept apart from email_submissions, whose rows the user may destroy.
-- Rows older than an hour are deleted as the account sends again.
-- sent_at in Unix seconds.
CREATE TABLE send_log (
    account_id bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    sent_at    bigint NOT NULL,
    recipients bigint NOT NULL
);
CREATE INDEX send_log_by_account ON send_log(account_id, sent_at);
