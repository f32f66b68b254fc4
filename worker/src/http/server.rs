//! Serving the admin API's connections, with the bounds `axum::serve`
//! does not offer (it exposes neither hyper's header-read timeout nor a
//! connection limit):
//!
//! - **a connection cap** (`admin.max_connections`, lowered to what the
//!   process's file-descriptor limit leaves: [`super::descriptors`]): at
//!   the cap, the next connection is accepted and the slowest connection
//!   is **shed** to make room — the one that has been sending its request
//!   (headers or body) for longest, or idle between requests for longest.
//!   A slow client cannot starve a probe: the probe's connection sheds one
//!   of them and is answered at once. Only when every connection has a
//!   request being answered does the next one wait, in the kernel's listen
//!   backlog (taking no file descriptor from this process, whose database
//!   and Redis connections need them);
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
//! The same server runs the probe listener (`admin.health_listen`), with
//! the probes' routes only and a cap of its own.
//!
//! Request-level bounds (timeouts, the long-poll limit, the body limit) are
//! tower layers on the routes (`limits`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::response::Response;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tracing::{debug, error, warn};

use crate::events::{ConnectionShed, InternalEvent};
use crate::settings::AdminSettings;

/// A connection is not shed before its client has had this long to send
/// its request: a client sends its headers as soon as it is connected, so
/// this spares every client but a slow one, and under a storm of clients
/// that reconnect as soon as they are shed it keeps each new connection
/// (a probe's) long enough to be served, instead of the whole set turning
/// over faster than a client can write.
const SHED_GRACE: Duration = Duration::from_millis(100);

/// Connections the kernel holds for the server before it accepts them
/// (it caps this at `net.core.somaxconn`, 4096 on current Linux). The
/// default of 128 is full under a flood of a few hundred reconnecting
/// clients, and the kernel then drops new connections' SYNs — a probe
/// among them waits for its retransmissions (1 s, 3 s, …) however fast
/// the server sheds.
const LISTEN_BACKLOG: u32 = 1024;

/// How often, at most, the server warns that it is shedding connections
/// (each one shed is counted in `compactor_http_connections_shed_total`).
const SHED_WARNING_EVERY: Duration = Duration::from_secs(60);

/// Longest a connection that ends after a refusal keeps reading (and
/// throwing away) what its client still sends, so the client gets to read
/// the answer rather than a reset.
const LINGER: Duration = Duration::from_secs(2);

/// The connection-level bounds of [`AdminServer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections served at once (the cap already lowered to what the
    /// file-descriptor limit leaves).
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
}

impl ConnectionLimits {
    /// The bounds `admin` sets (its cap already fitted:
    /// `descriptors::fit_to_process`).
    pub fn from_settings(admin: &AdminSettings) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: admin.max_connections,
            header_read_timeout: admin.header_read_timeout,
            idle_timeout: admin.idle_timeout,
        }
    }
}

/// The admin API (or the probe listener) bound to its address, not serving
/// yet (so the caller learns the address first: tests bind port 0).
pub struct AdminServer {
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    listener_kind: Listener,
}

/// Which of the worker's two listeners a server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// `admin.listen`: the whole API.
    Api,
    /// `admin.health_listen`: the probes and `/metrics` only.
    Probes,
    /// `proxy.listen`: the drop-in proxy.
    Proxy,
}

impl Listener {
    /// Its `listener` label.
    pub fn label(self) -> &'static str {
        match self {
            Listener::Api => "api",
            Listener::Probes => "probes",
            Listener::Proxy => "proxy",
        }
    }
}

impl std::fmt::Display for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Listener::Api => "admin API",
            Listener::Probes => "probe listener",
            Listener::Proxy => "drop-in proxy",
        })
    }
}

