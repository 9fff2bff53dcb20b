//! [`Emails`] over SQL: the batched email writer, reads by id list, updates
//! and destroys, and the projection, part-tree and keyword writers.

use super::*;

impl_sql! {
    #[async_trait]
    impl Emails {
        async fn insert_emails(&self, account: i64, emails: &[NewEmail]) -> StoreResult<Vec<Inserted>> {
            if emails.is_empty() {
                return Ok(Vec::new());
            }
            let mut tx = self.write(Some(account)).await?;
            let mailbox_ids: Vec<i64> = emails
                .iter()
                .flat_map(|e| e.mailbox_ids.iter().copied())
                .collect();
            Self::check_mailboxes_owned(&mut tx, account, &mailbox_ids).await?;
            // Duplicates, ids and threads planned in memory (insert_plan).
            let blob_ids: Vec<&str> = emails.iter().map(|e| e.blob_id.as_str()).collect();
            let stored: HashMap<String, i64> = sqlx::query_as(D::SQL.stored_blobs)
                .bind(account)
                .bind(D::texts(&blob_ids))
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .collect();
            let new_count = insert_plan::new_count(emails, &stored);
            if new_count == 0 {
                tx.commit().await?;
                return Ok(emails
                    .iter()
                    .map(|e| Inserted::Duplicate(stored[&e.blob_id]))
                    .collect());
            }
            let ids: Vec<i64> = sqlx::query_scalar(D::SQL.next_email_ids)
                .bind(new_count as i64)
                .fetch_all(&mut *tx)
                .await?;
            let keys = insert_plan::ref_keys(emails, D::ref_key);
            let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
            let stored_refs = thread_refs(
                sqlx::query_as(D::SQL.thread_refs)
                    .bind(account)
                    .bind(D::texts(&key_refs))
                    .fetch_all(&mut *tx)
                    .await?,
            );
            let plan = insert_plan::plan(emails, stored, ids, stored_refs, D::ref_key, |subject| {
                D::text(subject).into_owned()
            })?;
            Self::insert_planned(&mut tx, account, &plan).await?;
            Self::check_quota(&mut tx, account).await?;
            // A thread with none of its emails stored before this batch is new.
            let existed: HashSet<i64> = sqlx::query_scalar(D::SQL.threads_with_others)
                .bind(account)
                .bind(D::ids(&plan.threads()))
                .bind(D::ids(&plan.new_ids()))
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .collect();
            Self::record(&mut tx, account, &plan.changes(&existed)).await?;
            tx.commit().await?;
            Ok(plan.outcomes)
        }

        async fn email_meta(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<EmailMeta>> {
            let rows: Vec<MetaRow<D::IdArray>> = sqlx::query_as(D::SQL.email_meta)
                .bind(account)
                .bind(D::ids(ids))
                .fetch_all(&self.reader)
                .await?;
            Ok(rows.into_iter().map(|row| meta(row, D::id_array)).collect())
        }

        /// [`crate::store::dialect::Statements::email_meta_unless_state`]: one
        /// statement and one row, the call pays one trip to the database
        /// whether the state has moved or not.
        async fn email_meta_unless_state(
            &self,
            account: i64,
            ids: &[i64],
            known: Option<i64>,
        ) -> StoreResult<(Option<Vec<EmailMeta>>, i64)> {
            let sql = D::SQL.email_meta_unless_state;
            let hot = (self.hot()).and_then(|hot| hot.email_meta_unless_state(sql, account, ids, known));
            let row: Option<(i64, Option<String>)> = match hot {
                Some(row) => row,
                None => {
                    sqlx::query_as(sql)
                        .bind(account)
                        .bind(D::ids(ids))
                        .bind(known)
                        .fetch_optional(&self.reader)
                        .await?
                }
            };
            let (state, rows) = row.ok_or(StoreError::NotFound)?;
            let Some(rows) = rows else {
                return Ok((None, state));
            };
            let rows: Vec<MetaRow<Option<String>>> = serde_json::from_str(&rows)
                .map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))?;
            let metas = rows
                .into_iter()
                .map(|row| meta(row, |ids: Option<String>| ids_from_csv(ids.as_deref())))
                .collect();
            Ok((Some(metas), state))
        }

        async fn header_blocks(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, Vec<u8>)>> {
            let query = sqlx::query_as(D::SQL.header_blocks)
                .bind(account)
                .bind(D::ids(ids));
            self.rows(query).await
        }

        async fn fast_views(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, FastView)>> {
            let rows: Vec<(i64, String, bool)> = sqlx::query_as(D::SQL.fast_views)
                .bind(account)
                .bind(D::ids(ids))
                .fetch_all(&self.reader)
                .await?;
            Ok(rows
                .into_iter()
                .map(|(id, preview, has_attachment)| {
                    let view = FastView {
                        preview,
                        has_attachment,
                    };
                    (id, view)
                })
                .collect())
        }

        async fn put_fast_views(&self, rows: &[(i64, FastView)]) -> StoreResult<()> {
            let Some((mut tx, views)) = self.write_live_rows(rows).await? else {
                return Ok(());
            };
            Self::write_fast_views(&mut tx, &views, true).await?;
            tx.commit().await?;
            Ok(())
        }

        async fn body_structures(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<(i64, Vec<u8>)>> {
            let query = sqlx::query_as(D::SQL.body_structures)
                .bind(account)
                .bind(D::ids(ids));
            self.rows(query).await
        }

        async fn put_body_structures(&self, rows: &[(i64, Vec<u8>)]) -> StoreResult<()> {
            let Some((mut tx, trees)) = self.write_live_rows(rows).await? else {
                return Ok(());
            };
            Self::write_body_structures(&mut tx, &trees, true).await?;
            tx.commit().await?;
            Ok(())
        }

        async fn body_structure_of_blob(
            &self,
            account: i64,
            blob_id: &str,
        ) -> StoreResult<Option<(i64, Vec<u8>)>> {
            let query = sqlx::query_as(
                "SELECT e.id, s.structure FROM emails e JOIN body_structure s ON s.email_id = e.id \
                 WHERE e.account_id = $1 AND e.blob_id = $2 ORDER BY e.id LIMIT 1",
            )
            .bind(account)
            .bind(blob_id);
            self.optional(query).await
        }

        async fn clear_fast_views(&self, account: Option<i64>) -> StoreResult<u64> {
            let done = sqlx::query(
                "DELETE FROM fast_view WHERE $1 IS NULL \
                 OR email_id IN (SELECT id FROM emails WHERE account_id = $1)",
            )
            .bind(account)
            .execute(&self.writer)
            .await?;
            Ok(D::rows_affected(&done))
        }

        async fn email_blobs(
            &self,
            account: Option<i64>,
            after_id: i64,
            limit: i64,
            missing_fast_view_only: bool,
        ) -> StoreResult<Vec<(i64, String)>> {
            let query = sqlx::query_as(
                "SELECT e.id, e.blob_id FROM emails e WHERE e.id > $2 \
                 AND ($1 IS NULL OR e.account_id = $1) \
                 AND (NOT $4 OR NOT EXISTS (SELECT 1 FROM fast_view f WHERE f.email_id = e.id)) \
                 ORDER BY e.id LIMIT $3",
            )
            .bind(account)
            .bind(after_id)
            .bind(limit)
            .bind(missing_fast_view_only);
            self.rows(query).await
        }

        async fn update_emails(
            &self,
            account: i64,
            updates: &[EmailUpdate],
        ) -> StoreResult<Vec<UpdateOutcome>> {
            if updates.is_empty() {
                return Ok(Vec::new());
            }
            let mut tx = match self.write(Some(account)).await {
                Err(StoreError::NotFound) => return Ok(vec![UpdateOutcome::NotFound; updates.len()]),
                tx => tx?,
            };
            let ids = distinct(&updates.iter().map(|u| u.id).collect::<Vec<_>>());
            let rows = Self::email_lists(&mut tx, account, &ids).await?;
            let before: HashMap<i64, EmailLists> = rows
                .iter()
                .map(|(id, (_, _, lists))| (*id, lists.clone()))
                .collect();
            let wanted: Vec<i64> = updates
                .iter()
                .flat_map(|u| u.mailbox_ids.additions().copied())
                .collect();
            let owned = Self::owned_mailboxes(&mut tx, account, &distinct(&wanted)).await?;
            let (current, outcomes) = crate::store::apply_updates(&before, &owned, updates);
            let mut set = ChangeSet::default();
            let (mut keywords_rows, mut moved, mut memberships) = (Vec::new(), Vec::new(), Vec::new());
            let mut changed: Vec<&i64> = current.keys().collect();
            changed.sort_unstable();
            for id in changed {
                let (keywords, mailboxes) = &current[id];
                let (old_keywords, old_mailboxes) = &before[id];
                if keywords != old_keywords {
                    keywords_rows.push((*id, keywords_to_column(keywords)));
                }
                if mailboxes != old_mailboxes {
                    moved.push(*id);
                    let received_at = rows[id].1;
                    memberships.extend(mailboxes.iter().map(|m| (*m, received_at, *id)));
                }
                crate::store::record_email_update(
                    &mut set,
                    *id,
                    (old_keywords, old_mailboxes),
                    (keywords, mailboxes),
                );
            }
            Self::set_keywords(&mut tx, &keywords_rows).await?;
            if !moved.is_empty() {
                sqlx::query(D::SQL.delete_memberships)
                    .bind(D::ids(&moved))
                    .execute(&mut *tx)
                    .await?;
                Self::insert_memberships(&mut tx, &memberships).await?;
            }
            Self::record(&mut tx, account, &set).await?;
            tx.commit().await?;
            Ok(outcomes)
        }

        async fn destroy_emails(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<i64>> {
            let mut tx = match self.write(Some(account)).await {
                Err(StoreError::NotFound) => return Ok(Vec::new()),
                tx => tx?,
            };
            let mut set = ChangeSet::default();
            let destroyed = Self::delete_emails(&mut tx, account, ids, &mut set).await?;
            Self::record(&mut tx, account, &set).await?;
            tx.commit().await?;
            Ok(destroyed)
        }

        async fn thread_emails(
            &self,
            account: i64,
            thread_ids: &[i64],
        ) -> StoreResult<Vec<(i64, Vec<i64>)>> {
            let query = sqlx::query_as(D::SQL.thread_emails)
                .bind(account)
                .bind(D::ids(thread_ids));
            self.thread_groups(query).await
        }
    }
}

impl_sql! {
    impl {
        /// Keywords, memberships, thread and receivedAt of the account's emails
        /// among `ids`, read inside the write transaction.
        async fn email_lists(
            tx: &mut Tx<D>,
            account: i64,
            ids: &[i64],
        ) -> StoreResult<HashMap<i64, (i64, i64, EmailLists)>> {
            let rows: Vec<ListsRow<D::IdArray>> = sqlx::query_as(D::SQL.email_lists)
                .bind(account)
                .bind(D::ids(ids))
                .fetch_all(&mut **tx)
                .await?;
            Ok(rows
                .into_iter()
                .map(|(id, thread, received_at, keywords, mailboxes)| {
                    let lists = (keywords_from_column(&keywords), D::id_array(mailboxes));
                    (id, (thread, received_at, lists))
                })
                .collect())
        }

        /// Deletes emails of the account and their blob grants, recording the
        /// emails, their mailboxes' counts and their threads in `set`.
        pub(super) async fn delete_emails(
            tx: &mut Tx<D>,
            account: i64,
            ids: &[i64],
            set: &mut ChangeSet,
        ) -> StoreResult<Vec<i64>> {
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let before = Self::email_lists(tx, account, ids).await?;
            let destroyed: Vec<(i64, String)> = sqlx::query_as(D::SQL.delete_emails)
                .bind(account)
                .bind(D::ids(ids))
                .fetch_all(&mut **tx)
                .await?;
            let blob_ids: Vec<&str> = destroyed.iter().map(|(_, blob)| blob.as_str()).collect();
            sqlx::query(D::SQL.delete_blob_grants)
                .bind(account)
                .bind(D::texts(&blob_ids))
                .execute(&mut **tx)
                .await?;
            let mut threads = Vec::new();
            for (id, _) in &destroyed {
                let (thread, _, (_, mailboxes)) = &before[id];
                set.record(ChangeType::Email, *id, ChangeKind::Destroyed);
                for mailbox in mailboxes {
                    set.counts(*mailbox);
                }
                threads.push(*thread);
            }
            let threads = distinct(&threads);
            let remaining: HashSet<i64> = sqlx::query_scalar(D::SQL.threads_remaining)
                .bind(account)
                .bind(D::ids(&threads))
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .collect();
            for thread in threads {
                let kind = if remaining.contains(&thread) {
                    ChangeKind::Updated
                } else {
                    ChangeKind::Destroyed
                };
                set.record(ChangeType::Thread, thread, kind);
            }
            Ok(destroyed.into_iter().map(|(id, _)| id).collect())
        }

        /// Writes the planned new emails of a batch ([`insert_plan`]) as
        /// [`EmailRecord`]s (the one email writer, shared with `migrate-store`),
        /// then their blob grants and thread refs.
        async fn insert_planned(
            tx: &mut Tx<D>,
            account: i64,
            plan: &InsertPlan<'_>,
        ) -> StoreResult<()> {
            let records: Vec<EmailRecord> = plan
                .new
                .iter()
                .map(|planned| EmailRecord::new(account, planned.id, planned.thread_id, planned.email))
                .collect();
            Self::write_emails(tx, &records).await?;
            let created_at = now();
            Self::insert_rows(
                tx,
                "INSERT INTO account_blobs (account_id, blob_id, size, created_at)",
                "ON CONFLICT DO NOTHING",
                4,
                &records,
                |row, record| {
                    row.push_bind(account)
                        .push_bind(record.blob_id.clone())
                        .push_bind(record.size)
                        .push_bind(created_at);
                },
            )
            .await?;
            Self::insert_rows(
                tx,
                "INSERT INTO thread_refs (account_id, message_id, thread_id, base_subject)",
                "ON CONFLICT DO NOTHING",
                4,
                &plan.refs,
                |row, r| {
                    row.push_bind(account)
                        .push_bind(r.message_id.clone())
                        .push_bind(r.thread_id)
                        .push_bind(r.base_subject.clone());
                },
            )
            .await?;
            Ok(())
        }

        /// Inserts `(mailbox_id, received_at, email_id)` membership rows.
        pub(super) async fn insert_memberships(
            tx: &mut Tx<D>,
            rows: &[(i64, i64, i64)],
        ) -> StoreResult<u64> {
            Self::insert_rows(
                tx,
                "INSERT INTO email_mailboxes (mailbox_id, received_at, email_id)",
                "ON CONFLICT DO NOTHING",
                3,
                rows,
                |row, (mailbox, received_at, email)| {
                    row.push_bind(*mailbox)
                        .push_bind(*received_at)
                        .push_bind(*email);
                },
            )
            .await
        }

        /// Writes projection rows: replacing rows already there, or, without
        /// `replace`, keeping them.
        pub(super) async fn write_fast_views(
            tx: &mut Tx<D>,
            rows: &[(i64, &FastView)],
            replace: bool,
        ) -> StoreResult<u64> {
            let tail = if replace {
                "ON CONFLICT (email_id) DO UPDATE \
                 SET preview = excluded.preview, has_attachment = excluded.has_attachment"
            } else {
                "ON CONFLICT DO NOTHING"
            };
            Self::insert_rows(
                tx,
                "INSERT INTO fast_view (email_id, preview, has_attachment)",
                tail,
                3,
                rows,
                |row, (id, view)| {
                    row.push_bind(*id)
                        .push_bind(D::text(&view.preview).into_owned())
                        .push_bind(view.has_attachment);
                },
            )
            .await
        }

        /// A write transaction without an account's lock, and of `rows` keyed
        /// by email id (the last row of an id wins) those of emails that
        /// still exist, held against deletion until it commits where the
        /// database needs it: a projection, tree or index row written after
        /// its email was destroyed would outlive it. `None` when there are
        /// no rows.
        pub(super) async fn write_live_rows<'r, T>(
            &self,
            rows: &'r [(i64, T)],
        ) -> StoreResult<Option<(Tx<D>, Vec<(i64, &'r T)>)>> {
            if rows.is_empty() {
                return Ok(None);
            }
            let mut tx = self.write(None).await?;
            let latest: HashMap<i64, &T> = rows.iter().map(|(id, row)| (*id, row)).collect();
            let ids = distinct(&rows.iter().map(|(id, _)| *id).collect::<Vec<_>>());
            let live: Vec<i64> = sqlx::query_scalar(D::SQL.live_emails)
                .bind(D::ids(&ids))
                .fetch_all(&mut *tx)
                .await?;
            let live = live.iter().map(|id| (*id, latest[id])).collect();
            Ok(Some((tx, live)))
        }

        /// Writes stored part trees: replacing rows already there, or, without
        /// `replace`, keeping them.
        pub(super) async fn write_body_structures(
            tx: &mut Tx<D>,
            rows: &[(i64, &Vec<u8>)],
            replace: bool,
        ) -> StoreResult<u64> {
            let tail = if replace {
                "ON CONFLICT (email_id) DO UPDATE SET structure = excluded.structure"
            } else {
                "ON CONFLICT DO NOTHING"
            };
            Self::insert_rows(
                tx,
                "INSERT INTO body_structure (email_id, structure)",
                tail,
                2,
                rows,
                |row, (id, tree)| {
                    row.push_bind(*id).push_bind((*tree).clone());
                },
            )
            .await
        }

        /// Replaces the keywords columns of `(id, keywords)`.
        async fn set_keywords(tx: &mut Tx<D>, rows: &[(i64, String)]) -> StoreResult<()> {
            Self::insert_rows(
                tx,
                "WITH v (id, keywords) AS (",
                ") UPDATE emails SET keywords = v.keywords FROM v WHERE emails.id = v.id",
                2,
                rows,
                |row, (id, keywords)| {
                    row.push_bind(*id).push_bind(D::text(keywords).into_owned());
                },
            )
            .await?;
            Ok(())
        }
    }
}
