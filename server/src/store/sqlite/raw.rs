//! Raw row export and import of [`SqliteStore`] (see [`crate::store::raw`]):
//! keyset pages in key order; imports insert rows with their ids in one
//! transaction, skipping rows that are already there (`ON CONFLICT DO
//! NOTHING`); `AUTOINCREMENT` moves past the imported ids by itself.

use std::collections::HashMap;

use sqlx::Row;

use super::{SqliteStore, id_list};
use crate::mail::fast_view::FastView;
use crate::store::StoreResult;
use crate::store::raw::{
    AccountRecord, BlobRecord, ChangeRecord, EmailRecord, MailboxRecord, RawCursor, RawRows,
    RawTable, RowCounts, ThreadRefRecord,
};

pub(super) async fn export(
    store: &SqliteStore,
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
                 thread_state, changes_from FROM accounts WHERE id > ?1 ORDER BY id LIMIT ?2",
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
                 FROM mailboxes WHERE account_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
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
                 WHERE account_id = ?1 AND (message_id, thread_id) > (?2, ?3) \
                 ORDER BY message_id, thread_id LIMIT ?4",
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
                 WHERE account_id = ?1 AND blob_id > ?2 ORDER BY blob_id LIMIT ?3",
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
            let rows: Vec<(i64, i64, i64, i64, bool)> = sqlx::query_as(
                "SELECT type, modseq, object_id, kind, counts_only FROM changes \
                 WHERE account_id = ?1 AND (type, modseq, object_id) > (?2, ?3, ?4) \
                 ORDER BY type, modseq, object_id LIMIT ?5",
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
                            kind_of_object,
                            modseq,
                            object_id,
                            kind,
                            counts_only,
                        },
                    )
                    .collect(),
            )
        }
    })
}

