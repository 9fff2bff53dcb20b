//! What an account sends as (issue 17, RFC 8621 §6, §8; migration 0306):
//! its Identity objects, the aliases an operator granted it, and its
//! VacationResponse. Every write is logged like the mail types' writes
//! (`Identity` and `VacationResponse` state strings).

use super::*;

/// The change-log object id of an account's one VacationResponse.
const VACATION_OBJECT: i64 = 0;

impl_sql! {
    #[async_trait]
    impl Identities {
        async fn identities(&self, account: i64) -> StoreResult<Vec<IdentityRow>> {
            let query = sqlx::query_as(
                "SELECT id, name, email, reply_to, bcc, text_signature, html_signature, may_delete \
                 FROM identities WHERE account_id = $1 ORDER BY id",
            )
            .bind(account);
            self.rows(query).await
        }

        async fn create_identity(
            &self,
            account: i64,
            identity: &IdentityRow,
        ) -> StoreResult<i64> {
            let mut tx = self.write(Some(account)).await?;
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO identities (account_id, name, email, reply_to, bcc, text_signature, \
                 html_signature, may_delete) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            )
            .bind(account)
            .bind(D::text(&identity.name).into_owned())
            .bind(D::text(&identity.email).into_owned())
            .bind(
                identity
                    .reply_to
                    .as_deref()
                    .map(|v| D::text(v).into_owned()),
            )
            .bind(identity.bcc.as_deref().map(|v| D::text(v).into_owned()))
            .bind(D::text(&identity.text_signature).into_owned())
            .bind(D::text(&identity.html_signature).into_owned())
            .bind(true)
            .fetch_one(&mut *tx)
            .await?;
            Self::commit_one(tx, account, ChangeType::Identity, id, ChangeKind::Created).await?;
            Ok(id)
        }

        async fn update_identity(
            &self,
            account: i64,
            id: i64,
            patch: &IdentityPatch,
        ) -> StoreResult<()> {
            let mut tx = self.write(Some(account)).await?;
            let text = |value: &Option<String>| value.as_deref().map(|v| D::text(v).into_owned());
            let done = sqlx::query(
                "UPDATE identities SET \
                 name = coalesce($3, name), \
                 reply_to = CASE WHEN $4 THEN $5 ELSE reply_to END, \
                 bcc = CASE WHEN $6 THEN $7 ELSE bcc END, \
                 text_signature = coalesce($8, text_signature), \
                 html_signature = coalesce($9, html_signature) \
                 WHERE id = $1 AND account_id = $2",
            )
            .bind(id)
            .bind(account)
            .bind(text(&patch.name))
            .bind(patch.reply_to.is_some())
            .bind(patch.reply_to.as_ref().and_then(text))
            .bind(patch.bcc.is_some())
            .bind(patch.bcc.as_ref().and_then(text))
            .bind(text(&patch.text_signature))
            .bind(text(&patch.html_signature))
            .execute(&mut *tx)
            .await?;
            Self::found(&done)?;
            Self::commit_one(tx, account, ChangeType::Identity, id, ChangeKind::Updated).await
        }

        async fn destroy_identity(&self, account: i64, id: i64) -> StoreResult<()> {
            const SQL: &str = "DELETE FROM identities WHERE id = $1 AND account_id = $2";
            self.destroy_one(account, ChangeType::Identity, id, SQL).await
        }

        async fn aliases(&self, account: i64) -> StoreResult<Vec<String>> {
            let query = sqlx::query_scalar(
                "SELECT address FROM account_aliases WHERE account_id = $1 ORDER BY address",
            )
            .bind(account);
            self.scalars(query).await
        }

        async fn add_alias(&self, account: i64, address: &str) -> StoreResult<()> {
            let address = address.to_lowercase();
            let mut tx = self.write(Some(account)).await?;
            let login: Option<i64> =
                sqlx::query_scalar("SELECT id FROM accounts WHERE lower(email) = $1 AND id <> $2")
                    .bind(&address)
                    .bind(account)
                    .fetch_optional(&mut *tx)
                    .await?;
            if login.is_some() {
                return Err(StoreError::Conflict(format!(
                    "{address} is another account's login"
                )));
            }
            let holder: Option<i64> =
                sqlx::query_scalar("SELECT account_id FROM account_aliases WHERE address = $1")
                    .bind(&address)
                    .fetch_optional(&mut *tx)
                    .await?;
            match holder {
                Some(holder) if holder == account => return Ok(()),
                Some(_) => {
                    return Err(StoreError::Conflict(format!(
                        "{address} is another account's alias"
                    )));
                }
                None => {}
            }
            sqlx::query("INSERT INTO account_aliases (address, account_id) VALUES ($1, $2)")
                .bind(&address)
                .bind(account)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        }

        async fn remove_alias(&self, account: i64, address: &str) -> StoreResult<bool> {
            let done =
                sqlx::query("DELETE FROM account_aliases WHERE address = $1 AND account_id = $2")
                    .bind(address.to_lowercase())
                    .bind(account)
                    .execute(&self.writer)
                    .await?;
            Ok(D::rows_affected(&done) > 0)
        }

        async fn vacation_reply_due(
            &self,
            account: i64,
            sender: &str,
            now: i64,
            period: i64,
        ) -> StoreResult<bool> {
            // One statement: of two deliveries at once, one gets the row.
            let due: Option<i64> = sqlx::query_scalar(
                "INSERT INTO vacation_replies (account_id, sender, replied_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (account_id, sender) DO UPDATE SET replied_at = excluded.replied_at \
                 WHERE vacation_replies.replied_at <= $3 - $4 RETURNING account_id",
            )
            .bind(account)
            .bind(D::text(&sender.to_lowercase()).into_owned())
            .bind(now)
            .bind(period)
            .fetch_optional(&self.writer)
            .await?;
            Ok(due.is_some())
        }

        async fn vacation_response(
            &self,
            account: i64,
        ) -> StoreResult<VacationResponse> {
            let query = sqlx::query_as(
                "SELECT is_enabled, from_date, to_date, subject, text_body, html_body \
                 FROM vacation_responses WHERE account_id = $1",
            )
            .bind(account);
            Ok(self.optional(query).await?.unwrap_or_default())
        }

        async fn set_vacation_response(
            &self,
            account: i64,
            response: &VacationResponse,
        ) -> StoreResult<()> {
            let text = |value: &Option<String>| value.as_deref().map(|v| D::text(v).into_owned());
            let mut tx = self.write(Some(account)).await?;
            sqlx::query(
                "INSERT INTO vacation_responses (account_id, is_enabled, from_date, to_date, \
                 subject, text_body, html_body) VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (account_id) DO UPDATE SET is_enabled = excluded.is_enabled, \
                 from_date = excluded.from_date, to_date = excluded.to_date, \
                 subject = excluded.subject, text_body = excluded.text_body, \
                 html_body = excluded.html_body",
            )
            .bind(account)
            .bind(response.is_enabled)
            .bind(response.from_date)
            .bind(response.to_date)
            .bind(text(&response.subject))
            .bind(text(&response.text_body))
            .bind(text(&response.html_body))
            .execute(&mut *tx)
            .await?;
            Self::commit_one(tx, account, ChangeType::VacationResponse, VACATION_OBJECT, ChangeKind::Updated).await
        }
    }
}

impl_sql! {
    impl {
        /// Stores the identity an account is made with: its own address, not
        /// deletable. Part of the account's creation.
        pub(super) async fn create_own_identity(
            tx: &mut Tx<D>,
            account: i64,
            email: &str,
            set: &mut ChangeSet,
        ) -> StoreResult<()> {
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO identities (account_id, name, email, text_signature, html_signature, \
                 may_delete) VALUES ($1, '', $2, '', '', $3) RETURNING id",
            )
            .bind(account)
            .bind(email)
            .bind(false)
            .fetch_one(&mut **tx)
            .await?;
            set.record(ChangeType::Identity, id, ChangeKind::Created);
            Ok(())
        }
    }
}
