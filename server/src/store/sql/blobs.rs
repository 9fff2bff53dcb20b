//! [`Blobs`] over SQL: blob grants, quota, references.

use super::*;

impl_sql! {
    #[async_trait]
    impl Blobs {
        async fn quota(&self, account: i64) -> StoreResult<Quota> {
            Self::read_quota(&self.reader, account).await
        }

        async fn add_blob(&self, account: i64, blob_id: &str, size: i64) -> StoreResult<()> {
            let mut tx = self.write(Some(account)).await?;
            let done = sqlx::query(
                "INSERT INTO account_blobs (account_id, blob_id, size, created_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            )
            .bind(account)
            .bind(blob_id)
            .bind(size)
            .bind(now())
            .execute(&mut *tx)
            .await?;
            if D::rows_affected(&done) > 0 {
                Self::check_quota(&mut tx, account).await?;
            }
            tx.commit().await?;
            Ok(())
        }

        async fn blob_size(&self, account: i64, blob_id: &str) -> StoreResult<Option<i64>> {
            let query = sqlx::query_scalar(
                "SELECT size FROM account_blobs WHERE account_id = $1 AND blob_id = $2",
            )
            .bind(account)
            .bind(blob_id);
            self.optional_scalar(query).await
        }

        async fn held_blobs(&self, account: i64, blob_ids: &[String]) -> StoreResult<HashSet<String>> {
            if blob_ids.is_empty() {
                return Ok(HashSet::new());
            }
            let ids: Vec<&str> = blob_ids.iter().map(String::as_str).collect();
            Ok(sqlx::query_scalar(D::SQL.held_blobs)
                .bind(account)
                .bind(D::texts(&ids))
                .fetch_all(&self.reader)
                .await?
                .into_iter()
                .collect())
        }

        async fn referenced_blobs(&self, blob_ids: &[String]) -> StoreResult<HashSet<String>> {
            if blob_ids.is_empty() {
                return Ok(HashSet::new());
            }
            let ids: Vec<&str> = blob_ids.iter().map(String::as_str).collect();
            Ok(sqlx::query_scalar(D::SQL.referenced_blobs)
                .bind(D::texts(&ids))
                .fetch_all(&self.reader)
                .await?
                .into_iter()
                .collect())
        }

        async fn expire_uploads(&self, created_before: i64) -> StoreResult<u64> {
            let done = sqlx::query(
                "DELETE FROM account_blobs WHERE created_at < $1 AND NOT EXISTS \
                 (SELECT 1 FROM emails e WHERE e.account_id = account_blobs.account_id \
                  AND e.blob_id = account_blobs.blob_id)",
            )
            .bind(created_before)
            .execute(&self.writer)
            .await?;
            Ok(D::rows_affected(&done))
        }

        async fn referenced_blob_page(&self, after: &str, limit: i64) -> StoreResult<Vec<String>> {
            let query = sqlx::query_scalar(
                "SELECT blob_id FROM \
                   (SELECT blob_id FROM account_blobs WHERE blob_id > $1 ORDER BY blob_id LIMIT $2) \
                   AS g \
                 UNION SELECT blob_id FROM \
                   (SELECT blob_id FROM emails WHERE blob_id > $1 ORDER BY blob_id LIMIT $2) AS e \
                 ORDER BY blob_id LIMIT $2",
            )
            .bind(after)
            .bind(limit);
            self.scalars(query).await
        }
    }
}

impl_sql! {
    impl {
        /// The account's quota and usage, read with `executor` (inside a write
        /// transaction: after its own writes). `NotFound` for no account.
        pub(super) async fn read_quota<'e, E>(executor: E, account: i64) -> StoreResult<Quota>
        where
            E: Executor<'e, Database = D::Db>,
        {
            let row: Option<(Option<i64>, i64)> = sqlx::query_as(
                "SELECT quota_octets, \
                   (SELECT CAST(coalesce(sum(size), 0) AS BIGINT) FROM account_blobs \
                    WHERE account_id = $1) \
                 FROM accounts WHERE id = $1",
            )
            .bind(account)
            .fetch_optional(executor)
            .await?;
            let (limit, used) = row.ok_or(StoreError::NotFound)?;
            Ok(Quota { limit, used })
        }

        /// `OverQuota` when the account has a quota and holds more than it
        /// after this transaction's writes.
        pub(super) async fn check_quota(tx: &mut Tx<D>, account: i64) -> StoreResult<()> {
            let limit: Option<i64> =
                sqlx::query_scalar("SELECT quota_octets FROM accounts WHERE id = $1")
                    .bind(account)
                    .fetch_optional(&mut **tx)
                    .await?
                    .flatten();
            if limit.is_none() {
                return Ok(());
            }
            if Self::read_quota(&mut **tx, account).await?.would_exceed(0) {
                return Err(StoreError::OverQuota);
            }
            Ok(())
        }
    }
}