impl AdminServer {
    /// Binds `listen`, to serve `router` within `limits`.
    pub async fn bind(
        listener: Listener,
        listen: SocketAddr,
        router: Router,
        limits: ConnectionLimits,
    ) -> std::io::Result<AdminServer> {
        let socket = if listen.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        // As `TcpListener::bind` does: a restarted worker can bind the
        // port while the old one's connections are in TIME_WAIT.
        socket.set_reuseaddr(true)?;
        socket.bind(listen)?;
        Ok(AdminServer {
            listener: socket.listen(LISTEN_BACKLOG)?,
            router,
            limits,
            listener_kind: listener,
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
        let name = self.listener_kind;
        // One permit per open connection, released when its task ends.
        let slots = Arc::new(Semaphore::new(self.limits.max_connections));
        let open = Arc::new(OpenConnections::default());
        // Every connection task, so `serve` returns after the last one.
        let connections = TaskTracker::new();
        let mut last_warning: Option<Instant> = None;
        loop {
            let mut slot = Arc::clone(&slots).try_acquire_owned().ok();
            if slot.is_none() {
                // At the cap: accept the next connection once a slot frees,
                // or once a connection is waiting on its client (it will be
                // shed); until then it stays in the backlog.
                tokio::select! {
                    freed = Arc::clone(&slots).acquire_owned() => match freed {
                        Ok(freed) => slot = Some(freed),
                        Err(_) => break, // the semaphore is never closed
                    },
                    () = open.sheddable() => {}
                    () = stop.cancelled() => break,
                }
            }
            let accepted = tokio::select! {
                accepted = self.listener.accept() => accepted,
                () = stop.cancelled() => break,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of file descriptors, most likely: back off rather
                    // than spin on an accept that keeps failing (and shed
                    // nobody for a connection it cannot take).
                    error!(error = %e, "{name}: accept failed; retrying in 1s");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                        () = stop.cancelled() => break,
                    }
                }
            };
            let slot = match slot.or_else(|| Arc::clone(&slots).try_acquire_owned().ok()) {
                Some(slot) => slot,
                None => match open.shed_slowest() {
                    // The shed connection's slot passes to the new one at
                    // once (it closes a moment later: the reserve of
                    // descriptors covers the overlap), so admitting a
                    // connection at the cap costs no wait.
                    Some((slot, waited)) => {
                        ConnectionShed {
                            listener: name.label(),
                            waited,
                        }
                        .emit();
                        if last_warning.is_none_or(|at| at.elapsed() >= SHED_WARNING_EVERY) {
                            last_warning = Some(Instant::now());
                            warn!(
                                max_connections = self.limits.max_connections,
                                "{name}: at its connection limit; closing the connections \
                                 slowest to send a request to admit new ones \
                                 (counted in compactor_http_connections_shed_total)"
                            );
                        }
                        slot
                    }
                    // Every connection started a request meanwhile: the
                    // new one waits for the first to end.
                    None => tokio::select! {
                        freed = Arc::clone(&slots).acquire_owned() => match freed {
                            Ok(freed) => freed,
                            Err(_) => break,
                        },
                        () = stop.cancelled() => break,
                    },
                },
            };
            self.spawn(stream, peer, slot, &open, &connections, &stop);
        }
        connections.close();
        connections.wait().await;
        Ok(())
    }

    /// Serves an accepted connection in its own task, holding `slot`.
    fn spawn(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        slot: OwnedSemaphorePermit,
        open: &Arc<OpenConnections>,
        connections: &TaskTracker,
        stop: &CancellationToken,
    ) {
        let router = self.router.clone();
        let stop = stop.clone();
        let limits = self.limits;
        let entry = open.add(slot);
        connections.spawn(async move {
            serve_connection(stream, router, limits, stop, &entry).await;
            debug!(%peer, "admin connection closed");
            drop(entry);
        });
    }
}

/// The connections being served, so that at the cap the slowest can be
/// shed.
#[derive(Default)]
struct OpenConnections {
    next: AtomicU64,
    live: Mutex<HashMap<u64, Arc<Activity>>>,
    /// Told when a connection starts waiting on its client.
    waiting: Arc<tokio::sync::Notify>,
}

impl OpenConnections {
    /// Registers a new connection; it leaves the set when the entry drops.
    fn add(self: &Arc<Self>, slot: OwnedSemaphorePermit) -> Entry {
        self.add_started(slot, Instant::now())
    }

