-- Per-account quota (RFC 9425) and the lookups of the blob garbage collector.
--
-- quota_octets: the most octets the account may hold (its emails and its
-- pending uploads, counted once per distinct blob in account_blobs); NULL is
-- no limit.
ALTER TABLE accounts ADD COLUMN quota_octets INTEGER;

-- "Does any email or grant of any account still refer to this blob?"
-- (blobs are content-addressed and shared between accounts).
CREATE INDEX emails_by_blob ON emails(blob_id);
CREATE INDEX account_blobs_by_blob ON account_blobs(blob_id);
