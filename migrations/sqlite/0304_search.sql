-- The full-text index (issue 16, ADR 0006): the folded words of each
-- message (server/src/mail/search.rs) in an FTS5 table whose rowid is the
-- email id. Contentless: the words are indexed, not stored (snippets are
-- made from the message itself). The words arrive folded and one space
-- apart, so the tokenizer only splits them; `prefix` indexes speed up the
-- prefix matches every query word makes. `account` is not indexed (FTS5
-- keeps no value of a contentless table): the account is matched by joining
-- `emails`.
CREATE VIRTUAL TABLE email_search USING fts5(
    account UNINDEXED,
    headers,
    body,
    content = '',
    contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 0',
    prefix = '2 3'
);

-- A virtual table has no foreign key: an email's words go with it.
CREATE TRIGGER email_search_forget AFTER DELETE ON emails
BEGIN
    DELETE FROM email_search WHERE rowid = old.id;
END;
