//! Serving the admin API's connections, with the bounds `axum::serve`
//! does not offer (it exposes neither hyper's header-read timeout nor a
//! connection limit):
//!
//! - **a connection limit** (`admin.max_connections`): a semaphore acquired
//!   before `accept`, as mini-redis does. At the limit the server stops
//!   accepting and new connections wait in the kernel's listen backlog,
//!   taking no file descriptor from this process (whose database and Redis
//!   connections need them);
//! - **a header-read timeout** (`admin.header_read_timeout`, hyper's own):
//!   a request's headers must be complete within it, counted from when the
//!   server starts waiting for them — so a client that trickles them a byte
//!   at a time (slowloris), or keeps a keep-alive connection idle, frees
//!   its slot;
//! - **an idle timeout** (`admin.idle_timeout`): a connection with no
//!   request in flight on which no byte moves for this long is closed (a
//!   client that stopped reading its response). A long poll in flight is
//!   quiet by design and is bounded by its own timeout instead;
//! - **a lingering close** after a refusal: a request refused before its
//!   body was read (413, 401, …) ends the connection, and closing a socket
//!   with unread data makes the kernel send a reset, which most clients —
//!   still busy sending the body — report as a network error instead of the
//!   answer. So the write side is closed first (the client sees the answer
//!   and its end), and what the client still sends is thrown away for at
//!   most [`LINGER`] before the socket is closed — after the answer, never
//!   before it (as nginx's `lingering_close`).
//!
//! Request-level bounds (timeouts, the long-poll limit, the body limit) are
//! tower layers on the routes (`limits`).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tracing::{debug, error};

use super::AppState;
use crate::settings::AdminSettings;

/// Longest a connection that ends after a refusal keeps reading (and
/// throwing away) what its client still sends, so the client gets to read
/// the answer rather than a reset.
const LINGER: Duration = Duration::from_secs(2);

/// The connection-level bounds of [`AdminServer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
}

impl ConnectionLimits {
    pub fn from_settings(admin: &AdminSettings) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: admin.max_connections,
            header_read_timeout: admin.header_read_timeout,
            idle_timeout: admin.idle_timeout,
        }
    }
}

/// The admin API bound to its address, not serving yet (so the caller
/// learns the address first: tests bind port 0).
pub struct AdminServer {
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
}

