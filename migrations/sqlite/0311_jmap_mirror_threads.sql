-- Thread/get through a JMAP upstream (issue 19, ADR 0009) reads the
-- mirrored emails of the upstream's threads by their threadId.
CREATE INDEX jmap_mirror_emails_thread ON jmap_mirror_emails (account_id, thread_id);
