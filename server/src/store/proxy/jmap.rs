//! What a data dir in front of a JMAP server keeps about its upstream
//! (issue 19, ADR 0009; migration 0310): the upstream accountId of each
//! local account and the upstream Email state its mirror is at, and the
//! upstream ids of its mailboxes and emails (an email's blobId and threadId
//! too). The emails themselves are ordinary rows written by the ingest
//! path; these tables only name them as the upstream does.

use async_trait::async_trait;

use super::JmapProxyStore;
use crate::store::dialect::HotReads;
use crate::store::sql::impl_sql;
use crate::store::{MirroredEmail, StoreResult};

impl_sql! {
    #[async_trait]
    impl JmapProxyStore {
        async fn mirror_account(
            &self,
            upstream_id: &str,
        ) -> StoreResult<Option<(i64, Option<String>)>> {
            let query = sqlx::query_as(
                "SELECT account_id, email_state FROM jmap_mirror_accounts WHERE upstream_id = $1",
            )
            .bind(upstream_id);
            self.optional(query).await
        }

        async fn put_mirror_account(
            &self,
            account: i64,
            upstream_id: &str,
        ) -> StoreResult<()> {
            let query = sqlx::query(
                "INSERT INTO jmap_mirror_accounts (account_id, upstream_id) VALUES ($1, $2) \
                 ON CONFLICT (account_id) DO NOTHING",
            )
            .bind(account)
            .bind(upstream_id);
            self.write_one(query).await
        }

        async fn set_mirror_state(&self, account: i64, state: &str) -> StoreResult<()> {
            let query = sqlx::query("UPDATE jmap_mirror_accounts SET email_state = $2 WHERE account_id = $1")
                .bind(account)
                .bind(state);
            self.write_one(query).await
        }

        async fn mirror_mailboxes(
            &self,
            account: i64,
        ) -> StoreResult<Vec<(i64, String)>> {
            let query = sqlx::query_as(
                "SELECT mailbox_id, upstream_id FROM jmap_mirror_mailboxes WHERE account_id = $1 \
                 ORDER BY mailbox_id",
            )
            .bind(account);
            self.rows(query).await
        }

        async fn put_mirror_mailbox(
            &self,
            account: i64,
            mailbox: i64,
            upstream_id: &str,
        ) -> StoreResult<()> {
            let query = sqlx::query(
                "INSERT INTO jmap_mirror_mailboxes (mailbox_id, account_id, upstream_id) \
                 SELECT $1, $2, $3 FROM mailboxes WHERE id = $1 AND account_id = $2 \
                 ON CONFLICT (mailbox_id) DO UPDATE SET upstream_id = excluded.upstream_id",
            )
            .bind(mailbox)
            .bind(account)
            .bind(upstream_id);
            self.write_one(query).await
        }

        async fn mirror_emails(
            &self,
            account: i64,
            local: Option<&[i64]>,
            upstream: Option<&[&str]>,
        ) -> StoreResult<Vec<MirroredEmail>> {
            const COLUMNS: &str = "SELECT email_id, upstream_id, blob_id, thread_id, parts \
                 FROM jmap_mirror_emails WHERE account_id = $1";
            // Every call answered from the mirror maps its ids both ways.
            let hot = self.hot().and_then(|hot| hot.mirror_emails(&D::SQL, account, local, upstream));
            if let Some(rows) = hot {
                return Ok(rows);
            }
            let query = match (local, upstream) {
                (Some(ids), _) => sqlx::query_as(D::SQL.mirror_emails_by_local)
                    .bind(account)
                    .bind(D::ids(ids)),
                (None, Some(ids)) => sqlx::query_as(D::SQL.mirror_emails_by_upstream)
                    .bind(account)
                    .bind(D::texts(ids)),
                (None, None) => sqlx::query_as(COLUMNS).bind(account),
            };
            let rows: Vec<(i64, String, String, String, Option<String>)> =
                query.fetch_all(&self.reader).await?;
            Ok(rows
                .into_iter()
                .map(
                    |(email_id, upstream_id, blob_id, thread_id, parts)| MirroredEmail {
                        email_id,
                        upstream_id,
                        blob_id,
                        thread_id,
                        parts,
                    },
                )
                .collect())
        }

        async fn put_mirror_emails(
            &self,
            account: i64,
            emails: &[MirroredEmail],
        ) -> StoreResult<()> {
            let mut tx = self.write(None).await?;
            for email in emails {
                // An upstream id already mapped (two upstream emails of the same
                // octets are one local email) keeps its first mapping.
                sqlx::query(
                    "INSERT INTO jmap_mirror_emails \
                       (email_id, account_id, upstream_id, blob_id, thread_id, parts) \
                     SELECT $1, $2, $3, $4, $5, $6 FROM emails WHERE id = $1 AND account_id = $2 \
                     ON CONFLICT DO NOTHING",
                )
                .bind(email.email_id)
                .bind(account)
                .bind(email.upstream_id.as_str())
                .bind(email.blob_id.as_str())
                .bind(email.thread_id.as_str())
                .bind(email.parts.clone())
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(())
        }

        async fn mirror_threads(
            &self,
            account: i64,
            threads: &[&str],
        ) -> StoreResult<Vec<(String, Vec<String>)>> {
            let query = sqlx::query_as(D::SQL.mirror_threads)
                .bind(account)
                .bind(D::texts(threads));
            self.thread_groups(query).await
        }

        async fn mirror_census(&self, account: i64) -> StoreResult<(i64, i64)> {
            Ok(sqlx::query_as(
                "SELECT (SELECT count(*) FROM jmap_mirror_emails WHERE account_id = $1), \
                        (SELECT count(*) FROM emails WHERE account_id = $1)",
            )
            .bind(account)
            .fetch_one(&self.reader)
            .await?)
        }
    }
}
