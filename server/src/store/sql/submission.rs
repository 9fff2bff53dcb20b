//! EmailSubmission records and the delivery queue (issue 17, RFC 8621 §7;
//! migration 0307). A submission and its deliveries are written in one
//! transaction; a delivery row stays until its attempt is recorded, so a
//! crash between the two loses nothing, and a lease keeps two nodes from
//! working on one delivery at once. The lease is fenced (migration 0313): a
//! take gives the row a new `lease_token`, and a renewal or record under an
//! older one changes nothing, so a node that stalled past its lease can
//! neither record its attempt over the new holder's nor hold the delivery
//! again. `send_log` counts what each account sent in the last hour for the
//! hourly send limits ([`SendLimits`]).

use super::*;
use crate::store::SendLimitHit;

impl_sql! {
    #[async_trait]
    impl Submissions {
        async fn submissions(&self, account: i64) -> StoreResult<Vec<SubmissionRow>> {
            let query = sqlx::query_as(
                "SELECT id, identity_id, email_id, thread_id, envelope, send_at, undo_status, \
                 delivery_status FROM email_submissions WHERE account_id = $1 ORDER BY id",
            )
            .bind(account);
            self.rows(query).await
        }

        async fn submission(
            &self,
            account: i64,
            id: i64,
        ) -> StoreResult<Option<SubmissionRow>> {
            let query = sqlx::query_as(
                "SELECT id, identity_id, email_id, thread_id, envelope, send_at, undo_status, \
                 delivery_status FROM email_submissions WHERE account_id = $1 AND id = $2",
            )
            .bind(account)
            .bind(id);
            self.optional(query).await
        }

        async fn create_submission(
            &self,
            account: i64,
            submission: &SubmissionRow,
            deliveries: &[Delivery],
            limits: SendLimits,
        ) -> StoreResult<(i64, Vec<Delivery>)> {
            let mut tx = self.write(Some(account)).await?;
            // Under the account's write lock: two submissions at once are
            // counted one after the other, on any node.
            let recipients: i64 = deliveries
                .iter()
                .map(|delivery| {
                    serde_json::from_str::<Vec<serde_json::Value>>(&delivery.recipients)
                        .map_or(0, |list| list.len() as i64)
                })
                .sum();
            sqlx::query("DELETE FROM send_log WHERE account_id = $1 AND sent_at <= $2")
                .bind(account)
                .bind(limits.now - 3_600)
                .execute(&mut *tx)
                .await?;
            let (messages_sent, recipients_sent) =
                Self::count_sent(&mut *tx, account, limits.now).await?;
            if let Some(limit) = limits.messages_per_hour
                && messages_sent >= limit
            {
                return Err(StoreError::SendLimit(SendLimitHit::Messages { limit }));
            }
            if let Some(limit) = limits.recipients_per_hour
                && recipients_sent + recipients > limit
            {
                let left = (limit - recipients_sent).max(0);
                return Err(StoreError::SendLimit(SendLimitHit::Recipients {
                    limit,
                    left,
                }));
            }
            sqlx::query("INSERT INTO send_log (account_id, sent_at, recipients) VALUES ($1, $2, $3)")
                .bind(account)
                .bind(limits.now)
                .bind(recipients)
                .execute(&mut *tx)
                .await?;
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO email_submissions (account_id, identity_id, email_id, thread_id, \
                 envelope, send_at, undo_status, delivery_status) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            )
            .bind(account)
            .bind(submission.identity_id)
            .bind(submission.email_id)
            .bind(submission.thread_id)
            .bind(D::text(&submission.envelope).into_owned())
            .bind(submission.send_at)
            .bind(&submission.undo_status)
            .bind(D::text(&submission.delivery_status).into_owned())
            .fetch_one(&mut *tx)
            .await?;
            // Held for ten minutes (`mail::delivery::LEASE`) by the node that
            // made them: it delivers them at once, renewing the hold before
            // each recipient; another node takes one only if it stopped.
            let mut stored = Vec::with_capacity(deliveries.len());
            for delivery in deliveries {
                let delivery_id: i64 = sqlx::query_scalar(
                    "INSERT INTO deliveries (submission_id, account_id, blob_id, mail_from, \
                     recipients, send_at, attempts, next_attempt_at, lease_until) \
                     VALUES ($1, $2, $3, $4, $5, $6, 0, $6, $6 + 600) RETURNING id",
                )
                .bind(id)
                .bind(account)
                .bind(&delivery.blob_id)
                .bind(D::text(&delivery.mail_from).into_owned())
                .bind(D::text(&delivery.recipients).into_owned())
                .bind(submission.send_at)
                .fetch_one(&mut *tx)
                .await?;
                stored.push(Delivery {
                    id: delivery_id,
                    submission_id: id,
                    account_id: account,
                    send_at: submission.send_at,
                    attempts: 0,
                    lease: 0,
                    ..delivery.clone()
                });
            }
            Self::commit_one(tx, account, ChangeType::EmailSubmission, id, ChangeKind::Created).await?;
            Ok((id, stored))
        }

        async fn sent_in_hour(&self, account: i64, now: i64) -> StoreResult<(i64, i64)> {
            Self::count_sent(&self.reader, account, now).await
        }

        async fn destroy_submission(&self, account: i64, id: i64) -> StoreResult<()> {
            const SQL: &str = "DELETE FROM email_submissions WHERE id = $1 AND account_id = $2";
            self.destroy_one(account, ChangeType::EmailSubmission, id, SQL).await
        }

        async fn take_deliveries(
            &self,
            now: i64,
            lease: i64,
            limit: i64,
        ) -> StoreResult<Vec<Delivery>> {
            // One statement: of two nodes taking at once, the second finds the
            // rows the first took no longer free (PostgreSQL re-checks the
            // condition of a row it waited for; SQLite has one writer).
            Ok(sqlx::query_as(
                "UPDATE deliveries SET lease_until = $1 + $2, lease_token = lease_token + 1 \
                 WHERE id IN \
                 (SELECT id FROM deliveries WHERE next_attempt_at <= $1 AND lease_until <= $1 \
                  ORDER BY next_attempt_at, id LIMIT $3) \
                 AND next_attempt_at <= $1 AND lease_until <= $1 \
                 RETURNING id, submission_id, account_id, blob_id, mail_from, recipients, send_at, \
                 attempts, lease_token",
            )
            .bind(now)
            .bind(lease)
            .bind(limit)
            .fetch_all(&self.writer)
            .await?)
        }

        async fn finish_delivery(
            &self,
            delivery: &Delivery,
            statuses: &[(String, String)],
            retry: Option<(i64, String)>,
        ) -> StoreResult<bool> {
            let account = delivery.account_id;
            let mut tx = self.write(Some(account)).await?;
            // The fence first: the row changes only under the token this
            // attempt was taken with (PostgreSQL re-checks it on a row another
            // node just took), and without it nothing else is written.
            let done = match retry {
                Some((at, recipients)) => {
                    sqlx::query(
                        "UPDATE deliveries SET attempts = attempts + 1, next_attempt_at = $3, \
                         lease_until = 0, recipients = $4 WHERE id = $1 AND lease_token = $2",
                    )
                    .bind(delivery.id)
                    .bind(delivery.lease)
                    .bind(at)
                    .bind(D::text(&recipients).into_owned())
                    .execute(&mut *tx)
                    .await?
                }
                None => {
                    sqlx::query("DELETE FROM deliveries WHERE id = $1 AND lease_token = $2")
                        .bind(delivery.id)
                        .bind(delivery.lease)
                        .execute(&mut *tx)
                        .await?
                }
            };
            if D::rows_affected(&done) == 0 {
                return Ok(false);
            }
            let current: Option<String> = sqlx::query_scalar(
                "SELECT delivery_status FROM email_submissions WHERE id = $1 AND account_id = $2",
            )
            .bind(delivery.submission_id)
            .bind(account)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(current) = current
                && !statuses.is_empty()
            {
                let merged = merge_statuses(&current, statuses);
                sqlx::query("UPDATE email_submissions SET delivery_status = $2 WHERE id = $1")
                    .bind(delivery.submission_id)
                    .bind(D::text(&merged).into_owned())
                    .execute(&mut *tx)
                    .await?;
                Self::record_one(
                    &mut tx,
                    account,
                    ChangeType::EmailSubmission,
                    delivery.submission_id,
                    ChangeKind::Updated,
                )
                .await?;
            }
            tx.commit().await?;
            Ok(true)
        }

        async fn renew_delivery(&self, id: i64, lease: i64, until: i64) -> StoreResult<bool> {
            let done = sqlx::query(
                "UPDATE deliveries SET lease_until = $3 WHERE id = $1 AND lease_token = $2",
            )
            .bind(id)
            .bind(lease)
            .bind(until)
            .execute(&self.writer)
            .await?;
            Ok(D::rows_affected(&done) == 1)
        }

        async fn account_for_address(&self, address: &str) -> StoreResult<Option<i64>> {
            let address = address.to_lowercase();
            let query = sqlx::query_scalar(
                "SELECT id FROM accounts WHERE lower(email) = $1 \
                 UNION SELECT account_id FROM account_aliases WHERE address = $1",
            )
            .bind(address);
            self.optional_scalar(query).await
        }
    }
}

