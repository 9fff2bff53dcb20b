//! CPU-heavy read work off the async workers, bounded and fair (issue 13).
//!
//! - [`WorkPool`]: parsing and rendering beyond a small budget (a whole
//!   message parsed, a header block of more than [`INLINE_PARSE_BYTES`]
//!   split, an Email/get whose render work may pass [`INLINE_RENDER_WORK`])
//!   run on tokio's blocking threads behind a semaphore of `threads` permits
//!   (one per core by default), so the async workers keep serving every other
//!   request. Each account may hold at most `per_account` of those permits
//!   (half by default): one account's heavy requests queue behind each other
//!   and never fill the pool, so another account's heavy work still gets a
//!   thread. The list view (metadata, fast view, a few header properties)
//!   stays inline: no thread hop on the hot path.
//! - [`WorkMeter`]: what a render may still spend, in work units (one
//!   property of one email, one header field value); checked before each
//!   unit is rendered, so a request over its budget stops without doing the
//!   work (`requestTooLarge`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Header block octets split inline; a larger set of blocks is split on the pool.
pub const INLINE_PARSE_BYTES: usize = 64 << 10;

/// Estimated render work units done inline; more runs on the pool.
pub const INLINE_RENDER_WORK: u64 = 4_000;

/// The bounded pool heavy parsing and rendering run on; see the module doc.
pub struct WorkPool {
    threads: Arc<Semaphore>,
    capacity: usize,
    per_account: usize,
    accounts: Mutex<HashMap<i64, Weak<Semaphore>>>,
}

impl WorkPool {
    /// A pool of `threads` permits (0: one per core), of which one account
    /// holds at most `per_account` (0: half the threads, at least 1).
    pub fn new(threads: usize, per_account: usize) -> Self {
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(2, usize::from),
            n => n,
        };
        let per_account = match per_account {
            0 => (threads / 2).max(1),
            n => n.min(threads),
        };
        Self {
            threads: Arc::new(Semaphore::new(threads)),
            capacity: threads,
            per_account,
            accounts: Mutex::new(HashMap::new()),
        }
    }

    /// Runs `job` on a blocking thread once `account` has one of its own
    /// permits and the pool one free, and returns its result. The permits go
    /// with the job: if the caller stops waiting (the client went away), the
    /// job still holds them until it ends, so the pool is never
    /// oversubscribed. A panic in `job` resumes in the caller, as if the job
    /// had run inline (the dispatcher turns it into `serverFail`).
    pub async fn run<T: Send + 'static>(
        &self,
        account: i64,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        // The semaphores are never closed, so acquiring cannot fail; were it
        // to, the job would run without a permit rather than not at all.
        let account_permit = self.account_slots(account).acquire_owned().await.ok();
        let thread_permit = self.threads.clone().acquire_owned().await.ok();
        let permits: (Option<OwnedSemaphorePermit>, Option<OwnedSemaphorePermit>) =
            (account_permit, thread_permit);
        let joined = tokio::task::spawn_blocking(move || {
            let _permits = permits;
            job()
        })
        .await;
        match joined {
            Ok(value) => value,
            Err(error) => match error.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                // Only when the runtime shuts down.
                Err(error) => panic!("a job on the work pool was cancelled: {error}"),
            },
        }
    }

    /// Heavy jobs running or admitted now, over every account.
    pub fn busy_threads(&self) -> usize {
        self.capacity() - self.threads.available_permits()
    }

    /// The pool's threads.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Heavy jobs one account may have at once.
    pub fn per_account(&self) -> usize {
        self.per_account
    }

    /// The account's semaphore, shared by every job of the account alive now;
    /// entries of accounts with no job left are dropped as the map grows.
    fn account_slots(&self, account: i64) -> Arc<Semaphore> {
        let mut accounts = self.accounts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slots) = accounts.get(&account).and_then(Weak::upgrade) {
            return slots;
        }
        if accounts.len() >= 1024 {
            accounts.retain(|_, slots| slots.strong_count() > 0);
        }
        let slots = Arc::new(Semaphore::new(self.per_account));
        accounts.insert(account, Arc::downgrade(&slots));
        slots
    }
}

/// What a render may still spend, in work units: one property of one email,
/// or one header field value (an `…:all` property of a field present 1,000
/// times is 1,000 units). Rendering checks before each unit, so a render
/// over its budget stops before doing the work.
#[derive(Debug)]
pub struct WorkMeter {
    left: std::cell::Cell<u64>,
}

/// The render would pass its work budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the render work budget is spent")]
pub struct WorkExceeded;

impl WorkMeter {
    /// A meter allowing `units`.
    pub fn new(units: u64) -> Self {
        Self {
            left: std::cell::Cell::new(units),
        }
    }

    /// Takes `units`, or fails leaving the meter spent (every later charge fails too).
    pub fn charge(&self, units: u64) -> Result<(), WorkExceeded> {
        match self.left.get().checked_sub(units) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.left.set(0);
                Err(WorkExceeded)
            }
        }
    }

    /// Units left.
    pub fn left(&self) -> u64 {
        self.left.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meter_refuses_what_it_cannot_pay_and_stays_spent() {
        let meter = WorkMeter::new(5);
        meter.charge(3).unwrap();
        assert_eq!(meter.left(), 2);
        assert_eq!(meter.charge(3), Err(WorkExceeded));
        assert_eq!(meter.charge(1), Err(WorkExceeded));
        assert_eq!(meter.left(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_account_holds_at_most_its_share_and_another_still_runs() {
        let pool = Arc::new(WorkPool::new(2, 1));
        assert_eq!((pool.capacity(), pool.per_account()), (2, 1));
        // Account 1 holds its one slot with a job that waits for a release.
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let first = tokio::spawn({
            let pool = pool.clone();
            async move { pool.run(1, move || wait.recv().is_ok()).await }
        });
        while pool.busy_threads() < 1 {
            tokio::task::yield_now().await;
        }
        // Its second job queues behind the first, holding no thread…
        let second = tokio::spawn({
            let pool = pool.clone();
            async move { pool.run(1, || 2).await }
        });
        // …while account 2 gets the other thread and finishes.
        assert_eq!(pool.run(2, || 3).await, 3);
        assert!(!first.is_finished() && !second.is_finished());
        assert_eq!(pool.busy_threads(), 1);
        release.send(()).unwrap();
        assert!(first.await.unwrap());
        assert_eq!(second.await.unwrap(), 2);
        assert_eq!(pool.busy_threads(), 0);
    }

    #[tokio::test]
    async fn a_panicking_job_panics_in_its_caller_and_frees_its_permits() {
        use futures::FutureExt;
        let pool = WorkPool::new(1, 1);
        let panicked =
            std::panic::AssertUnwindSafe(pool.run(1, || -> u8 { panic!("the job broke") }))
                .catch_unwind()
                .await
                .unwrap_err();
        assert_eq!(panicked.downcast_ref::<&str>(), Some(&"the job broke"));
        assert_eq!(pool.run(1, || 7).await, 7);
        assert_eq!(pool.busy_threads(), 0);
    }
}
