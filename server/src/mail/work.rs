//! CPU-heavy read work off the async workers, bounded and fair (issue 13).
//!
//! - [`WorkPool`]: parsing and rendering beyond a small budget (a whole
//!   message parsed, a header block of more than [`INLINE_PARSE_BYTES`]
//!   split, an Email/get whose render work may pass [`INLINE_RENDER_WORK`])
//!   run on the pool's own threads, `threads` of them (one per core by
//!   default), so the async workers keep serving every other request. The
//!   threads run at a lower CPU priority (nice [`WORK_NICENESS`]): where
//!   they and the async workers want the same core, the kernel gives it to
//!   the async workers first, so a heavy parse never sits between another
//!   account and its list view; the heavy work gets every cycle the
//!   requests leave. Each account may hold at most `per_account` of those permits
//!   (half by default): one account's heavy requests queue behind each other
//!   and never fill the pool, so another account's heavy work still gets a
//!   thread. The list view (metadata, fast view, a few header properties)
//!   stays inline: no thread hop on the hot path.
//! - [`WorkMeter`]: what a render may still spend, in work units (one
//!   property of one email, one header field value); checked before each
//!   unit is rendered, so a request over its budget stops without doing the
//!   work (`requestTooLarge`).
//! - [`spawn_every`]: background work run at an interval (the delivery
//!   queue, blob garbage collection).

use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

/// Spawns a task that runs `run` every `every`, the first time at once (a
/// tick missed while a run was slow is delayed, not caught up), until the
/// task is aborted or the runtime ends. Each run gets its own future, so
/// `run` clones what it needs into it.
pub fn spawn_every<F, R>(every: Duration, mut run: F) -> JoinHandle<()>
where
    F: FnMut() -> R + Send + 'static,
    R: Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            run().await;
        }
    })
}

/// Header block octets split inline; a larger set of blocks is split on the pool.
pub const INLINE_PARSE_BYTES: usize = 64 << 10;

/// Estimated render work units done inline; more runs on the pool.
pub const INLINE_RENDER_WORK: u64 = 4_000;

/// The niceness of the pool's threads (setpriority(2); 0 is the default,
/// 19 the lowest priority): the kernel's scheduler then gives a shared core
/// to the async workers about nine times in ten.
pub const WORK_NICENESS: i32 = 10;

/// A bound per account: at most `per_account` permits of one account out at
/// once (its API requests, uploads, event streams or heavy jobs). An
/// account's semaphore lives exactly as long as a permit of it is out (the
/// map keeps a weak reference; a permit holds the semaphore), so it can never
/// be dropped and made anew while permits are out, which would let the
/// account past its bound; entries of accounts with no permit out are pruned
/// as the map grows.
pub struct AccountSlots {
    per_account: usize,
    /// Keyed by account id, the server's own numbers: hashed with Fx.
    accounts: Mutex<FxHashMap<i64, Weak<Semaphore>>>,
}

impl AccountSlots {
    /// At most `per_account` permits per account.
    pub fn new(per_account: usize) -> Self {
        Self {
            per_account,
            accounts: Mutex::new(FxHashMap::default()),
        }
    }

    /// The account's semaphore, shared by every permit of it out now.
    pub fn of(&self, account: i64) -> Arc<Semaphore> {
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

    /// A permit of the account now, or `None` when all of its are out.
    pub fn try_acquire(&self, account: i64) -> Option<OwnedSemaphorePermit> {
        self.of(account).try_acquire_owned().ok()
    }

    /// Permits of the account out now.
    pub fn in_use(&self, account: i64) -> usize {
        self.per_account - self.of(account).available_permits()
    }
}

/// A job of the pool, run on one of its threads.
type Job = Box<dyn FnOnce() + Send>;

/// The bounded pool heavy parsing and rendering run on; see the module doc.
pub struct WorkPool {
    /// Jobs to the pool's threads; dropping the pool closes it and the
    /// threads end.
    jobs: Mutex<std::sync::mpsc::Sender<Job>>,
    threads: Arc<Semaphore>,
    capacity: usize,
    per_account: usize,
    accounts: AccountSlots,
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
        let (sender, receiver) = std::sync::mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        for _ in 0..threads {
            let receiver = receiver.clone();
            // A thread that cannot be started leaves its permit unused: the
            // jobs queue for the others (at least one thread is needed).
            let _ = std::thread::Builder::new()
                .name("fastview-work".into())
                .spawn(move || work_thread(&receiver));
        }
        Self {
            jobs: Mutex::new(sender),
            threads: Arc::new(Semaphore::new(threads)),
            capacity: threads,
            per_account,
            accounts: AccountSlots::new(per_account),
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
        let account_permit = self.accounts.of(account).acquire_owned().await.ok();
        let thread_permit = self.threads.clone().acquire_owned().await.ok();
        let permits: (Option<OwnedSemaphorePermit>, Option<OwnedSemaphorePermit>) =
            (account_permit, thread_permit);
        let (done, result) = tokio::sync::oneshot::channel();
        let boxed: Job = Box::new(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            // Free before answering: the caller sees the pool as it left it.
            drop(permits);
            // The caller may have stopped waiting: nothing to tell then.
            let _ = done.send(outcome);
        });
        let sent = self
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(boxed);
        if sent.is_err() {
            panic!("the work pool has no thread left");
        }
        match result.await {
            Ok(Ok(value)) => value,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => panic!("a job on the work pool was dropped unrun"),
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
}

/// One thread of the pool: lowers its own CPU priority, then runs jobs
/// until the pool is dropped.
fn work_thread(jobs: &Mutex<std::sync::mpsc::Receiver<Job>>) {
    // On Linux, PRIO_PROCESS with no pid names the calling thread alone.
    // If it fails the thread keeps the default priority: the pool still
    // bounds the work.
    let _ = rustix::process::setpriority_process(None, WORK_NICENESS);
    loop {
        let job = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
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
    fn an_accounts_slots_live_while_a_permit_is_out_however_many_accounts_come() {
        let slots = AccountSlots::new(2);
        let held = [slots.try_acquire(1).unwrap(), slots.try_acquire(1).unwrap()];
        assert!(slots.try_acquire(1).is_none());
        // Thousands of other accounts come and go: the map is pruned, but
        // the semaphore with permits out is the same one.
        for account in 2..3_000 {
            drop(slots.try_acquire(account));
        }
        assert!(slots.try_acquire(1).is_none());
        assert_eq!(slots.in_use(1), 2);
        drop(held);
        assert_eq!(slots.in_use(1), 0);
        assert!(slots.try_acquire(1).is_some());
    }

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
    async fn jobs_run_at_the_lower_priority_and_the_caller_keeps_its_own() {
        let pool = WorkPool::new(1, 1);
        let caller = rustix::process::getpriority_process(None).unwrap();
        let job = pool
            .run(1, || rustix::process::getpriority_process(None))
            .await
            .unwrap();
        // At least WORK_NICENESS (more if the tests themselves run niced).
        assert!(
            job >= WORK_NICENESS && job >= caller,
            "job {job}, caller {caller}"
        );
        assert_eq!(rustix::process::getpriority_process(None).unwrap(), caller);
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
