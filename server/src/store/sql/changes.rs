//! [`ChangeLog`] over SQL: state counters and Foo/changes.

use super::*;

impl_sql! {
    #[async_trait]
    impl ChangeLog {
        async fn states(&self, account: i64) -> StoreResult<States> {
            const SQL: &str = "SELECT email_state, mailbox_state, thread_state, identity_state, \
                 vacation_state, submission_state FROM accounts WHERE id = $1";
            let hot = self.hot().and_then(|hot| hot.states(SQL, account));
            let row: Option<[i64; 6]> = match hot {
                Some(row) => row,
                None => sqlx::query_as(SQL)
                    .bind(account)
                    .fetch_optional(&self.reader)
                    .await?
                    .map(|(a, b, c, d, e, f)| [a, b, c, d, e, f]),
            };
            Ok(States::from(row.ok_or(StoreError::NotFound)?))
        }

        async fn changes(
            &self,
            account: i64,
            kind: ChangeType,
            since: LogPosition,
            max_changes: usize,
        ) -> StoreResult<Changes> {
            let row: Option<(i64, i64, i64, i64, i64, i64, i64)> = sqlx::query_as(
                "SELECT email_state, mailbox_state, thread_state, identity_state, vacation_state, \
                 submission_state, changes_from FROM accounts WHERE id = $1",
            )
            .bind(account)
            .fetch_optional(&self.reader)
            .await?;
            let (email, mailbox, thread, identity, vacation, submission, from) =
                row.ok_or(StoreError::NotFound)?;
            let state = match kind {
                ChangeType::Email => email,
                ChangeType::Mailbox => mailbox,
                ChangeType::Thread => thread,
                ChangeType::Identity => identity,
                ChangeType::VacationResponse => vacation,
                ChangeType::EmailSubmission => submission,
            };
            check_since(since, state, from)?;
            let mut collector = ChangeCollector::new(since, max_changes);
            loop {
                let cursor = collector.cursor();
                let rows: Vec<(i64, i64, i16, bool)> = sqlx::query_as(
                    "SELECT modseq, object_id, kind, counts_only FROM changes \
                     WHERE account_id = $1 AND type = $2 \
                     AND (modseq, object_id) > ($3, $4) AND modseq <= $5 \
                     ORDER BY modseq, object_id LIMIT $6",
                )
                .bind(account)
                .bind(kind as i16)
                .bind(cursor.modseq)
                .bind(cursor.object.unwrap_or(i64::MAX))
                .bind(state)
                .bind(LOG_BATCH)
                .fetch_all(&self.reader)
                .await?;
                let exhausted = (rows.len() as i64) < LOG_BATCH;
                let rows = rows
                    .into_iter()
                    .map(|(modseq, object, kind, counts_only)| LogRow {
                        modseq,
                        object,
                        kind: ChangeKind::from_code(kind.into()),
                        counts_only,
                    })
                    .collect();
                if !collector.feed(rows, exhausted) || exhausted {
                    break;
                }
            }
            Ok(collector.finish(state))
        }

        async fn truncate_changes(&self, account: i64, through_modseq: i64) -> StoreResult<u64> {
            let mut tx = self.write(Some(account)).await?;
            let (modseq, from): (i64, i64) =
                sqlx::query_as("SELECT modseq, changes_from FROM accounts WHERE id = $1")
                    .bind(account)
                    .fetch_one(&mut *tx)
                    .await?;
            let done = sqlx::query("DELETE FROM changes WHERE account_id = $1 AND modseq <= $2")
                .bind(account)
                .bind(through_modseq)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE accounts SET changes_from = $2 WHERE id = $1")
                .bind(account)
                .bind(from.max(through_modseq.min(modseq)))
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(D::rows_affected(&done))
        }
    }
}