impl_sql! {
    impl {
        /// (submissions, recipients) `account` sent in the hour before `now`.
        pub(super) async fn count_sent<'e, E>(
            executor: E,
            account: i64,
            now: i64,
        ) -> StoreResult<(i64, i64)>
        where
            E: Executor<'e, Database = D::Db>,
        {
            Ok(sqlx::query_as(
                "SELECT CAST(count(*) AS BIGINT), CAST(coalesce(sum(recipients), 0) AS BIGINT) \
                 FROM send_log WHERE account_id = $1 AND sent_at > $2",
            )
            .bind(account)
            .bind(now - 3_600)
            .fetch_one(executor)
            .await?)
        }
    }
}

/// A `delivery_status` JSON object with `statuses` (recipient, JSON
/// DeliveryStatus) put in; text that is not an object starts afresh.
fn merge_statuses(current: &str, statuses: &[(String, String)]) -> String {
    let mut object = match serde_json::from_str::<serde_json::Value>(current) {
        Ok(serde_json::Value::Object(object)) => object,
        _ => serde_json::Map::new(),
    };
    for (recipient, status) in statuses {
        let status = serde_json::from_str(status).unwrap_or(serde_json::Value::Null);
        object.insert(recipient.clone(), status);
    }
    serde_json::Value::Object(object).to_string()
}
