-- The IMAP proxy (ADR 0008), issue 45: how each account's sync task learns
-- of changes at the upstream, for `fastview account list`: `notify` (NOTIFY,
-- RFC 5465: every folder tells), `idle+status` (IDLE on INBOX, STATUS of the
-- other folders every `--upstream-poll-active` while the account is in use),
-- `status` (no IDLE: STATUS of every folder as often). Empty until the task
-- has run.
ALTER TABLE upstream_syncs ADD COLUMN watch TEXT NOT NULL DEFAULT '';
