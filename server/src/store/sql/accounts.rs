//! [`Accounts`] over SQL: accounts, tokens, server keys.

use super::*;

impl_sql! {
    #[async_trait]
    impl Accounts {
        async fn create_account(&self, email: &str, password_hash: &str) -> StoreResult<Account> {
            let mut tx = self.write(None).await?;
            let id: Option<i64> = sqlx::query_scalar(
                "INSERT INTO accounts (email, password_hash) VALUES ($1, $2) \
                 ON CONFLICT DO NOTHING RETURNING id",
            )
            .bind(email)
            .bind(password_hash)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(id) = id else {
                return Err(StoreError::Conflict(format!(
                    "account {email} already exists"
                )));
            };
            let mut set = ChangeSet {
                all_types: true,
                ..ChangeSet::default()
            };
            for (role, name) in ROLE_MAILBOXES {
                let mailbox: i64 = sqlx::query_scalar(
                    "INSERT INTO mailboxes (account_id, name, role, sort_order) \
                     VALUES ($1, $2, $3, $4) RETURNING id",
                )
                .bind(id)
                .bind(*name)
                .bind(*role)
                .bind(default_sort_order(Some(role)))
                .fetch_one(&mut *tx)
                .await?;
                set.record(ChangeType::Mailbox, mailbox, ChangeKind::Created);
            }
            Self::create_own_identity(&mut tx, id, email, &mut set).await?;
            Self::record(&mut tx, id, &set).await?;
            tx.commit().await?;
            Ok(Account {
                id,
                email: email.to_string(),
                password_hash: password_hash.to_string(),
            })
        }

        async fn account_by_email(&self, email: &str) -> StoreResult<Option<Account>> {
            if email.contains('\0') {
                return Ok(None); // no login holds NUL (PostgreSQL text cannot)
            }
            // Every session GET checks its credential here again (issue 20's
            // hot read: no hop to the pool's thread).
            let hot = (self.hot()).and_then(|hot| hot.account_by_email(D::SQL.account_by_email, email));
            if let Some(found) = hot {
                return Ok(found);
            }
            let query = sqlx::query_as(D::SQL.account_by_email)
                .bind(email);
            self.optional(query).await
        }

        async fn list_accounts(&self) -> StoreResult<Vec<Account>> {
            Ok(
                sqlx::query_as("SELECT id, email, password_hash FROM accounts ORDER BY id")
                    .fetch_all(&self.reader)
                    .await?,
            )
        }

        async fn set_password(&self, email: &str, password_hash: &str) -> StoreResult<()> {
            if email.contains('\0') {
                return Err(StoreError::NotFound);
            }
            let done = sqlx::query(D::SQL.set_password)
                .bind(email)
                .bind(password_hash)
                .execute(&self.writer)
                .await?;
            Self::found(&done)
        }

        async fn remove_account(&self, email: &str) -> StoreResult<Vec<String>> {
            if email.contains('\0') {
                return Err(StoreError::NotFound);
            }
            let mut tx = self.write(None).await?;
            let id: Option<i64> = sqlx::query_scalar(D::SQL.account_to_remove)
                .bind(email)
                .fetch_optional(&mut *tx)
                .await?;
            let id = id.ok_or(StoreError::NotFound)?;
            let blobs: Vec<String> = sqlx::query_scalar(
                "SELECT blob_id FROM account_blobs WHERE account_id = $1 \
                 UNION SELECT blob_id FROM emails WHERE account_id = $1",
            )
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
            // Children first: mailboxes reference each other through parent_id.
            for statement in [
                "DELETE FROM emails WHERE account_id = $1",
                "UPDATE mailboxes SET parent_id = NULL WHERE account_id = $1 AND parent_id IS NOT NULL",
                "DELETE FROM mailboxes WHERE account_id = $1",
                "DELETE FROM thread_refs WHERE account_id = $1",
                "DELETE FROM account_blobs WHERE account_id = $1",
                "DELETE FROM api_tokens WHERE account_id = $1",
                "DELETE FROM identities WHERE account_id = $1",
                "DELETE FROM account_aliases WHERE account_id = $1",
                "DELETE FROM vacation_responses WHERE account_id = $1",
                "DELETE FROM email_submissions WHERE account_id = $1",
                "DELETE FROM vacation_replies WHERE account_id = $1",
                "DELETE FROM send_log WHERE account_id = $1",
                "DELETE FROM accounts WHERE id = $1",
            ] {
                sqlx::query(statement).bind(id).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(blobs)
        }

        async fn set_quota(&self, email: &str, octets: Option<i64>) -> StoreResult<()> {
            let Some(account) = self.account_by_email(email).await? else {
                return Err(StoreError::NotFound);
            };
            let done = sqlx::query("UPDATE accounts SET quota_octets = $2 WHERE id = $1")
                .bind(account.id)
                .bind(octets)
                .execute(&self.writer)
                .await?;
            Self::found(&done)
        }

        async fn account_by_id(&self, account: i64) -> StoreResult<Option<Account>> {
            Ok(
                sqlx::query_as("SELECT id, email, password_hash FROM accounts WHERE id = $1")
                    .bind(account)
                    .fetch_optional(&self.reader)
                    .await?,
            )
        }

        async fn create_token(&self, account: i64, token: NewToken<'_>) -> StoreResult<ApiToken> {
            if token.name.contains('\0') {
                return Err(StoreError::Conflict("a token name cannot hold NUL".into()));
            }
            let mut tx = self.write(Some(account)).await?;
            let created: ApiToken = sqlx::query_as(
                "INSERT INTO api_tokens (account_id, secret_sha256, name, created_at, expires_at) \
                 SELECT id, $2, $3, $4, $5 FROM accounts WHERE id = $1 \
                 RETURNING id, account_id, name, created_at, expires_at",
            )
            .bind(account)
            .bind(token.secret_sha256)
            .bind(token.name)
            .bind(token.created_at)
            .bind(token.expires_at)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
            tx.commit().await?;
            Ok(created)
        }

        async fn tokens(&self, account: i64) -> StoreResult<Vec<ApiToken>> {
            let query = sqlx::query_as(
                "SELECT id, account_id, name, created_at, expires_at FROM api_tokens \
                 WHERE account_id = $1 ORDER BY id",
            )
            .bind(account);
            self.rows(query).await
        }

        async fn revoke_token(&self, account: i64, token: i64) -> StoreResult<()> {
            let done = sqlx::query("DELETE FROM api_tokens WHERE account_id = $1 AND id = $2")
                .bind(account)
                .bind(token)
                .execute(&self.writer)
                .await?;
            match D::rows_affected(&done) {
                0 => Err(StoreError::NotFound),
                _ => Ok(()),
            }
        }

        async fn account_by_token(
            &self,
            secret_sha256: &str,
            now: i64,
        ) -> StoreResult<Option<(Account, ApiToken)>> {
            let row: Option<(i64, String, String, i64, String, i64, Option<i64>)> = sqlx::query_as(
                "SELECT a.id, a.email, a.password_hash, t.id, t.name, t.created_at, t.expires_at \
                 FROM api_tokens t JOIN accounts a ON a.id = t.account_id \
                 WHERE t.secret_sha256 = $1 AND (t.expires_at IS NULL OR t.expires_at > $2)",
            )
            .bind(secret_sha256)
            .bind(now)
            .fetch_optional(&self.reader)
            .await?;
            Ok(row.map(
                |(id, email, password_hash, token, name, created_at, expires_at)| {
                    (
                        Account {
                            id,
                            email,
                            password_hash,
                        },
                        ApiToken {
                            id: token,
                            account_id: id,
                            name,
                            created_at,
                            expires_at,
                        },
                    )
                },
            ))
        }

        async fn server_key(&self, name: &str) -> StoreResult<Vec<u8>> {
            let read = || {
                sqlx::query_scalar::<_, Vec<u8>>("SELECT key FROM server_keys WHERE name = $1")
                    .bind(name)
            };
            if let Some(key) = read().fetch_optional(&self.reader).await? {
                return Ok(key);
            }
            // Two nodes may race to make it: the first insert wins, both read it.
            let fresh: [u8; 32] = rand::random();
            sqlx::query(
                "INSERT INTO server_keys (name, key) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
            )
            .bind(name)
            .bind(fresh.to_vec())
            .execute(&self.writer)
            .await?;
            Ok(read().fetch_one(&self.writer).await?)
        }
    }
}
