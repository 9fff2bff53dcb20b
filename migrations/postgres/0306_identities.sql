-- Sending mail, part one (issue 17, RFC 8621 §6, §8): the addresses an
-- account may send as, its Identity objects and its VacationResponse.

-- RFC 8620 §5.1 states of the new types: the modseq of their last change.
ALTER TABLE accounts ADD COLUMN identity_state bigint NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN vacation_state bigint NOT NULL DEFAULT 0;

-- Further addresses an operator lets an account send as
-- (`fastview account alias add`). An address belongs to one account;
-- stored lowercase (accounts' own addresses are compared the same way).
CREATE TABLE account_aliases (
    address        text PRIMARY KEY,
    account_id     bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE
);
CREATE INDEX account_aliases_by_account ON account_aliases(account_id);

-- RFC 8621 §6. reply_to and bcc: JSON EmailAddress[] or NULL. The
-- identity made with the account (its own address) has may_delete false.
CREATE TABLE identities (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id     bigint NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    name           text NOT NULL,
    email          text NOT NULL,
    reply_to       text,
    bcc            text,
    text_signature text NOT NULL,
    html_signature text NOT NULL,
    may_delete     boolean NOT NULL
);
CREATE INDEX identities_by_account ON identities(account_id);
INSERT INTO identities (account_id, name, email, text_signature, html_signature, may_delete)
    SELECT id, '', email, '', '', false FROM accounts;

-- RFC 8621 §8: the one VacationResponse of an account, when it was ever
-- set (else it reads as disabled). Dates in Unix seconds.
CREATE TABLE vacation_responses (
    account_id     bigint PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
    is_enabled     boolean NOT NULL,
    from_date      bigint,
    to_date        bigint,
    subject        text,
    text_body      text,
    html_body      text
);
