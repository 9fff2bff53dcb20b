//! The connection loop: hyper-util's HTTP/1 server under the axum router,
//! with the bounds of [`ConnectionLimits`] (axum::serve has none of them).
//!
//! - Header-read timeout: hyper's own (`header_read_timeout`). hyper starts
//!   it whenever it waits for a request head (after accept, and after each
//!   response on a kept-alive connection), so a connection that sends nothing
//!   or half a header is closed when it runs out.
//! - Idle timeout: each connection counts its requests in progress (from the
//!   request until its response body is sent or dropped) and notes when a
//!   byte last arrived; a connection with no request in progress and nothing
//!   arrived for `idle_timeout` is closed by its watchdog. A request in
//!   progress (an event-source stream, a long download) is never idle, and
//!   neither is a response still being written to a client that reads it
//!   slowly: while the socket refuses more octets, the connection is cut only
//!   after twice the header-read timeout with no octet accepted (a client
//!   that stops reading cannot hold it for ever, and one that pauses does
//!   not get a truncated response).
//! - Connection cap: a semaphore of `max_connections` permits, one per open
//!   connection. At the cap the connection idle the longest is shed for the
//!   new one; when every connection has a request in progress the accept
//!   loop waits for one to close (new clients wait in the listen backlog).
//!
//! Shutdown stops accepting, asks every connection to finish its request in
//! progress and close (hyper's graceful shutdown), and returns when all have
//! closed. Every connection gets TCP_NODELAY (JMAP responses are small) and
//! its peer address as axum's `ConnectInfo`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;

use crate::app::ConnectionLimits;

/// Serves `router` on `listener` within `limits` until `shutdown`
/// completes, then drains: every connection finishes its request in
/// progress and closes before this returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let max = limits
        .max_connections
        .clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
    let slots = Arc::new(Semaphore::new(max));
    let open = Arc::new(OpenConnections::default());
    let (stop, stopping) = watch::channel(false);
    let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors or a connection reset before
                    // accept: wait a moment rather than spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let permit = match slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                open.shed_longest_idle();
                tokio::select! {
                    () = &mut shutdown => break,
                    permit = slots.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let connection = open.add();
        tokio::spawn(serve_connection(
            builder.clone(),
            router.clone(),
            stream,
            peer,
            ConnectionTask {
                connection,
                open: open.clone(),
                idle_timeout: limits.idle_timeout,
                stall_timeout: limits
                    .header_read_timeout
                    .saturating_mul(2)
                    .max(limits.idle_timeout),
                stopping: stopping.clone(),
                _permit: permit,
            },
        ));
    }
    drop(listener);
    let _ = stop.send(true);
    // Every connection holds a permit until it has closed.
    let _ = slots.acquire_many(max as u32).await;
    Ok(())
}

/// What a connection task owns besides its socket.
struct ConnectionTask {
    connection: Arc<Connection>,
    open: Arc<OpenConnections>,
    idle_timeout: Duration,
    /// How long a response may wait on a client that reads none of it.
    stall_timeout: Duration,
    stopping: watch::Receiver<bool>,
    /// The connection's slot under the cap, released when the task ends.
    _permit: OwnedSemaphorePermit,
}

/// Serves one connection until it closes, is idle too long, is shed, or
/// (after a graceful close on shutdown) has finished its request.
async fn serve_connection(
    builder: Arc<auto::Builder<TokioExecutor>>,
    router: Router,
    stream: TcpStream,
    peer: SocketAddr,
    mut task: ConnectionTask,
) {
    let connection = task.connection.clone();
    let service = tower::service_fn(
        move |mut request: axum::http::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let in_progress = RequestInProgress::begin(connection.clone());
            let router = router.clone();
            async move {
                let response = router.oneshot(request.map(Body::new)).await?;
                // The request stays in progress until its body is sent or dropped.
                Ok::<_, Infallible>(response.map(|body| {
                    Body::new(body.map_frame(move |frame| {
                        let _still_in_progress = &in_progress;
                        frame
                    }))
                }))
            }
        },
    );
    let io = TokioIo::new(TrackedStream {
        inner: stream,
        connection: task.connection.clone(),
    });
    let served = builder.serve_connection(io, TowerToHyperService::new(service));
    tokio::pin!(served);
    let mut closing = *task.stopping.borrow();
    if closing {
        served.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            result = served.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                }
                break;
            }
            changed = task.stopping.changed(), if !closing => {
                closing = true;
                if changed.is_ok() {
                    served.as_mut().graceful_shutdown();
                }
            }
            () = task.connection.until_idle_for(task.idle_timeout, task.stall_timeout) => {
                tracing::debug!(%peer, "closing an idle connection");
                break;
            }
        }
    }
    task.open.remove(task.connection.id);
}

/// The open connections of one server, for shedding the idle one at the cap.
#[derive(Default)]
struct OpenConnections {
    next_id: AtomicU64,
    by_id: Mutex<HashMap<u64, Arc<Connection>>>,
}

