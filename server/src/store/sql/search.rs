//! [`Search`] over SQL: the full-text index (and SQLite's search-key walk,
//! migration 0305), the Email/query rows and a mailbox's listing.

use super::*;

/// Search keys (SQLite, migration 0305): `partition << 40 | hour << 16 |
/// slot`. The partition is the account id's low 23 bits.
const SEARCH_KEY_PARTITIONS: i64 = (1 << 23) - 1;
/// The hour (since 1970) and slot bits of a key within its partition.
const SEARCH_KEY_IN_PARTITION: i64 = (1 << 40) - 1;
/// The hour field, once shifted down by 16.
const SEARCH_KEY_HOURS: i64 = (1 << 24) - 1;
/// The slot bits of a key.
const SEARCH_KEY_SLOTS: i64 = (1 << 16) - 1;

impl_sql! {
    #[async_trait]
    impl Search {
        async fn search_index_unfilled(&self) -> StoreResult<bool> {
            Ok(sqlx::query_scalar(D::SQL.search_index_unfilled)
                .fetch_one(&self.reader)
                .await?)
        }

        async fn search_ids(&self, account: i64, search: &TextSearch) -> StoreResult<Vec<i64>> {
            if search.terms.is_empty() {
                return Ok(Vec::new());
            }
            let query = D::search_query(search);
            self.full_text_read(move |connection| {
                Box::pin(
                    sqlx::query_scalar(D::SQL.search_ids)
                        .bind(account)
                        .bind(query)
                        .fetch_all(connection),
                )
            })
            .await
        }

        async fn search_page(
            &self,
            account: i64,
            search: &TextSearch,
            mailbox: Option<i64>,
            descending: bool,
            position: i64,
            limit: i64,
        ) -> StoreResult<(Vec<i64>, i64)> {
            if search.terms.is_empty() {
                return Ok((Vec::new(), 0));
            }
            let query = D::search_query(search);
            // The page and the count on two connections at once: the count
            // reads every match, the page (mostly) only its own.
            let page = async {
                match (D::SQL.search_walk, descending) {
                    (Some(walk), true) => {
                        self.search_walk(walk, account, &query, mailbox, position, limit)
                            .await
                    }
                    _ if limit <= 0 => Ok(Vec::new()),
                    (_, descending) => {
                        let sql = match descending {
                            true => D::SQL.search_page_desc,
                            false => D::SQL.search_page_asc,
                        };
                        let page = sqlx::query_scalar(sql)
                            .bind(account)
                            .bind(&query)
                            .bind(mailbox)
                            .bind(limit)
                            .bind(position);
                        self.scalars(page).await
                    }
                }
            };
            let count_query = query.clone();
            let count = self.full_text_read(move |connection| {
                Box::pin(
                    sqlx::query_scalar(D::SQL.search_count)
                        .bind(account)
                        .bind(count_query)
                        .bind(mailbox)
                        .fetch_one(connection),
                )
            });
            let (ids, total) = tokio::try_join!(page, count)?;
            Ok((ids, total))
        }

        async fn put_search_texts(&self, rows: &[(i64, SearchText)]) -> StoreResult<()> {
            let Some((mut tx, live_rows)) = self.write_live_rows(rows).await? else {
                return Ok(());
            };
            let latest: HashMap<i64, &SearchText> = live_rows.iter().copied().collect();
            let live: Vec<i64> = live_rows.iter().map(|(id, _)| *id).collect();
            // With their accounts and receivedAt (the index rows keep them).
            let accounts: Vec<(i64, i64, i64)> = sqlx::query_as(D::SQL.email_accounts)
                .bind(D::ids(&live))
                .fetch_all(&mut *tx)
                .await?;
            sqlx::query(D::SQL.search_delete)
                .bind(D::ids(&live))
                .execute(&mut *tx)
                .await?;
            let texts: Vec<SearchRow<'_>> = accounts
                .iter()
                .map(|(id, account, received_at)| (*id, *account, *received_at, latest[id]))
                .collect();
            Self::write_search_texts(&mut tx, &texts).await?;
            tx.commit().await?;
            Ok(())
        }

        async fn query_rows(
            &self,
            account: i64,
            in_mailbox: Option<i64>,
        ) -> StoreResult<Vec<QueryRow>> {
            let query = match in_mailbox {
                Some(mailbox) => sqlx::query(D::SQL.query_rows_in_mailbox)
                    .bind(account)
                    .bind(mailbox),
                None => sqlx::query(D::SQL.query_rows).bind(account),
            };
            let rows = query.fetch_all(&self.reader).await?;
            Ok(rows.iter().map(Self::query_row).collect())
        }

        async fn query_rows_of(&self, account: i64, ids: &[i64]) -> StoreResult<Vec<QueryRow>> {
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let rows = sqlx::query(D::SQL.query_rows_of)
                .bind(account)
                .bind(D::ids(ids))
                .fetch_all(&self.reader)
                .await?;
            Ok(rows.iter().map(Self::query_row).collect())
        }

        async fn mailbox_emails_by_received(
            &self,
            mailbox: i64,
            descending: bool,
            position: i64,
            limit: i64,
        ) -> StoreResult<(Vec<(i64, i64)>, i64)> {
            let sql = if descending {
                D::SQL.listing_desc
            } else {
                D::SQL.listing_asc
            };
            const COUNT: &str = "SELECT count(*) FROM email_mailboxes WHERE mailbox_id = $1";
            let hot = self.hot().and_then(|hot| hot.mailbox_page(sql, mailbox, position, limit));
            if let Some(page) = hot {
                return Ok(page);
            }
            let ids: Vec<(i64, i64)> = sqlx::query_as(sql)
                .bind(mailbox)
                .bind(limit)
                .bind(position)
                .fetch_all(&self.reader)
                .await?;
            let total: i64 = sqlx::query_scalar(COUNT)
                .bind(mailbox)
                .fetch_one(&self.reader)
                .await?;
            Ok((ids, total))
        }

        async fn mailbox_positions(
            &self,
            mailbox: i64,
            descending: bool,
            ids: &[i64],
        ) -> StoreResult<Vec<(i64, i64)>> {
            let sql = if descending {
                D::SQL.positions_desc
            } else {
                D::SQL.positions_asc
            };
            let query = sqlx::query_as(sql)
                .bind(mailbox)
                .bind(D::ids(ids));
            self.rows(query).await
        }
    }
}

