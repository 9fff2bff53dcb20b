//! What the projection proxy keeps about its upstream IMAP server (issue 18,
//! ADR 0008; migration 0309): the upstream a data dir serves, which
//! upstream mailbox each local mailbox mirrors and at which UIDVALIDITY,
//! and which email each UID of a mirrored mailbox is. The emails
//! themselves are ordinary rows written by the ingest path; these tables
//! only map them to the upstream's names and UIDs, so a sync is a
//! comparison of UID sets.

use async_trait::async_trait;

use super::ImapProxyStore;
use crate::store::sql::impl_sql;
use crate::store::{StoreResult, UpstreamCopy, UpstreamMailbox};

impl_sql! {
    #[async_trait]
    impl ImapProxyStore {
        async fn upstream_source(&self) -> StoreResult<Option<String>> {
            Ok(
                sqlx::query_scalar("SELECT url FROM upstream_source WHERE id = 1")
                    .fetch_optional(&self.reader)
                    .await?,
            )
        }

        async fn set_upstream_source(&self, url: &str) -> StoreResult<()> {
            let query = sqlx::query(
                "INSERT INTO upstream_source (id, url) VALUES (1, $1) \
                 ON CONFLICT (id) DO UPDATE SET url = excluded.url",
            )
            .bind(url);
            self.write_one(query).await
        }

        async fn upstream_mailboxes(
            &self,
            account: i64,
        ) -> StoreResult<Vec<UpstreamMailbox>> {
            let rows: Vec<(i64, String, i64, Option<i64>)> = sqlx::query_as(
                "SELECT mailbox_id, name, uid_validity, highest_modseq FROM upstream_mailboxes \
                 WHERE account_id = $1 ORDER BY mailbox_id",
            )
            .bind(account)
            .fetch_all(&self.reader)
            .await?;
            Ok(rows
                .into_iter()
                .map(
                    |(mailbox_id, name, uid_validity, highest_modseq)| UpstreamMailbox {
                        mailbox_id,
                        name,
                        uid_validity,
                        highest_modseq,
                    },
                )
                .collect())
        }

        async fn put_upstream_mailbox(
            &self,
            account: i64,
            mailbox: &UpstreamMailbox,
        ) -> StoreResult<()> {
            let query = sqlx::query(
                "INSERT INTO upstream_mailboxes \
                   (mailbox_id, account_id, name, uid_validity, highest_modseq) \
                 SELECT $1, $2, $3, $4, $5 FROM mailboxes WHERE id = $1 AND account_id = $2 \
                 ON CONFLICT (mailbox_id) DO UPDATE SET name = excluded.name, \
                   uid_validity = excluded.uid_validity, highest_modseq = excluded.highest_modseq",
            )
            .bind(mailbox.mailbox_id)
            .bind(account)
            .bind(mailbox.name.as_str())
            .bind(mailbox.uid_validity)
            .bind(mailbox.highest_modseq);
            self.write_one(query).await
        }

        async fn upstream_uids(
            &self,
            mailbox: i64,
            among: Option<&[i64]>,
        ) -> StoreResult<Vec<UpstreamCopy>> {
            let rows: Vec<(i64, i64, String)> = match among {
                None => {
                    sqlx::query_as(
                        "SELECT uid, email_id, keywords FROM upstream_messages \
                         WHERE mailbox_id = $1 ORDER BY uid",
                    )
                    .bind(mailbox)
                    .fetch_all(&self.reader)
                    .await?
                }
                Some([]) => Vec::new(),
                Some(uids) => {
                    sqlx::query_as(D::SQL.upstream_uids_among)
                        .bind(mailbox)
                        .bind(D::ids(uids))
                        .fetch_all(&self.reader)
                        .await?
                }
            };
            Ok(rows
                .into_iter()
                .map(|(uid, email_id, keywords)| UpstreamCopy {
                    uid,
                    email_id,
                    keywords: keywords.split_whitespace().map(str::to_string).collect(),
                })
                .collect())
        }

        async fn upstream_uid_count(&self, mailbox: i64) -> StoreResult<i64> {
            Ok(
                sqlx::query_scalar("SELECT COUNT(*) FROM upstream_messages WHERE mailbox_id = $1")
                    .bind(mailbox)
                    .fetch_one(&self.reader)
                    .await?,
            )
        }

        async fn record_upstream_uids(
            &self,
            mailbox: i64,
            copies: &[UpstreamCopy],
        ) -> StoreResult<()> {
            self.write_rows(
                "INSERT INTO upstream_messages (mailbox_id, uid, email_id, keywords)",
                "ON CONFLICT (mailbox_id, uid) DO UPDATE SET email_id = excluded.email_id, \
                 keywords = excluded.keywords",
                4,
                copies,
                |row, copy| {
                    row.push_bind(mailbox)
                        .push_bind(copy.uid)
                        .push_bind(copy.email_id)
                        .push_bind(copy.keywords.join(" "));
                },
            )
            .await
        }

        async fn upstream_locations(
            &self,
            account: i64,
            emails: &[i64],
        ) -> StoreResult<Vec<(i64, i64, i64, String)>> {
            let query = sqlx::query_as(D::SQL.upstream_locations)
                .bind(account)
                .bind(D::ids(emails));
            self.rows(query).await
        }

        async fn upstream_copies_from(
            &self,
            mailbox: i64,
            first_uid: i64,
        ) -> StoreResult<Vec<(i64, i64, Option<String>, i64)>> {
            let query = sqlx::query_as(
                "SELECT u.uid, u.email_id, e.message_id, e.size FROM upstream_messages u \
                 JOIN emails e ON e.id = u.email_id \
                 WHERE u.mailbox_id = $1 AND u.uid >= $2 ORDER BY u.uid",
            )
            .bind(mailbox)
            .bind(first_uid);
            self.rows(query).await
        }

        async fn upstream_append(
            &self,
            account: i64,
            sent_blob: &str,
        ) -> StoreResult<Option<i64>> {
            let query = sqlx::query_scalar(
                "SELECT email_id FROM upstream_appends \
                 WHERE account_id = $1 AND sent_blob_id = $2",
            )
            .bind(account)
            .bind(sent_blob);
            self.optional_scalar(query).await
        }

        async fn record_upstream_append(
            &self,
            account: i64,
            sent_blob: &str,
            email: i64,
        ) -> StoreResult<()> {
            let query = sqlx::query(
                "INSERT INTO upstream_appends (account_id, sent_blob_id, email_id) \
                 SELECT $1, $2, $3 FROM emails WHERE id = $3 AND account_id = $1 \
                 ON CONFLICT (account_id, sent_blob_id) DO UPDATE SET email_id = excluded.email_id",
            )
            .bind(account)
            .bind(sent_blob)
            .bind(email);
            self.write_one(query).await
        }

        async fn emails_of_blobs(
            &self,
            account: i64,
            blob_ids: &[&str],
        ) -> StoreResult<Vec<(String, i64)>> {
            let query = sqlx::query_as(D::SQL.stored_blobs)
                .bind(account)
                .bind(D::texts(blob_ids));
            self.rows(query).await
        }

        async fn upstream_cache_total(&self) -> StoreResult<i64> {
            Ok(sqlx::query_scalar(
                "SELECT CAST(coalesce(sum(size), 0) AS BIGINT) FROM \
                   (SELECT e.blob_id, max(e.size) AS size FROM emails e \
                    WHERE NOT EXISTS (SELECT 1 FROM upstream_evicted v WHERE v.blob_id = e.blob_id) \
                    GROUP BY e.blob_id) cached",
            )
            .fetch_one(&self.reader)
            .await?)
        }

        async fn upstream_cache_oldest(
            &self,
            limit: i64,
        ) -> StoreResult<Vec<(String, i64)>> {
            let query = sqlx::query_as(
                "SELECT e.blob_id, max(e.size) FROM emails e \
                 WHERE NOT EXISTS (SELECT 1 FROM upstream_evicted v WHERE v.blob_id = e.blob_id) \
                 GROUP BY e.blob_id ORDER BY max(e.received_at), e.blob_id LIMIT $1",
            )
            .bind(limit);
            self.rows(query).await
        }

        async fn mark_evicted(&self, blobs: &[(String, i64)]) -> StoreResult<()> {
            self.write_rows(
                "INSERT INTO upstream_evicted (blob_id, size)",
                "ON CONFLICT (blob_id) DO NOTHING",
                2,
                blobs,
                |row, (blob, size)| {
                    row.push_bind(blob.clone()).push_bind(*size);
                },
            )
            .await
        }

        async fn unmark_evicted(&self, blobs: &[&str]) -> StoreResult<()> {
            if blobs.is_empty() {
                return Ok(());
            }
            let query = sqlx::query(D::SQL.unmark_evicted)
                .bind(D::texts(blobs));
            self.write_one(query).await
        }

        async fn evicted_among(&self, blobs: &[&str]) -> StoreResult<Vec<String>> {
            let query = sqlx::query_scalar(D::SQL.evicted_among)
                .bind(D::texts(blobs));
            self.scalars(query).await
        }

        async fn upstream_blob_location(
            &self,
            blob_id: &str,
        ) -> StoreResult<Option<(i64, String, i64)>> {
            let query = sqlx::query_as(
                "SELECT e.account_id, b.name, u.uid FROM emails e \
                 JOIN upstream_messages u ON u.email_id = e.id \
                 JOIN upstream_mailboxes b ON b.mailbox_id = u.mailbox_id \
                 WHERE e.blob_id = $1 ORDER BY u.mailbox_id, u.uid LIMIT 1",
            )
            .bind(blob_id);
            self.optional(query).await
        }

        async fn record_upstream_sync(&self, account: i64, at: i64) -> StoreResult<()> {
            let query = sqlx::query(
                "INSERT INTO upstream_syncs (account_id, synced_at) \
                 SELECT id, $2 FROM accounts WHERE id = $1 \
                 ON CONFLICT (account_id) DO UPDATE SET synced_at = excluded.synced_at",
            )
            .bind(account)
            .bind(at);
            self.write_one(query).await
        }

        async fn record_upstream_watch(&self, account: i64, watch: &str) -> StoreResult<()> {
            let query = sqlx::query("UPDATE upstream_syncs SET watch = $2 WHERE account_id = $1")
                .bind(account)
                .bind(watch);
            self.write_one(query).await
        }

        async fn upstream_syncs(&self) -> StoreResult<Vec<(i64, i64, String)>> {
            Ok(sqlx::query_as(
                "SELECT account_id, synced_at, watch FROM upstream_syncs ORDER BY account_id",
            )
            .fetch_all(&self.reader)
            .await?)
        }

        async fn forget_upstream_uids(
            &self,
            mailbox: i64,
            uids: Option<&[i64]>,
        ) -> StoreResult<()> {
            let mut tx = self.write(None).await?;
            match uids {
                None => {
                    sqlx::query("DELETE FROM upstream_messages WHERE mailbox_id = $1")
                        .bind(mailbox)
                        .execute(&mut *tx)
                        .await?;
                }
                Some([]) => return Ok(()),
                Some(uids) => {
                    sqlx::query(D::SQL.forget_upstream_uids)
                        .bind(mailbox)
                        .bind(D::ids(uids))
                        .execute(&mut *tx)
                        .await?;
                }
            }
            tx.commit().await?;
            Ok(())
        }
    }
}
