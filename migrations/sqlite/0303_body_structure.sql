-- The part tree of each message (issue 15, ADR 0002): the RFC 8621 §4.1.4
-- body parts with their byte ranges, digests and partition, in the binary
-- form of server/src/mail/structure.rs. Written with the email at ingest;
-- an email without a row (stored before this table) gets one on its first
-- structure read or from `fastview reproject`.
CREATE TABLE body_structure (
    email_id       INTEGER PRIMARY KEY REFERENCES emails(id) ON DELETE CASCADE,
    structure      BLOB NOT NULL
);
