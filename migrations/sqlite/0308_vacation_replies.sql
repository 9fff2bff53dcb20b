-- Vacation auto-replies (issue 17, RFC 8621 §8, RFC 3834 §2): when an
-- account last answered a sender automatically, so that it answers each
-- sender at most once per period (mail/vacation.rs). Unix seconds.
CREATE TABLE vacation_replies (
    account_id     INTEGER NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    sender         TEXT NOT NULL,
    replied_at     INTEGER NOT NULL,
    PRIMARY KEY (account_id, sender)
);
