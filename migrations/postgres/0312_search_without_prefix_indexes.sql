-- Nothing changes on PostgreSQL (issue 16, ADR 0006): SQLite's migration of
-- this name drops two of its three FTS5 prefix indexes. A GIN index keeps no
-- prefix index; a query word under four characters now matches whole words
-- only on both databases (`server/src/mail/search.rs`, MIN_PREFIX_CHARS).
SELECT 1;