impl AdminServer {
    /// Binds `admin.listen`, with the routes and bounds `admin` sets.
    pub async fn bind(admin: &AdminSettings, state: AppState) -> std::io::Result<AdminServer> {
        let listener = TcpListener::bind(admin.listen).await?;
        Ok(AdminServer {
            listener,
            router: super::router(state, admin),
            limits: ConnectionLimits::from_settings(admin),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` is cancelled, then stops accepting, lets the
    /// requests in flight finish (idle keep-alive connections are closed at
    /// once) and returns when every connection is closed.
    pub async fn serve(self, stop: CancellationToken) -> std::io::Result<()> {
        // One permit per open connection: acquired before accepting,
        // released when the connection's task ends.
        let slots = Arc::new(Semaphore::new(self.limits.max_connections));
        // Every connection task, so `serve` returns after the last one.
        let connections = TaskTracker::new();
        loop {
            let slot = tokio::select! {
                slot = Arc::clone(&slots).acquire_owned() => match slot {
                    Ok(slot) => slot,
                    // The semaphore is never closed.
                    Err(_) => break,
                },
                () = stop.cancelled() => break,
            };
            let accepted = tokio::select! {
                accepted = self.listener.accept() => accepted,
                () = stop.cancelled() => break,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of file descriptors, most likely: back off rather
                    // than spin on an accept that keeps failing.
                    error!(error = %e, "admin API: accept failed; retrying in 1s");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                        () = stop.cancelled() => break,
                    }
                }
            };
            let router = self.router.clone();
            let stop = stop.clone();
            let limits = self.limits;
            connections.spawn(async move {
                serve_connection(stream, router, limits, stop).await;
                debug!(%peer, "admin connection closed");
                drop(slot);
            });
        }
        connections.close();
        connections.wait().await;
        Ok(())
    }
}

/// Errors of one incoming connection (it went away before it was
/// accepted), not of the listener.
fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// Serves one connection (HTTP/1.1, keep-alive) until the client closes
/// it, a timeout closes it, or `stop` asks it to finish its request.
async fn serve_connection(
    stream: TcpStream,
    router: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    // Responses are small and written whole: no reason to wait for
    // Nagle's algorithm.
    let _ = stream.set_nodelay(true);
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Tracked {
        inner: stream,
        activity: Arc::clone(&activity),
    });
    let service = ConnectionService {
        router,
        activity: Arc::clone(&activity),
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let mut connection = builder.serve_connection(io, service);
    let idle = Arc::clone(&activity).idle_for(limits.idle_timeout);
    tokio::pin!(idle);
    let mut stopping = false;
    // Served without hyper's own shutdown of the socket, so a refusal can
    // end in a lingering close.
    loop {
        tokio::select! {
            served = std::future::poll_fn(|cx| connection.poll_without_shutdown(cx)) => {
                match served {
                    Ok(()) if activity.refused.load(Ordering::Relaxed) => {
                        linger(connection.into_parts().io.into_inner()).await;
                    }
                    Ok(()) => {}
                    Err(e) => debug!(error = %e, "admin connection ended with an error"),
                }
                return;
            }
            () = &mut idle => {
                debug!(
                    idle_timeout_ms = crate::telemetry::millis(limits.idle_timeout),
                    "closing an idle admin connection"
                );
                return;
            }
            () = stop.cancelled(), if !stopping => {
                stopping = true;
                Pin::new(&mut connection).graceful_shutdown();
            }
        }
    }
}

/// Closes a connection after a refusal: the write side at once, then reads
/// and drops what the client still sends until it closes too, for at most
/// [`LINGER`].
async fn linger(mut stream: Tracked) {
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut discard = vec![0u8; 64 * 1024];
    let _ = tokio::time::timeout(LINGER, async {
        while let Ok(n) = stream.read(&mut discard).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

/// What the idle timeout looks at: requests in flight on the connection,
/// and when a byte last moved on it.
struct Activity {
    started: Instant,
    /// Milliseconds since `started` of the last read or write that moved
    /// bytes.
    last_io_ms: AtomicU64,
    in_flight: AtomicUsize,
    /// A response refused a request (4xx/5xx): its body may still be on
    /// its way, so the connection ends with a lingering close.
    refused: AtomicBool,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            started: Instant::now(),
            last_io_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            refused: AtomicBool::new(false),
        }
    }

    fn moved(&self) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_io_ms.store(now, Ordering::Relaxed);
    }

    fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_io_ms.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last)
    }

    /// Resolves once no request has been in flight and no byte has moved
    /// for `limit`.
    async fn idle_for(self: Arc<Self>, limit: Duration) {
        loop {
            let quiet = self.quiet_for();
            if quiet >= limit && self.in_flight.load(Ordering::Relaxed) == 0 {
                return;
            }
            // Look again when the quiet spell could first reach the limit.
            let next = limit.saturating_sub(quiet).max(Duration::from_millis(10));
            tokio::time::sleep(next).await;
        }
    }
}

/// Counts a request in flight until dropped (when its response future
/// ends: the body is then being written, which counts as I/O).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(activity))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.0.moved();
    }
}

/// The router as hyper's per-connection service, counting requests in
/// flight.
#[derive(Clone)]
struct ConnectionService {
    router: Router,
    activity: Arc<Activity>,
}

impl hyper::service::Service<hyper::Request<Incoming>> for ConnectionService {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let in_flight = InFlight::start(&self.activity);
        let activity = Arc::clone(&self.activity);
        let router = self.router.clone();
        let request: Request = request.map(Body::new);
        Box::pin(async move {
            let response = router.oneshot(request).await;
            if let Ok(response) = &response {
                if response.status().is_client_error() || response.status().is_server_error() {
                    activity.refused.store(true, Ordering::Relaxed);
                }
            }
            drop(in_flight);
            response
        })
    }
}

/// The socket, noting every read and write that moves bytes.
struct Tracked {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.moved();
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.moved();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.moved();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
