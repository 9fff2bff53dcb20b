-- The full-text index (issue 16, ADR 0006): the folded words of each
-- message (server/src/mail/search.rs) as one tsvector, header words with
-- weight A and body words with weight D (so `body` matches D only), under a
-- GIN index. The words arrive folded and one space apart; the `simple`
-- configuration keeps them as they are.
CREATE TABLE email_search (
    email_id       bigint PRIMARY KEY REFERENCES emails(id) ON DELETE CASCADE,
    account_id     bigint NOT NULL,
    document       tsvector NOT NULL
);
CREATE INDEX email_search_document ON email_search USING gin (document);
