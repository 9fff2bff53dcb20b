//! Raw row export and import of [`PostgresStore`] (see [`crate::store::raw`]):
//! keyset pages in key order; imports bind one array per column, insert with
//! explicit ids (`OVERRIDING SYSTEM VALUE`), skip rows already there
//! (`ON CONFLICT DO NOTHING`) and move the identity sequences past the
//! imported ids. Strings get the same NUL stripping and thread-ref keys as
//! rows written by the store itself.

use std::borrow::Cow;
use std::collections::HashMap;

use sqlx::Row;

use super::{PostgresStore, ref_key, text};
use crate::mail::fast_view::FastView;
use crate::store::StoreResult;
use crate::store::raw::{
    AccountRecord, BlobRecord, ChangeRecord, EmailRecord, MailboxRecord, RawCursor, RawRows,
    RawTable, RowCounts, ThreadRefRecord,
};

/// Moves the identity sequence of `table` to its highest id, so new rows get
/// ids above the imported ones.
async fn bump_sequence(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    table: &str,
) -> StoreResult<()> {
    let sql = format!(
        "SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) FROM {table} \
         HAVING max(id) IS NOT NULL"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub(super) async fn export(
    store: &PostgresStore,
    table: RawTable,
    account: i64,
    after: &RawCursor,
    limit: i64,
) -> StoreResult<RawRows> {
    let pool = &store.pool;
    Ok(match table {
        RawTable::Accounts => {
            let rows = sqlx::query(
                "SELECT id, email, password_hash, modseq, email_state, mailbox_state, \
                 thread_state, changes_from FROM accounts WHERE id > $1 ORDER BY id LIMIT $2",
            )
            .bind(after.number)
            .bind(limit)
            .fetch_all(pool)
            .await?;
            RawRows::Accounts(
                rows.iter()
                    .map(|r| AccountRecord {
                        id: r.get(0),
                        email: r.get(1),
                        password_hash: r.get(2),
                        modseq: r.get(3),
                        email_state: r.get(4),
                        mailbox_state: r.get(5),
                        thread_state: r.get(6),
                        changes_from: r.get(7),
                    })
                    .collect(),
            )
        }
        RawTable::Mailboxes => {
            let rows = sqlx::query(
                "SELECT id, account_id, parent_id, name, role, sort_order, is_subscribed \
                 FROM mailboxes WHERE account_id = $1 AND id > $2 ORDER BY id LIMIT $3",
            )
            .bind(account)
            .bind(after.number)
            .bind(limit)
            .fetch_all(pool)
            .await?;
            RawRows::Mailboxes(
                rows.iter()
                    .map(|r| MailboxRecord {
                        id: r.get(0),
                        account_id: r.get(1),
                        parent_id: r.get(2),
                        name: r.get(3),
                        role: r.get(4),
                        sort_order: r.get(5),
                        is_subscribed: r.get(6),
                    })
                    .collect(),
            )
        }
        RawTable::Emails => RawRows::Emails(export_emails(store, after.number, limit).await?),
        RawTable::ThreadRefs => {
            let rows: Vec<(String, i64, String)> = sqlx::query_as(
                "SELECT message_id, thread_id, base_subject FROM thread_refs \
                 WHERE account_id = $1 AND (message_id, thread_id) > ($2, $3) \
                 ORDER BY message_id, thread_id LIMIT $4",
            )
            .bind(account)
            .bind(&after.text)
            .bind(after.number)
            .bind(limit)
            .fetch_all(pool)
            .await?;
            RawRows::ThreadRefs(
                account,
                rows.into_iter()
                    .map(|(message_id, thread_id, base_subject)| ThreadRefRecord {
                        message_id,
                        thread_id,
                        base_subject,
                    })
                    .collect(),
            )
        }
        RawTable::AccountBlobs => {
            let rows: Vec<(String, i64, i64)> = sqlx::query_as(
                "SELECT blob_id, size, created_at FROM account_blobs \
                 WHERE account_id = $1 AND blob_id > $2 ORDER BY blob_id LIMIT $3",
            )
            .bind(account)
            .bind(&after.text)
            .bind(limit)
            .fetch_all(pool)
            .await?;
            RawRows::AccountBlobs(
                account,
                rows.into_iter()
                    .map(|(blob_id, size, created_at)| BlobRecord {
                        blob_id,
                        size,
                        created_at,
                    })
                    .collect(),
            )
        }
        RawTable::Changes => {
            let rows: Vec<(i16, i64, i64, i16, bool)> = sqlx::query_as(
                "SELECT type, modseq, object_id, kind, counts_only FROM changes \
                 WHERE account_id = $1 AND (type, modseq, object_id) > ($2, $3, $4) \
                 ORDER BY type, modseq, object_id LIMIT $5",
            )
            .bind(account)
            .bind(after.number)
            .bind(after.modseq)
            .bind(after.object)
            .bind(limit)
            .fetch_all(pool)
            .await?;
            RawRows::Changes(
                account,
                rows.into_iter()
                    .map(
                        |(kind_of_object, modseq, object_id, kind, counts_only)| ChangeRecord {
                            kind_of_object: kind_of_object.into(),
                            modseq,
                            object_id,
                            kind: kind.into(),
                            counts_only,
                        },
                    )
                    .collect(),
            )
        }
    })
}

async fn export_emails(
    store: &PostgresStore,
    after_id: i64,
    limit: i64,
) -> StoreResult<Vec<EmailRecord>> {
    let pool = &store.pool;
    let rows = sqlx::query(
        "SELECT id, account_id, blob_id, thread_id, size, received_at, sent_at, keywords, \
         message_id, base_subject, subject, from_sort, to_sort, from_text, to_text, cc_text, \
         bcc_text, has_attachment FROM emails WHERE id > $1 ORDER BY id LIMIT $2",
    )
    .bind(after_id)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    let mut emails: Vec<EmailRecord> = rows
        .iter()
        .map(|r| EmailRecord {
            id: r.get(0),
            account_id: r.get(1),
            blob_id: r.get(2),
            thread_id: r.get(3),
            size: r.get(4),
            received_at: r.get(5),
            sent_at: r.get(6),
            keywords: r.get(7),
            message_id: r.get(8),
            base_subject: r.get(9),
            subject: r.get(10),
            from_sort: r.get(11),
            to_sort: r.get(12),
            from_text: r.get(13),
            to_text: r.get(14),
            cc_text: r.get(15),
            bcc_text: r.get(16),
            has_attachment: r.get(17),
            memberships: Vec::new(),
            header_block: None,
            fast_view: None,
        })
        .collect();
    if emails.is_empty() {
        return Ok(emails);
    }
    let ids: Vec<i64> = emails.iter().map(|e| e.id).collect();
    let slot: HashMap<i64, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let members: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT email_id, mailbox_id, received_at FROM email_mailboxes \
         WHERE email_id = any($1) ORDER BY email_id, mailbox_id",
    )
    .bind(&ids)
    .fetch_all(pool)
    .await?;
    for (email, mailbox, received_at) in members {
        emails[slot[&email]]
            .memberships
            .push((mailbox, received_at));
    }
    let headers: Vec<(i64, Vec<u8>)> =
        sqlx::query_as("SELECT email_id, header_block FROM email_headers WHERE email_id = any($1)")
            .bind(&ids)
            .fetch_all(pool)
            .await?;
    for (email, block) in headers {
        emails[slot[&email]].header_block = Some(block);
    }
    let views: Vec<(i64, String, bool)> = sqlx::query_as(
        "SELECT email_id, preview, has_attachment FROM fast_view WHERE email_id = any($1)",
    )
    .bind(&ids)
    .fetch_all(pool)
    .await?;
    for (email, preview, has_attachment) in views {
        emails[slot[&email]].fast_view = Some(FastView {
            preview,
            has_attachment,
        });
    }
    Ok(emails)
}

pub(super) async fn import(store: &PostgresStore, rows: &RawRows) -> StoreResult<u64> {
    if rows.is_empty() {
        return Ok(0);
    }
    let mut tx = store.pool.begin().await?;
    let written = match rows {
        RawRows::Accounts(rows) => {
            let col = |f: fn(&AccountRecord) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
            let emails: Vec<&str> = rows.iter().map(|r| r.email.as_str()).collect();
            let hashes: Vec<&str> = rows.iter().map(|r| r.password_hash.as_str()).collect();
            let done = sqlx::query(
                "INSERT INTO accounts (id, email, password_hash, modseq, email_state, \
                 mailbox_state, thread_state, changes_from) OVERRIDING SYSTEM VALUE \
                 SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], \
                   $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[]) \
                 ON CONFLICT (id) DO NOTHING",
            )
            .bind(col(|r| r.id))
            .bind(&emails)
            .bind(&hashes)
            .bind(col(|r| r.modseq))
            .bind(col(|r| r.email_state))
            .bind(col(|r| r.mailbox_state))
            .bind(col(|r| r.thread_state))
            .bind(col(|r| r.changes_from))
            .execute(&mut *tx)
            .await?
            .rows_affected();
            bump_sequence(&mut tx, "accounts").await?;
            done
        }
        RawRows::Mailboxes(rows) => {
            let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
            let accounts: Vec<i64> = rows.iter().map(|r| r.account_id).collect();
            let parents: Vec<Option<i64>> = rows.iter().map(|r| r.parent_id).collect();
            let names: Vec<Cow<'_, str>> = rows.iter().map(|r| text(&r.name)).collect();
            let roles: Vec<Option<&str>> = rows.iter().map(|r| r.role.as_deref()).collect();
            let orders: Vec<i64> = rows.iter().map(|r| r.sort_order).collect();
            let subscribed: Vec<bool> = rows.iter().map(|r| r.is_subscribed).collect();
            // One statement: a parent later in the page is checked at its end.
            let done = sqlx::query(
                "INSERT INTO mailboxes (id, account_id, parent_id, name, role, sort_order, \
                 is_subscribed) OVERRIDING SYSTEM VALUE \
                 SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], \
                   $5::text[], $6::bigint[], $7::boolean[]) \
                 ON CONFLICT (id) DO NOTHING",
            )
            .bind(&ids)
            .bind(&accounts)
            .bind(&parents)
            .bind(&names)
            .bind(&roles)
            .bind(&orders)
            .bind(&subscribed)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            bump_sequence(&mut tx, "mailboxes").await?;
            done
        }
        RawRows::Emails(rows) => {
            let done = import_emails(&mut tx, rows).await?;
            bump_sequence(&mut tx, "emails").await?;
            done
        }
        RawRows::ThreadRefs(account, rows) => {
            let keys: Vec<String> = rows.iter().map(|r| ref_key(&r.message_id)).collect();
            let threads: Vec<i64> = rows.iter().map(|r| r.thread_id).collect();
            let subjects: Vec<Cow<'_, str>> = rows.iter().map(|r| text(&r.base_subject)).collect();
            sqlx::query(
                "INSERT INTO thread_refs (account_id, message_id, thread_id, base_subject) \
                 SELECT $1, u.m, u.t, u.s FROM unnest($2::text[], $3::bigint[], $4::text[]) \
                   AS u(m, t, s) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(account)
            .bind(&keys)
            .bind(&threads)
            .bind(&subjects)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        }
        RawRows::AccountBlobs(account, rows) => {
            let blobs: Vec<&str> = rows.iter().map(|r| r.blob_id.as_str()).collect();
            let sizes: Vec<i64> = rows.iter().map(|r| r.size).collect();
            let created: Vec<i64> = rows.iter().map(|r| r.created_at).collect();
            sqlx::query(
                "INSERT INTO account_blobs (account_id, blob_id, size, created_at) \
                 SELECT $1, u.b, u.s, u.c FROM unnest($2::text[], $3::bigint[], $4::bigint[]) \
                   AS u(b, s, c) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(account)
            .bind(&blobs)
            .bind(&sizes)
            .bind(&created)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        }
        RawRows::Changes(account, rows) => {
            let types: Vec<i16> = rows.iter().map(|r| r.kind_of_object as i16).collect();
            let modseqs: Vec<i64> = rows.iter().map(|r| r.modseq).collect();
            let objects: Vec<i64> = rows.iter().map(|r| r.object_id).collect();
            let kinds: Vec<i16> = rows.iter().map(|r| r.kind as i16).collect();
            let counts_only: Vec<bool> = rows.iter().map(|r| r.counts_only).collect();
            sqlx::query(
                "INSERT INTO changes (account_id, type, modseq, object_id, kind, counts_only) \
                 SELECT $1, u.t, u.m, u.o, u.k, u.c FROM unnest($2::smallint[], $3::bigint[], \
                   $4::bigint[], $5::smallint[], $6::boolean[]) AS u(t, m, o, k, c) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(account)
            .bind(&types)
            .bind(&modseqs)
            .bind(&objects)
            .bind(&kinds)
            .bind(&counts_only)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        }
    };
    tx.commit().await?;
    Ok(written)
}

async fn import_emails(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    rows: &[EmailRecord],
) -> StoreResult<u64> {
    let ints = |f: fn(&EmailRecord) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
    let texts = |f: fn(&EmailRecord) -> &str| rows.iter().map(|r| text(f(r))).collect::<Vec<_>>();
    let blob_ids: Vec<&str> = rows.iter().map(|r| r.blob_id.as_str()).collect();
    let sent_at: Vec<Option<i64>> = rows.iter().map(|r| r.sent_at).collect();
    let message_ids: Vec<Option<Cow<'_, str>>> = rows
        .iter()
        .map(|r| r.message_id.as_deref().map(text))
        .collect();
    let has_attachment: Vec<bool> = rows.iter().map(|r| r.has_attachment).collect();
    let done = sqlx::query(
        "INSERT INTO emails (id, account_id, blob_id, thread_id, size, received_at, sent_at, \
         keywords, message_id, base_subject, subject, from_sort, to_sort, from_text, to_text, \
         cc_text, bcc_text, has_attachment) OVERRIDING SYSTEM VALUE \
         SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], \
           $5::bigint[], $6::bigint[], $7::bigint[], $8::text[], $9::text[], $10::text[], \
           $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], \
           $17::text[], $18::boolean[]) \
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(ints(|r| r.id))
    .bind(ints(|r| r.account_id))
    .bind(&blob_ids)
    .bind(ints(|r| r.thread_id))
    .bind(ints(|r| r.size))
    .bind(ints(|r| r.received_at))
    .bind(&sent_at)
    .bind(texts(|r| &r.keywords))
    .bind(&message_ids)
    .bind(texts(|r| &r.base_subject))
    .bind(texts(|r| &r.subject))
    .bind(texts(|r| &r.from_sort))
    .bind(texts(|r| &r.to_sort))
    .bind(texts(|r| &r.from_text))
    .bind(texts(|r| &r.to_text))
    .bind(texts(|r| &r.cc_text))
    .bind(texts(|r| &r.bcc_text))
    .bind(&has_attachment)
    .execute(&mut **tx)
    .await?
    .rows_affected();

    let (mut member_email, mut member_mailbox, mut member_received) = (vec![], vec![], vec![]);
    for row in rows {
        for (mailbox, received_at) in &row.memberships {
            member_email.push(row.id);
            member_mailbox.push(*mailbox);
            member_received.push(*received_at);
        }
    }
    sqlx::query(
        "INSERT INTO email_mailboxes (mailbox_id, received_at, email_id) \
         SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) ON CONFLICT DO NOTHING",
    )
    .bind(&member_mailbox)
    .bind(&member_received)
    .bind(&member_email)
    .execute(&mut **tx)
    .await?;

    let with_header: Vec<&EmailRecord> = rows.iter().filter(|r| r.header_block.is_some()).collect();
    let header_ids: Vec<i64> = with_header.iter().map(|r| r.id).collect();
    let blocks: Vec<&[u8]> = with_header
        .iter()
        .filter_map(|r| r.header_block.as_deref())
        .collect();
    sqlx::query(
        "INSERT INTO email_headers (email_id, header_block) \
         SELECT * FROM unnest($1::bigint[], $2::bytea[]) ON CONFLICT DO NOTHING",
    )
    .bind(&header_ids)
    .bind(&blocks)
    .execute(&mut **tx)
    .await?;

    let views: Vec<(i64, &FastView)> = rows
        .iter()
        .filter_map(|r| r.fast_view.as_ref().map(|v| (r.id, v)))
        .collect();
    let view_ids: Vec<i64> = views.iter().map(|(id, _)| *id).collect();
    let previews: Vec<Cow<'_, str>> = views.iter().map(|(_, v)| text(&v.preview)).collect();
    let attachments: Vec<bool> = views.iter().map(|(_, v)| v.has_attachment).collect();
    sqlx::query(
        "INSERT INTO fast_view (email_id, preview, has_attachment) \
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::boolean[]) ON CONFLICT DO NOTHING",
    )
    .bind(&view_ids)
    .bind(&previews)
    .bind(&attachments)
    .execute(&mut **tx)
    .await?;
    Ok(done)
}

pub(super) async fn counts(store: &PostgresStore, account: Option<i64>) -> StoreResult<RowCounts> {
    let row = sqlx::query(
        "SELECT \
         (SELECT count(*) FROM accounts WHERE $1::bigint IS NULL OR id = $1), \
         (SELECT count(*) FROM mailboxes WHERE $1::bigint IS NULL OR account_id = $1), \
         (SELECT count(*) FROM emails WHERE $1::bigint IS NULL OR account_id = $1), \
         (SELECT count(*) FROM email_mailboxes m JOIN emails e ON e.id = m.email_id \
           WHERE $1::bigint IS NULL OR e.account_id = $1), \
         (SELECT count(*) FROM email_headers h JOIN emails e ON e.id = h.email_id \
           WHERE $1::bigint IS NULL OR e.account_id = $1), \
         (SELECT count(*) FROM fast_view f JOIN emails e ON e.id = f.email_id \
           WHERE $1::bigint IS NULL OR e.account_id = $1), \
         (SELECT count(*) FROM thread_refs WHERE $1::bigint IS NULL OR account_id = $1), \
         (SELECT count(*) FROM account_blobs WHERE $1::bigint IS NULL OR account_id = $1), \
         (SELECT count(*) FROM changes WHERE $1::bigint IS NULL OR account_id = $1), \
         (SELECT coalesce(max(id), 0) FROM emails WHERE $1::bigint IS NULL OR account_id = $1)",
    )
    .bind(account)
    .fetch_one(&store.pool)
    .await?;
    Ok(RowCounts {
        accounts: row.get(0),
        mailboxes: row.get(1),
        emails: row.get(2),
        memberships: row.get(3),
        headers: row.get(4),
        fast_views: row.get(5),
        thread_refs: row.get(6),
        account_blobs: row.get(7),
        changes: row.get(8),
        max_email_id: row.get(9),
    })
}
