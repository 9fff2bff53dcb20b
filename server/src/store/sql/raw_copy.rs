//! [`Maintenance`] over SQL: the planner statistics after a bulk load, and
//! the raw copy of `migrate-store`: each table's rows exported a page at a
//! time in key order and imported as they are (emails through the same
//! writer as ingest). The row types are `raw.rs`'s.

use super::*;
use crate::store::raw::*;

/// Rows of an export page's emails per table, matched to them by id.
type EmailRows<T> = Vec<(i64, T)>;

/// Gives each `(email id, value)` row to its email of `emails` (in id
/// order, as an export page is).
fn attach<T>(
    emails: &mut [EmailRecord],
    rows: impl IntoIterator<Item = (i64, T)>,
    mut put: impl FnMut(&mut EmailRecord, T),
) {
    for (id, value) in rows {
        if let Ok(i) = emails.binary_search_by_key(&id, |email| email.id) {
            put(&mut emails[i], value);
        }
    }
}

impl_sql! {
    #[async_trait]
    impl Maintenance {
        async fn analyze(&self) -> StoreResult<()> {
            if let Some(statement) = D::ANALYZE {
                sqlx::raw_sql(statement).execute(&self.writer).await?;
            }
            Ok(())
        }

        /// [`Maintenance::export_raw`](crate::store::Maintenance::export_raw): keyset pages in key order.
        async fn export_raw(
            &self,
            table: RawTable,
            account: i64,
            after: &RawCursor,
            limit: i64,
        ) -> StoreResult<RawRows> {
            let pool = &self.reader;
            Ok(match table {
                RawTable::Accounts => RawRows::Accounts(
                    sqlx::query_as(
                        "SELECT id, email, password_hash, modseq, email_state, mailbox_state, \
                         thread_state, changes_from, quota_octets FROM accounts WHERE id > $1 \
                         ORDER BY id LIMIT $2",
                    )
                    .bind(after.number)
                    .bind(limit)
                    .fetch_all(pool)
                    .await?,
                ),
                RawTable::Mailboxes => RawRows::Mailboxes(
                    sqlx::query_as(
                        "SELECT id, account_id, parent_id, name, role, sort_order, is_subscribed \
                         FROM mailboxes WHERE account_id = $1 AND id > $2 ORDER BY id LIMIT $3",
                    )
                    .bind(account)
                    .bind(after.number)
                    .bind(limit)
                    .fetch_all(pool)
                    .await?,
                ),
                RawTable::Emails => RawRows::Emails(self.export_emails(after.number, limit).await?),
                RawTable::ThreadRefs => RawRows::ThreadRefs(
                    account,
                    sqlx::query_as(
                        "SELECT message_id, thread_id, base_subject FROM thread_refs \
                         WHERE account_id = $1 AND (message_id, thread_id) > ($2, $3) \
                         ORDER BY message_id, thread_id LIMIT $4",
                    )
                    .bind(account)
                    .bind(after.text.as_str())
                    .bind(after.number)
                    .bind(limit)
                    .fetch_all(pool)
                    .await?,
                ),
                RawTable::AccountBlobs => RawRows::AccountBlobs(
                    account,
                    sqlx::query_as(
                        "SELECT blob_id, size, created_at FROM account_blobs \
                         WHERE account_id = $1 AND blob_id > $2 ORDER BY blob_id LIMIT $3",
                    )
                    .bind(account)
                    .bind(after.text.as_str())
                    .bind(limit)
                    .fetch_all(pool)
                    .await?,
                ),
                RawTable::Changes => RawRows::Changes(
                    account,
                    sqlx::query_as(
                        "SELECT type, modseq, object_id, kind, counts_only FROM changes \
                         WHERE account_id = $1 AND (type, modseq, object_id) > ($2, $3, $4) \
                         ORDER BY type, modseq, object_id LIMIT $5",
                    )
                    .bind(account)
                    .bind(after.number as i16)
                    .bind(after.modseq)
                    .bind(after.object)
                    .bind(limit)
                    .fetch_all(pool)
                    .await?,
                ),
            })
        }

        /// [`Maintenance::import_raw`](crate::store::Maintenance::import_raw): rows as they are, in
        /// one transaction, skipping rows already there; identity sequences move
        /// past the imported ids ([`Statements::after_raw_import`](crate::store::dialect::Statements::after_raw_import)).
        async fn import_raw(&self, rows: &RawRows) -> StoreResult<u64> {
            if rows.is_empty() {
                return Ok(0);
            }
            let mut tx = self.write(None).await?;
            let written = Self::import_rows(&mut tx, rows).await?;
            Self::after_import(&mut tx, rows).await?;
            tx.commit().await?;
            Ok(written)
        }

        /// [`Maintenance::raw_counts`](crate::store::Maintenance::raw_counts).
        async fn raw_counts(&self, account: Option<i64>) -> StoreResult<RowCounts> {
            Ok(sqlx::query_as(
                "SELECT \
                 (SELECT count(*) FROM accounts WHERE $1 IS NULL OR id = $1) AS accounts, \
                 (SELECT count(*) FROM mailboxes WHERE $1 IS NULL OR account_id = $1) AS mailboxes, \
                 (SELECT count(*) FROM emails WHERE $1 IS NULL OR account_id = $1) AS emails, \
                 (SELECT count(*) FROM email_mailboxes m JOIN emails e ON e.id = m.email_id \
                   WHERE $1 IS NULL OR e.account_id = $1) AS memberships, \
                 (SELECT count(*) FROM email_headers h JOIN emails e ON e.id = h.email_id \
                   WHERE $1 IS NULL OR e.account_id = $1) AS headers, \
                 (SELECT count(*) FROM fast_view f JOIN emails e ON e.id = f.email_id \
                   WHERE $1 IS NULL OR e.account_id = $1) AS fast_views, \
                 (SELECT count(*) FROM body_structure s JOIN emails e ON e.id = s.email_id \
                   WHERE $1 IS NULL OR e.account_id = $1) AS structures, \
                 (SELECT count(*) FROM thread_refs WHERE $1 IS NULL OR account_id = $1) \
                   AS thread_refs, \
                 (SELECT count(*) FROM account_blobs WHERE $1 IS NULL OR account_id = $1) \
                   AS account_blobs, \
                 (SELECT count(*) FROM changes WHERE $1 IS NULL OR account_id = $1) AS changes, \
                 (SELECT coalesce(max(id), 0) FROM emails WHERE $1 IS NULL OR account_id = $1) \
                   AS max_email_id",
            )
            .bind(account)
            .fetch_one(&self.reader)
            .await?)
        }
    }
}