impl_sql! {
    impl {
        /// `read` of every match of a full-text query on a reader connection,
        /// after the dialect's [`Dialect::FULL_TEXT_SETUP`] in one transaction
        /// with it where there is one.
        async fn full_text_read<T: Send, F>(&self, read: F) -> StoreResult<T>
        where
            F: Send
                + for<'c> FnOnce(
                    &'c mut <D::Db as Database>::Connection,
                ) -> futures::future::BoxFuture<'c, Result<T, sqlx::Error>>,
        {
            let Some(setup) = D::FULL_TEXT_SETUP else {
                let mut connection = self.reader.acquire().await?;
                return Ok(read(&mut connection).await?);
            };
            let mut tx = self.reader.begin().await?;
            sqlx::raw_sql(setup).execute(&mut *tx).await?;
            let value = read(&mut tx).await?;
            tx.commit().await?;
            Ok(value)
        }

        /// A row of [`Statements::query_rows`](crate::store::dialect::Statements::query_rows)
        /// and its siblings (the columns of `query_columns!`).
        fn query_row(row: &<D::Db as Database>::Row) -> QueryRow {
            QueryRow {
                meta: meta(
                    (
                        row.get(0),
                        row.get(1),
                        row.get(2),
                        row.get(3),
                        row.get(4),
                        row.get(5),
                        row.get(6),
                    ),
                    D::id_array,
                ),
                sent_at: row.get(7),
                index: EmailIndex {
                    message_id: row.get(8),
                    referenced_ids: Vec::new(),
                    base_subject: row.get(9),
                    subject: row.get(10),
                    from_sort: row.get(11),
                    to_sort: row.get(12),
                    from_text: row.get(13),
                    to_text: row.get(14),
                    cc_text: row.get(15),
                    bcc_text: row.get(16),
                    has_attachment: row.get(17),
                },
            }
        }

        /// Writes full-text index rows of emails that have none yet, by account
        /// and receivedAt: SQLite's search keys then ascend through a batch, and
        /// FTS5 keeps them in memory until commit instead of writing a segment
        /// each time a key is lower than the last (migration 0305). An email
        /// without a word (no subject, address or text) gets no row: nothing
        /// could find it.
        pub(super) async fn write_search_texts(
            tx: &mut Tx<D>,
            rows: &[SearchRow<'_>],
        ) -> StoreResult<u64> {
            let mut rows: Vec<SearchRow<'_>> = rows
                .iter()
                .filter(|(_, _, _, text)| !text.headers.is_empty() || !text.body.is_empty())
                .copied()
                .collect();
            rows.sort_by_key(|(id, account, received_at, _)| (*account, *received_at, *id));
            Self::insert_rows(
                tx,
                D::SQL.search_insert_head,
                D::SQL.search_insert_tail,
                5,
                &rows,
                |row, (id, account, received_at, text)| {
                    let (headers, body) = D::search_columns(text);
                    row.push_bind(*id)
                        .push_bind(*account)
                        .push_bind(*received_at)
                        .push_bind(D::text(&headers).into_owned())
                        .push_bind(D::text(&body).into_owned());
                },
            )
            .await
        }

        /// One page, newest first, of the matches of `query` (in `mailbox`)
        /// through [`Statements::search_walk`](crate::store::dialect::Statements),
        /// one statement read as a stream: matches arrive by search key, whose
        /// hour is never earlier than their email's receivedAt (migration 0305).
        /// Once `position + limit` matches are in, the walk reads on to the end
        /// of the last one's hour; there, if that many are at least as new as
        /// the hour's start, it stops: every match not yet read has a lower key,
        /// an earlier hour, so is older. Else it goes on an hour further.
        /// Reads the page and about one hour of matches, not every match.
        async fn search_walk(
            &self,
            walk: &'static str,
            account: i64,
            query: &str,
            mailbox: Option<i64>,
            position: i64,
            limit: i64,
        ) -> StoreResult<Vec<i64>> {
            if limit <= 0 {
                return Ok(Vec::new());
            }
            let need = (position.max(0) + limit) as usize;
            let partition = (account & SEARCH_KEY_PARTITIONS) << 40;
            let mut matches = sqlx::query_as::<_, (i64, i64, i64)>(walk)
                .bind(account)
                .bind(query)
                .bind(mailbox)
                .bind(partition)
                .bind(partition | SEARCH_KEY_IN_PARTITION)
                .bind(-1_i64)
                .fetch(&self.reader);
            // (receivedAt, id) of the matches read; the hour (as a key) being read
            // once `need` are in.
            let mut seen: Vec<(i64, i64)> = Vec::with_capacity(need);
            let mut hour: Option<i64> = None;
            while let Some((key, id, received_at)) = matches.try_next().await? {
                if let Some(current) = hour.filter(|current| key < *current) {
                    seen.sort_unstable_by(|a, b| b.cmp(a));
                    let hour_start = ((current >> 16) & SEARCH_KEY_HOURS) * 3600;
                    if seen[need - 1].0 >= hour_start {
                        break;
                    }
                    hour = Some(key & !SEARCH_KEY_SLOTS);
                }
                seen.push((received_at, id));
                if hour.is_none() && seen.len() == need {
                    hour = Some(key & !SEARCH_KEY_SLOTS);
                }
            }
            seen.sort_unstable_by(|a, b| b.cmp(a));
            Ok(seen
                .into_iter()
                .skip(position.max(0) as usize)
                .take(limit as usize)
                .map(|(_, id)| id)
                .collect())
        }
    }
}
