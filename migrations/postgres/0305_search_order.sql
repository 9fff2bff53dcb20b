-- The full-text index answers a search's list view on its own (issue 16,
-- ADR 0006): each row keeps its email's receivedAt, and an index by
-- account and receivedAt lets a query for a common word read the newest
-- rows until a page has matched, instead of ordering every match; a rare
-- word still goes through the GIN index. Neither visits `emails`.
ALTER TABLE email_search ADD COLUMN received_at bigint;
UPDATE email_search s SET received_at = e.received_at FROM emails e WHERE e.id = s.email_id;
ALTER TABLE email_search ALTER COLUMN received_at SET NOT NULL;
CREATE INDEX email_search_recent ON email_search (account_id, received_at DESC, email_id DESC);