impl_sql! {
    impl {
        /// Writes one page of raw rows in `tx`, skipping rows already there;
        /// how many were new.
        async fn import_rows(tx: &mut Tx<D>, rows: &RawRows) -> StoreResult<u64> {
            let text = |value: &str| D::text(value).into_owned();
            Ok(match rows {
                RawRows::Accounts(rows) => Self::import_accounts(tx, rows).await?,
                RawRows::Mailboxes(rows) => Self::import_mailboxes(tx, rows).await?,
                RawRows::Emails(rows) => Self::write_emails(tx, rows).await?,
                RawRows::ThreadRefs(account, rows) => {
                    Self::insert_rows(
                        tx,
                        "INSERT INTO thread_refs (account_id, message_id, thread_id, base_subject)",
                        "ON CONFLICT DO NOTHING",
                        4,
                        rows,
                        |row, r| {
                            row.push_bind(*account)
                                .push_bind(D::ref_key(&r.message_id))
                                .push_bind(r.thread_id)
                                .push_bind(text(&r.base_subject));
                        },
                    )
                    .await?
                }
                RawRows::AccountBlobs(account, rows) => {
                    Self::insert_rows(
                        tx,
                        "INSERT INTO account_blobs (account_id, blob_id, size, created_at)",
                        "ON CONFLICT DO NOTHING",
                        4,
                        rows,
                        |row, r| {
                            row.push_bind(*account)
                                .push_bind(r.blob_id.clone())
                                .push_bind(r.size)
                                .push_bind(r.created_at);
                        },
                    )
                    .await?
                }
                RawRows::Changes(account, rows) => Self::insert_rows(
                    tx,
                    "INSERT INTO changes (account_id, type, modseq, object_id, kind, counts_only)",
                    "ON CONFLICT DO NOTHING",
                    6,
                    rows,
                    |row, r| {
                        row.push_bind(*account)
                            .push_bind(r.kind_of_object as i16)
                            .push_bind(r.modseq)
                            .push_bind(r.object_id)
                            .push_bind(r.kind as i16)
                            .push_bind(r.counts_only);
                    },
                )
                .await?,
            })
        }

        /// Raw account rows, ids and counters as they are.
        async fn import_accounts(tx: &mut Tx<D>, rows: &[AccountRecord]) -> StoreResult<u64> {
            Self::insert_with_ids(
                tx,
                "INSERT INTO accounts (id, email, password_hash, modseq, email_state, \
             mailbox_state, thread_state, changes_from, quota_octets)",
                9,
                rows,
                |row, r| {
                    row.push_bind(r.id)
                        .push_bind(r.email.clone())
                        .push_bind(r.password_hash.clone())
                        .push_bind(r.modseq)
                        .push_bind(r.email_state)
                        .push_bind(r.mailbox_state)
                        .push_bind(r.thread_state)
                        .push_bind(r.changes_from)
                        .push_bind(r.quota_octets);
                },
            )
            .await
        }

        /// Raw mailbox rows, ids and parents as they are.
        async fn import_mailboxes(tx: &mut Tx<D>, rows: &[MailboxRecord]) -> StoreResult<u64> {
            let text = |value: &str| D::text(value).into_owned();
            // One statement: a parent later in the page is checked at its end.
            Self::insert_with_ids(
                tx,
                "INSERT INTO mailboxes (id, account_id, parent_id, name, role, sort_order, \
             is_subscribed)",
                7,
                rows,
                |row, r| {
                    row.push_bind(r.id)
                        .push_bind(r.account_id)
                        .push_bind(r.parent_id)
                        .push_bind(text(&r.name))
                        .push_bind(r.role.clone())
                        .push_bind(r.sort_order)
                        .push_bind(r.is_subscribed);
                },
            )
            .await
        }

        /// Inserts rows that carry their own ids (`{insert} OVERRIDING …`
        /// where the dialect needs it, [`Dialect::OVERRIDING`]), skipping ids
        /// already there; how many were new.
        async fn insert_with_ids<T>(
            tx: &mut Tx<D>,
            insert: &str,
            columns: usize,
            rows: &[T],
            push: impl FnMut(&mut Separated<'_, D::Db, &'static str>, &T),
        ) -> StoreResult<u64> {
            let head = format!("{insert} {}", D::OVERRIDING);
            Self::insert_rows(tx, &head, "ON CONFLICT (id) DO NOTHING", columns, rows, push).await
        }

        /// The rows of `sql` for a page of emails: `$1` and `$2` bound to the
        /// page's first and last ids.
        async fn page_rows<R>(&self, sql: &'static str, (first, last): (i64, i64)) -> StoreResult<Vec<R>>
        where
            R: for<'r> sqlx::FromRow<'r, <D::Db as Database>::Row> + Send + Unpin,
        {
            let query = sqlx::query_as(sql)
                .bind(first)
                .bind(last);
            self.rows(query).await
        }

        /// What follows an import into a table: the dialect's id-source bumps
        /// ([`Statements::after_raw_import`](crate::store::dialect::Statements::after_raw_import)),
        /// and for accounts the identity each account is made with.
        async fn after_import(tx: &mut Tx<D>, rows: &RawRows) -> StoreResult<()> {
            let table = match rows {
                RawRows::Accounts(_) => "accounts",
                RawRows::Mailboxes(_) => "mailboxes",
                RawRows::Emails(_) => "emails",
                _ => "",
            };
            for (name, statement) in D::SQL.after_raw_import {
                if *name == table {
                    sqlx::query(*statement).execute(&mut **tx).await?;
                }
            }
            if table == "accounts" {
                // Identities are not copied (nor aliases, vacation responses,
                // submissions): each copied account gets the identity for its
                // own address an account is made with, so it can send.
                sqlx::query(
                    "INSERT INTO identities (account_id, name, email, text_signature, \
                     html_signature, may_delete) SELECT a.id, '', a.email, '', '', $1 \
                     FROM accounts a WHERE NOT EXISTS \
                     (SELECT 1 FROM identities i WHERE i.account_id = a.id)",
                )
                .bind(false)
                .execute(&mut **tx)
                .await?;
            }
            Ok(())
        }

        /// A page of emails with their memberships, header blocks and
        /// projection rows (read by id range: the page is contiguous in id order).
        async fn export_emails(&self, after_id: i64, limit: i64) -> StoreResult<Vec<EmailRecord>> {
            let mut emails: Vec<EmailRecord> = sqlx::query_as(
                "SELECT id, account_id, blob_id, thread_id, size, received_at, sent_at, keywords, \
                 message_id, base_subject, subject, from_sort, to_sort, from_text, to_text, cc_text, \
                 bcc_text, has_attachment FROM emails WHERE id > $1 ORDER BY id LIMIT $2",
            )
            .bind(after_id)
            .bind(limit)
            .fetch_all(&self.reader)
            .await?;
            let (Some(first), Some(last)) = (emails.first(), emails.last()) else {
                return Ok(emails);
            };
            let page = (first.id, last.id);
            let members: Vec<(i64, i64, i64)> = self
                .page_rows(
                    "SELECT email_id, mailbox_id, received_at FROM email_mailboxes \
                     WHERE email_id BETWEEN $1 AND $2 ORDER BY email_id, mailbox_id",
                    page,
                )
                .await?;
            let members = members.into_iter().map(|(email, mailbox, at)| (email, (mailbox, at)));
            attach(&mut emails, members, |email, member| email.memberships.push(member));
            let headers: EmailRows<Vec<u8>> = self
                .page_rows(
                    "SELECT email_id, header_block FROM email_headers WHERE email_id BETWEEN $1 AND $2",
                    page,
                )
                .await?;
            attach(&mut emails, headers, |email, block| email.header_block = Some(block));
            let views: Vec<(i64, String, bool)> = self
                .page_rows(
                    "SELECT email_id, preview, has_attachment FROM fast_view \
                     WHERE email_id BETWEEN $1 AND $2",
                    page,
                )
                .await?;
            let views = views.into_iter().map(|(email, preview, has_attachment)| {
                let view = FastView {
                    preview,
                    has_attachment,
                };
                (email, view)
            });
            attach(&mut emails, views, |email, view| email.fast_view = Some(view));
            let trees: EmailRows<Vec<u8>> = self
                .page_rows(
                    "SELECT email_id, structure FROM body_structure WHERE email_id BETWEEN $1 AND $2",
                    page,
                )
                .await?;
            attach(&mut emails, trees, |email, tree| email.structure = Some(tree));
            Ok(emails)
        }

        /// Writes emails with their memberships, header blocks and projection
        /// rows, skipping emails already there; returns the emails written.
        pub(super) async fn write_emails(
            tx: &mut Tx<D>,
            rows: &[EmailRecord],
        ) -> StoreResult<u64> {
            let text = |value: &str| D::text(value).into_owned();
            let done = Self::insert_with_ids(
                tx,
                "INSERT INTO emails (id, account_id, blob_id, thread_id, size, received_at, sent_at, \
                 keywords, message_id, base_subject, subject, from_sort, to_sort, from_text, to_text, \
                 cc_text, bcc_text, has_attachment)",
                18,
                rows,
                |row, r| {
                    row.push_bind(r.id)
                        .push_bind(r.account_id)
                        .push_bind(r.blob_id.clone())
                        .push_bind(r.thread_id)
                        .push_bind(r.size)
                        .push_bind(r.received_at)
                        .push_bind(r.sent_at)
                        .push_bind(text(&r.keywords))
                        .push_bind(r.message_id.as_deref().map(text))
                        .push_bind(text(&r.base_subject))
                        .push_bind(text(&r.subject))
                        .push_bind(text(&r.from_sort))
                        .push_bind(text(&r.to_sort))
                        .push_bind(text(&r.from_text))
                        .push_bind(text(&r.to_text))
                        .push_bind(text(&r.cc_text))
                        .push_bind(text(&r.bcc_text))
                        .push_bind(r.has_attachment);
                },
            )
            .await?;
            let members: Vec<(i64, i64, i64)> = rows
                .iter()
                .flat_map(|r| r.memberships.iter().map(|(m, at)| (*m, *at, r.id)))
                .collect();
            Self::insert_memberships(tx, &members).await?;
            let headers: Vec<(i64, &Vec<u8>)> = rows
                .iter()
                .filter_map(|r| r.header_block.as_ref().map(|block| (r.id, block)))
                .collect();
            Self::insert_rows(
                tx,
                "INSERT INTO email_headers (email_id, header_block)",
                "ON CONFLICT DO NOTHING",
                2,
                &headers,
                |row, (id, block)| {
                    row.push_bind(*id).push_bind((*block).clone());
                },
            )
            .await?;
            let views: Vec<(i64, &FastView)> = rows
                .iter()
                .filter_map(|r| r.fast_view.as_ref().map(|view| (r.id, view)))
                .collect();
            Self::write_fast_views(tx, &views, false).await?;
            let trees: Vec<(i64, &Vec<u8>)> = rows
                .iter()
                .filter_map(|r| r.structure.as_ref().map(|tree| (r.id, tree)))
                .collect();
            Self::write_body_structures(tx, &trees, false).await?;
            let texts: Vec<SearchRow<'_>> = rows
                .iter()
                .filter_map(|r| {
                    let text = r.search.as_ref()?;
                    Some((r.id, r.account_id, r.received_at, text))
                })
                .collect();
            Self::write_search_texts(tx, &texts).await?;
            Ok(done)
        }
    }
}
