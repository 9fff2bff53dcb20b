//! [`Mailboxes`] over SQL, and the ownership checks other writes share.

use super::*;

impl_sql! {
    #[async_trait]
    impl Mailboxes {
        async fn mailboxes(&self, account: i64) -> StoreResult<Vec<MailboxRow>> {
            let query = sqlx::query_as(
                "WITH m AS (SELECT * FROM mailboxes WHERE account_id = $1), \
                 e AS (SELECT id, thread_id, \
                         (' ' || keywords || ' ' NOT LIKE '% $seen %' \
                          AND ' ' || keywords || ' ' NOT LIKE '% $draft %') AS unread \
                       FROM emails WHERE account_id = $1), \
                 c AS (SELECT em.mailbox_id, count(*) AS total, \
                         sum(CASE WHEN e.unread THEN 1 ELSE 0 END) AS unread, \
                         count(DISTINCT e.thread_id) AS threads, \
                         count(DISTINCT CASE WHEN e.unread THEN e.thread_id END) AS unread_threads \
                       FROM email_mailboxes em JOIN e ON e.id = em.email_id \
                       WHERE em.mailbox_id IN (SELECT id FROM m) GROUP BY em.mailbox_id) \
                 SELECT m.id, m.parent_id, m.name, m.role, m.sort_order, m.is_subscribed, \
                   coalesce(c.total, 0) AS total_emails, coalesce(c.unread, 0) AS unread_emails, \
                   coalesce(c.threads, 0) AS total_threads, \
                   coalesce(c.unread_threads, 0) AS unread_threads \
                 FROM m LEFT JOIN c ON c.mailbox_id = m.id ORDER BY m.id",
            )
            .bind(account);
            self.rows(query).await
        }

        async fn mailbox_nodes(&self, account: i64) -> StoreResult<Vec<MailboxNode>> {
            Ok(sqlx::query_as(
                "SELECT id, parent_id, name, role, sort_order, is_subscribed FROM mailboxes \
                 WHERE account_id = $1 ORDER BY id",
            )
            .bind(account)
            .fetch_all(&self.reader)
            .await?)
        }

        async fn owns_mailbox(&self, account: i64, mailbox: i64) -> StoreResult<bool> {
            const SQL: &str = "SELECT id FROM mailboxes WHERE id = $1 AND account_id = $2";
            if let Some(owned) = self.hot().and_then(|hot| hot.owns_mailbox(SQL, account, mailbox)) {
                return Ok(owned);
            }
            let found: Option<i64> = sqlx::query_scalar(SQL)
                .bind(mailbox)
                .bind(account)
                .fetch_optional(&self.reader)
                .await?;
            Ok(found.is_some())
        }

        async fn role_mailbox(&self, account: i64, role: &str) -> StoreResult<Option<i64>> {
            let query = sqlx::query_scalar(
                "SELECT id FROM mailboxes WHERE account_id = $1 AND role = $2 ORDER BY id LIMIT 1",
            )
            .bind(account)
            .bind(role);
            self.optional_scalar(query).await
        }

        async fn create_mailbox(&self, account: i64, mailbox: &NewMailbox) -> StoreResult<i64> {
            let mut tx = self.write(Some(account)).await?;
            if let Some(parent) = mailbox.parent_id {
                Self::check_mailboxes_owned(&mut tx, account, &[parent]).await?;
            }
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO mailboxes (account_id, parent_id, name, role, sort_order, is_subscribed) \
                 VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            )
            .bind(account)
            .bind(mailbox.parent_id)
            .bind(D::text(&mailbox.name).into_owned())
            .bind(mailbox.role.clone())
            .bind(mailbox.sort_order)
            .bind(mailbox.is_subscribed)
            .fetch_one(&mut *tx)
            .await?;
            Self::commit_one(tx, account, ChangeType::Mailbox, id, ChangeKind::Created).await?;
            Ok(id)
        }

        async fn update_mailbox(&self, account: i64, id: i64, patch: &MailboxPatch) -> StoreResult<()> {
            let mut tx = self.write(Some(account)).await?;
            Self::check_mailboxes_owned(&mut tx, account, &[id]).await?;
            if let Some(Some(parent)) = patch.parent_id {
                Self::check_mailboxes_owned(&mut tx, account, &[parent]).await?;
            }
            sqlx::query(
                "UPDATE mailboxes SET \
                 parent_id = CASE WHEN $2 THEN $3 ELSE parent_id END, \
                 name = coalesce($4, name), \
                 role = CASE WHEN $5 THEN $6 ELSE role END, \
                 sort_order = coalesce($7, sort_order), \
                 is_subscribed = coalesce($8, is_subscribed) \
                 WHERE id = $1",
            )
            .bind(id)
            .bind(patch.parent_id.is_some())
            .bind(patch.parent_id.flatten())
            .bind(patch.name.as_deref().map(|name| D::text(name).into_owned()))
            .bind(patch.role.is_some())
            .bind(patch.role.clone().flatten())
            .bind(patch.sort_order)
            .bind(patch.is_subscribed)
            .execute(&mut *tx)
            .await?;
            Self::commit_one(tx, account, ChangeType::Mailbox, id, ChangeKind::Updated).await
        }

        async fn destroy_mailbox(&self, account: i64, id: i64, remove_emails: bool) -> StoreResult<()> {
            let mut tx = self.write(Some(account)).await?;
            Self::check_mailboxes_owned(&mut tx, account, &[id]).await?;
            let children: i64 =
                sqlx::query_scalar("SELECT count(*) FROM mailboxes WHERE parent_id = $1")
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await?;
            if children > 0 {
                return Err(StoreError::MailboxHasChild);
            }
            let members: Vec<(i64, i64)> = sqlx::query_as(
                "SELECT em.email_id, \
                   (SELECT count(*) FROM email_mailboxes o WHERE o.email_id = em.email_id) \
                 FROM email_mailboxes em WHERE em.mailbox_id = $1",
            )
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
            if !members.is_empty() && !remove_emails {
                return Err(StoreError::MailboxHasEmail);
            }
            let (only_here, elsewhere): (Vec<(i64, i64)>, Vec<(i64, i64)>) =
                members.into_iter().partition(|(_, count)| *count == 1);
            let only_here: Vec<i64> = only_here.into_iter().map(|(email, _)| email).collect();
            let mut set = ChangeSet::default();
            Self::delete_emails(&mut tx, account, &only_here, &mut set).await?;
            for (email, _) in elsewhere {
                set.record(ChangeType::Email, email, ChangeKind::Updated);
            }
            for statement in [
                "DELETE FROM email_mailboxes WHERE mailbox_id = $1",
                "DELETE FROM mailboxes WHERE id = $1",
            ] {
                sqlx::query(statement).bind(id).execute(&mut *tx).await?;
            }
            set.record(ChangeType::Mailbox, id, ChangeKind::Destroyed);
            Self::record(&mut tx, account, &set).await?;
            tx.commit().await?;
            Ok(())
        }
    }
}

impl_sql! {
    impl {
        /// `NotFound` unless the account owns every mailbox of `mailbox_ids`.
        pub(super) async fn check_mailboxes_owned(
            tx: &mut Tx<D>,
            account: i64,
            mailbox_ids: &[i64],
        ) -> StoreResult<()> {
            let wanted = distinct(mailbox_ids);
            if wanted.is_empty() {
                return Ok(());
            }
            let owned = Self::owned_mailboxes(tx, account, &wanted).await?;
            if owned.len() != wanted.len() {
                return Err(StoreError::NotFound);
            }
            Ok(())
        }

        /// Which of `mailbox_ids` the account owns.
        pub(super) async fn owned_mailboxes(
            tx: &mut Tx<D>,
            account: i64,
            mailbox_ids: &[i64],
        ) -> StoreResult<HashSet<i64>> {
            Ok(sqlx::query_scalar(D::SQL.owned_mailboxes)
                .bind(account)
                .bind(D::ids(mailbox_ids))
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .collect())
        }
    }
}