    /// [`OpenConnections::add`], of a connection accepted at `started`.
    fn add_started(self: &Arc<Self>, slot: OwnedSemaphorePermit, started: Instant) -> Entry {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new(started, slot, Arc::clone(&self.waiting)));
        self.lock().insert(id, Arc::clone(&activity));
        self.waiting.notify_waiters();
        Entry {
            id,
            activity,
            open: Arc::clone(self),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Activity>>> {
        // A panic while holding this lock leaves a plain map behind.
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Resolves once some connection has waited on its client for at least
    /// [`SHED_GRACE`].
    async fn sheddable(&self) {
        loop {
            let notified = self.waiting.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // The longest any connection has waited on its client.
            let longest = self
                .lock()
                .values()
                .filter(|a| a.waiting_on_client() && !a.shed.is_cancelled())
                .map(|a| a.client_turn_for())
                .max();
            match longest {
                Some(waited) if waited >= SHED_GRACE => return,
                Some(waited) => {
                    tokio::select! {
                        () = tokio::time::sleep(SHED_GRACE - waited) => {}
                        () = notified => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Sheds the connection that has waited longest on its client (for
    /// its request's headers or body, or between requests), if that is
    /// [`SHED_GRACE`] or more; returns its slot and how long it had waited.
    /// `None` when every connection has a request being answered or is
    /// within its grace.
    fn shed_slowest(&self) -> Option<(OwnedSemaphorePermit, Duration)> {
        let live = self.lock();
        let (activity, waited) = live
            .values()
            .filter(|a| a.waiting_on_client() && !a.shed.is_cancelled())
            .map(|a| (a, a.client_turn_for()))
            .max_by_key(|(_, waited)| *waited)
            .filter(|(_, waited)| *waited >= SHED_GRACE)?;
        activity.shed.cancel();
        let slot = activity.take_slot()?;
        Some((slot, waited))
    }
}

/// A connection's place in [`OpenConnections`].
struct Entry {
    id: u64,
    activity: Arc<Activity>,
    open: Arc<OpenConnections>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.open.lock().remove(&self.id);
        // Its slot, unless it was shed and the slot passed on.
        drop(self.activity.take_slot());
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
    entry: &Entry,
) {
    // Responses are small and written whole: no reason to wait for
    // Nagle's algorithm.
    let _ = stream.set_nodelay(true);
    let activity = Arc::clone(&entry.activity);
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
            () = activity.shed.cancelled() => {
                debug!("shedding a slow admin connection at the connection limit");
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

/// What the idle timeout and the shedding look at: requests in flight on
/// the connection, whether the client is still sending one, and when a
/// byte last moved on it.
struct Activity {
    started: Instant,
    /// Milliseconds since `started` of the last read or write that moved
    /// bytes.
    last_io_ms: AtomicU64,
    in_flight: AtomicUsize,
    /// Requests in flight whose body has not arrived whole.
    receiving: AtomicUsize,
    /// Milliseconds since `started` when the client's turn began: when
    /// the connection was accepted, or the last response was produced.
    client_turn_ms: AtomicU64,
    /// A response refused a request (4xx/5xx): its body may still be on
    /// its way, so the connection ends with a lingering close.
    refused: AtomicBool,
    /// Cancelled to shed the connection.
    shed: CancellationToken,
    /// The connection's slot under the cap, until it ends or is shed.
    slot: Mutex<Option<OwnedSemaphorePermit>>,
    /// Told when the connection starts waiting on its client.
    waiting: Arc<tokio::sync::Notify>,
}

impl Activity {
    fn new(
        started: Instant,
        slot: OwnedSemaphorePermit,
        waiting: Arc<tokio::sync::Notify>,
    ) -> Activity {
        Activity {
            started,
            last_io_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            receiving: AtomicUsize::new(0),
            client_turn_ms: AtomicU64::new(0),
            refused: AtomicBool::new(false),
            shed: CancellationToken::new(),
            slot: Mutex::new(Some(slot)),
            waiting,
        }
    }

    fn take_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn moved(&self) {
        self.last_io_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// The client is to send (its next request's headers, or the body of
    /// the one in flight): the server is not working for it.
    fn waiting_on_client(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) == 0 || self.receiving.load(Ordering::Relaxed) > 0
    }

    /// How long the client has had to send its current request.
    fn client_turn_for(&self) -> Duration {
        let began = Duration::from_millis(self.client_turn_ms.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(began)
    }

    /// A response was produced: the client's turn again.
    fn answered(&self) {
        self.client_turn_ms.store(self.now_ms(), Ordering::Relaxed);
        self.waiting.notify_waiters();
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
        self.0.answered();
    }
}

/// A request's body, noting when it has arrived whole (or was given up):
/// until then its connection counts as waiting on its client.
struct Receiving {
    inner: Incoming,
    activity: Option<Arc<Activity>>,
}

impl Receiving {
    fn new(inner: Incoming, activity: &Arc<Activity>) -> Receiving {
        let activity = (!http_body::Body::is_end_stream(&inner)).then(|| {
            activity.receiving.fetch_add(1, Ordering::Relaxed);
            Arc::clone(activity)
        });
        Receiving { inner, activity }
    }

    fn arrived(&mut self) {
        if let Some(activity) = self.activity.take() {
            activity.receiving.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Receiving {
    fn drop(&mut self) {
        self.arrived();
    }
}

impl http_body::Body for Receiving {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_))))
            || http_body::Body::is_end_stream(&self.inner)
        {
            self.arrived();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
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
        let request: Request = request.map(|body| Body::new(Receiving::new(body, &activity)));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(slots: &Arc<Semaphore>) -> OwnedSemaphorePermit {
        Arc::clone(slots).try_acquire_owned().unwrap()
    }

    /// A connection accepted a minute ago.
    fn accepted_a_minute_ago(open: &Arc<OpenConnections>, slots: &Arc<Semaphore>) -> Entry {
        let started = Instant::now().checked_sub(Duration::from_secs(60)).unwrap();
        open.add_started(slot(slots), started)
    }

    /// Its client's turn began `ago`.
    fn turn_began(entry: &Entry, ago: Duration) {
        let began = entry.activity.started.elapsed().saturating_sub(ago);
        let ms = u64::try_from(began.as_millis()).unwrap();
        entry.activity.client_turn_ms.store(ms, Ordering::Relaxed);
    }

    #[tokio::test]
    async fn the_connection_longest_on_its_clients_turn_is_shed_and_never_one_being_answered() {
        let slots = Arc::new(Semaphore::new(4));
        let open = Arc::new(OpenConnections::default());
        let answering = accepted_a_minute_ago(&open, &slots);
        let sending_body = accepted_a_minute_ago(&open, &slots);
        let between_requests = accepted_a_minute_ago(&open, &slots);
        let newest = open.add(slot(&slots));
        // The oldest turn of all, but its request is being answered.
        turn_began(&answering, Duration::from_secs(30));
        let _request = InFlight::start(&answering.activity);
        // A request in flight whose body is still arriving: the client's
        // turn, for 9 s.
        turn_began(&sending_body, Duration::from_secs(9));
        let _request_too = InFlight::start(&sending_body.activity);
        sending_body
            .activity
            .receiving
            .fetch_add(1, Ordering::Relaxed);
        // Idle between requests (or still sending headers) for 5 s.
        turn_began(&between_requests, Duration::from_secs(5));

        let (passed_on, waited) = open.shed_slowest().expect("one is waiting on its client");
        assert!(waited >= Duration::from_secs(9), "{waited:?}");
        assert!(sending_body.activity.shed.is_cancelled());
        assert!(!between_requests.activity.shed.is_cancelled());
        // Its slot passed on: it gives none back when its task ends.
        drop(sending_body);
        assert_eq!(slots.available_permits(), 0);
        drop(passed_on);
        assert_eq!(slots.available_permits(), 1);

        let (_, waited) = open.shed_slowest().expect("the next slowest");
        assert!(waited >= Duration::from_secs(5), "{waited:?}");
        assert!(between_requests.activity.shed.is_cancelled());
        assert!(
            open.shed_slowest().is_none(),
            "neither a connection whose request is being answered nor one \
             within its grace is shed"
        );
        assert!(!newest.activity.shed.is_cancelled());
        assert!(!answering.activity.shed.is_cancelled());
        // Each leaves the set when its task ends.
        drop((between_requests, newest));
        assert_eq!(open.lock().len(), 1);
    }

    #[tokio::test]
    async fn a_connection_is_sheddable_once_its_client_had_the_grace_to_send_a_request() {
        let open = Arc::new(OpenConnections::default());
        let entry = open.add(slot(&Arc::new(Semaphore::new(1))));
        let request = InFlight::start(&entry.activity);
        let waiting = tokio::spawn({
            let open = Arc::clone(&open);
            async move { open.sheddable().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "its request is being answered");
        // The response is produced: the client's turn, not slow yet.
        let answered = Instant::now();
        drop(request);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "within its grace");
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("sheddable once the grace is over")
            .unwrap();
        assert!(answered.elapsed() >= SHED_GRACE);
    }
}