impl OpenConnections {
    fn add(&self) -> Arc<Connection> {
        let connection = Arc::new(Connection {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            opened: Instant::now(),
            requests_in_progress: AtomicUsize::new(0),
            write_blocked: AtomicBool::new(false),
            last_activity_ms: AtomicU64::new(0),
            shed: Notify::new(),
        });
        self.lock().insert(connection.id, connection.clone());
        connection
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Closes the connection with no request in progress that has been
    /// quiet the longest, if there is one.
    fn shed_longest_idle(&self) {
        let open = self.lock();
        let idle = open
            .values()
            .filter(|c| {
                c.requests_in_progress.load(Ordering::Acquire) == 0
                    && !c.write_blocked.load(Ordering::Acquire)
            })
            .min_by_key(|c| c.opened + c.last_activity());
        if let Some(connection) = idle {
            tracing::debug!(
                connection = connection.id,
                "at the connection cap: shedding the longest idle connection"
            );
            connection.shed.notify_one();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Connection>>> {
        // A panic while holding this lock leaves the map consistent.
        self.by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The activity of one open connection.
struct Connection {
    id: u64,
    opened: Instant,
    requests_in_progress: AtomicUsize,
    /// The socket refused the last write (the client is not reading): the
    /// response is not yet sent, whatever hyper holds of it.
    write_blocked: AtomicBool,
    /// When a byte last arrived or was accepted for sending with no request
    /// in progress, a request began or ended, or the socket started or
    /// stopped refusing a response, in ms since `opened`.
    last_activity_ms: AtomicU64,
    /// Notified to close the connection at once (shed at the cap).
    shed: Notify,
}

impl Connection {
    fn in_request(&self) -> bool {
        self.requests_in_progress.load(Ordering::Acquire) > 0
    }

    fn touch(&self) {
        let now = self.opened.elapsed().as_millis() as u64;
        self.last_activity_ms.fetch_max(now, Ordering::Relaxed);
    }

    fn last_activity(&self) -> Duration {
        Duration::from_millis(self.last_activity_ms.load(Ordering::Relaxed))
    }

    /// Completes when the connection is shed, when it has had no request
    /// in progress and nothing arriving for `idle_timeout`, or when a
    /// response has waited on a client reading none of it for `stall_timeout`.
    async fn until_idle_for(&self, idle_timeout: Duration, stall_timeout: Duration) {
        loop {
            let wake = if self.write_blocked.load(Ordering::Acquire) {
                let deadline = self.opened + self.last_activity() + stall_timeout;
                if Instant::now() >= deadline {
                    return;
                }
                deadline.min(Instant::now() + idle_timeout)
            } else if self.requests_in_progress.load(Ordering::Acquire) > 0 {
                // Never idle while a request is in progress: look again later.
                Instant::now() + idle_timeout
            } else {
                let deadline = self.opened + self.last_activity() + idle_timeout;
                if Instant::now() >= deadline {
                    return;
                }
                deadline
            };
            tokio::select! {
                () = self.shed.notified() => return,
                () = tokio::time::sleep_until(wake.into()) => {}
            }
        }
    }
}

/// A request in progress on a connection, from its head until its response
/// body is sent or dropped.
struct RequestInProgress(Arc<Connection>);

impl RequestInProgress {
    fn begin(connection: Arc<Connection>) -> Self {
        connection
            .requests_in_progress
            .fetch_add(1, Ordering::AcqRel);
        connection.touch();
        Self(connection)
    }
}

impl Drop for RequestInProgress {
    fn drop(&mut self) {
        self.0.touch();
        self.0.requests_in_progress.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A TCP stream that notes on its connection when bytes arrive.
struct TrackedStream {
    inner: TcpStream,
    connection: Arc<Connection>,
}

impl AsyncRead for TrackedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        // While a request is in progress the connection is not idle
        // whatever arrives: no clock read per read then.
        if buf.filled().len() > before && !self.connection.in_request() {
            self.connection.touch();
        }
        result
    }
}

impl TrackedStream {
    /// Notes on the connection whether the socket took the write.
    fn note_write(&self, result: &Poll<io::Result<usize>>) {
        // The clock is read when the socket starts or stops refusing (the
        // stall's measure) and when no request is in progress (idleness),
        // not on every write.
        let connection = &self.connection;
        match result {
            Poll::Pending => {
                if !connection.write_blocked.swap(true, Ordering::AcqRel) {
                    connection.touch();
                }
            }
            Poll::Ready(Ok(written)) if *written > 0 => {
                if connection.write_blocked.swap(false, Ordering::AcqRel)
                    || !connection.in_request()
                {
                    connection.touch();
                }
            }
            Poll::Ready(_) => {}
        }
    }
}

impl AsyncWrite for TrackedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note_write(&result);
        result
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note_write(&result);
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