async fn export_emails(
    store: &SqliteStore,
    after_id: i64,
    limit: i64,
) -> StoreResult<Vec<EmailRecord>> {
    let pool = &store.pool;
    let rows = sqlx::query(
        "SELECT id, account_id, blob_id, thread_id, size, received_at, sent_at, keywords, \
         message_id, base_subject, subject, from_sort, to_sort, from_text, to_text, cc_text, \
         bcc_text, has_attachment FROM emails WHERE id > ?1 ORDER BY id LIMIT ?2",
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
    let list = id_list(&ids);
    let slot: HashMap<i64, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let members: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT email_id, mailbox_id, received_at FROM email_mailboxes \
         WHERE email_id IN (SELECT value FROM json_each(?1)) ORDER BY email_id, mailbox_id",
    )
    .bind(&list)
    .fetch_all(pool)
    .await?;
    for (email, mailbox, received_at) in members {
        emails[slot[&email]]
            .memberships
            .push((mailbox, received_at));
    }
    let headers: Vec<(i64, Vec<u8>)> = sqlx::query_as(
        "SELECT email_id, header_block FROM email_headers \
         WHERE email_id IN (SELECT value FROM json_each(?1))",
    )
    .bind(&list)
    .fetch_all(pool)
    .await?;
    for (email, block) in headers {
        emails[slot[&email]].header_block = Some(block);
    }
    let views: Vec<(i64, String, bool)> = sqlx::query_as(
        "SELECT email_id, preview, has_attachment FROM fast_view \
         WHERE email_id IN (SELECT value FROM json_each(?1))",
    )
    .bind(&list)
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

pub(super) async fn import(store: &SqliteStore, rows: &RawRows) -> StoreResult<u64> {
    if rows.is_empty() {
        return Ok(0);
    }
    let mut tx = store.write().await?;
    let mut written = 0;
    match rows {
        RawRows::Accounts(rows) => {
            for r in rows {
                written += sqlx::query(
                    "INSERT INTO accounts (id, email, password_hash, modseq, email_state, \
                     mailbox_state, thread_state, changes_from) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (id) DO NOTHING",
                )
                .bind(r.id)
                .bind(&r.email)
                .bind(&r.password_hash)
                .bind(r.modseq)
                .bind(r.email_state)
                .bind(r.mailbox_state)
                .bind(r.thread_state)
                .bind(r.changes_from)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            }
        }
        RawRows::Mailboxes(rows) => {
            // Parents first within the page: insert without, then link.
            for r in rows {
                written += sqlx::query(
                    "INSERT INTO mailboxes (id, account_id, parent_id, name, role, sort_order, \
                     is_subscribed) VALUES (?1, ?2, NULL, ?3, ?4, ?5, ?6) \
                     ON CONFLICT (id) DO NOTHING",
                )
                .bind(r.id)
                .bind(r.account_id)
                .bind(&r.name)
                .bind(&r.role)
                .bind(r.sort_order)
                .bind(r.is_subscribed)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            }
            for r in rows.iter().filter(|r| r.parent_id.is_some()) {
                sqlx::query("UPDATE mailboxes SET parent_id = ?2 WHERE id = ?1")
                    .bind(r.id)
                    .bind(r.parent_id)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        RawRows::Emails(rows) => {
            for r in rows {
                let done = sqlx::query(
                    "INSERT INTO emails (id, account_id, blob_id, thread_id, size, received_at, \
                     sent_at, keywords, message_id, base_subject, subject, from_sort, to_sort, \
                     from_text, to_text, cc_text, bcc_text, has_attachment) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, \
                     ?16, ?17, ?18) ON CONFLICT (id) DO NOTHING",
                )
                .bind(r.id)
                .bind(r.account_id)
                .bind(&r.blob_id)
                .bind(r.thread_id)
                .bind(r.size)
                .bind(r.received_at)
                .bind(r.sent_at)
                .bind(&r.keywords)
                .bind(&r.message_id)
                .bind(&r.base_subject)
                .bind(&r.subject)
                .bind(&r.from_sort)
                .bind(&r.to_sort)
                .bind(&r.from_text)
                .bind(&r.to_text)
                .bind(&r.cc_text)
                .bind(&r.bcc_text)
                .bind(r.has_attachment)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                written += done;
                for (mailbox, received_at) in &r.memberships {
                    sqlx::query(
                        "INSERT INTO email_mailboxes (mailbox_id, received_at, email_id) \
                         VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                    )
                    .bind(mailbox)
                    .bind(received_at)
                    .bind(r.id)
                    .execute(&mut *tx)
                    .await?;
                }
                if let Some(block) = &r.header_block {
                    sqlx::query(
                        "INSERT INTO email_headers (email_id, header_block) VALUES (?1, ?2) \
                         ON CONFLICT DO NOTHING",
                    )
                    .bind(r.id)
                    .bind(block)
                    .execute(&mut *tx)
                    .await?;
                }
                if let Some(view) = &r.fast_view {
                    sqlx::query(
                        "INSERT INTO fast_view (email_id, preview, has_attachment) \
                         VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                    )
                    .bind(r.id)
                    .bind(&view.preview)
                    .bind(view.has_attachment)
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        RawRows::ThreadRefs(account, rows) => {
            for r in rows {
                written += sqlx::query(
                    "INSERT INTO thread_refs (account_id, message_id, thread_id, base_subject) \
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                )
                .bind(account)
                .bind(&r.message_id)
                .bind(r.thread_id)
                .bind(&r.base_subject)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            }
        }
        RawRows::AccountBlobs(account, rows) => {
            for r in rows {
                written += sqlx::query(
                    "INSERT INTO account_blobs (account_id, blob_id, size, created_at) \
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                )
                .bind(account)
                .bind(&r.blob_id)
                .bind(r.size)
                .bind(r.created_at)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            }
        }
        RawRows::Changes(account, rows) => {
            for r in rows {
                written += sqlx::query(
                    "INSERT INTO changes (account_id, type, modseq, object_id, kind, \
                     counts_only) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
                )
                .bind(account)
                .bind(r.kind_of_object)
                .bind(r.modseq)
                .bind(r.object_id)
                .bind(r.kind)
                .bind(r.counts_only)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            }
        }
    }
    tx.commit().await?;
    Ok(written)
}

pub(super) async fn counts(store: &SqliteStore, account: Option<i64>) -> StoreResult<RowCounts> {
    let row = sqlx::query(
        "SELECT \
         (SELECT count(*) FROM accounts WHERE ?1 IS NULL OR id = ?1), \
         (SELECT count(*) FROM mailboxes WHERE ?1 IS NULL OR account_id = ?1), \
         (SELECT count(*) FROM emails WHERE ?1 IS NULL OR account_id = ?1), \
         (SELECT count(*) FROM email_mailboxes m JOIN emails e ON e.id = m.email_id \
           WHERE ?1 IS NULL OR e.account_id = ?1), \
         (SELECT count(*) FROM email_headers h JOIN emails e ON e.id = h.email_id \
           WHERE ?1 IS NULL OR e.account_id = ?1), \
         (SELECT count(*) FROM fast_view f JOIN emails e ON e.id = f.email_id \
           WHERE ?1 IS NULL OR e.account_id = ?1), \
         (SELECT count(*) FROM thread_refs WHERE ?1 IS NULL OR account_id = ?1), \
         (SELECT count(*) FROM account_blobs WHERE ?1 IS NULL OR account_id = ?1), \
         (SELECT count(*) FROM changes WHERE ?1 IS NULL OR account_id = ?1), \
         (SELECT coalesce(max(id), 0) FROM emails WHERE ?1 IS NULL OR account_id = ?1)",
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
