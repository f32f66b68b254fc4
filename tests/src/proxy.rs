//! A TCP proxy the test controls, put between a process and a service (the
//! database, the LLM) to make the network misbehave on cue: pass traffic,
//! cut every connection and refuse new ones (a service gone), accept and
//! hold connections without an answer (a service hung), or pass traffic
//! late (a slow network).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How the proxy treats connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward both ways.
    Pass,
    /// Close every connection (open ones too) as soon as it is seen: a
    /// service that went away or resets connections.
    Cut,
    /// Accept and hold, forwarding nothing: a service that hangs.
    Hang,
    /// Forward both ways, each chunk this long after it arrived: a slow
    /// network (open connections too).
    Delay(Duration),
}

impl Mode {
    /// Whether traffic goes through, and how late.
    fn passes(self) -> Option<Duration> {
        match self {
            Mode::Pass => Some(Duration::ZERO),
            Mode::Delay(by) => Some(by),
            Mode::Cut | Mode::Hang => None,
        }
    }
}

/// The proxy; stops (and drops its connections) on drop.
pub struct ChaosProxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    task: JoinHandle<()>,
}

impl ChaosProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> ChaosProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let (mode, watching) = watch::channel(Mode::Pass);
        let task = tokio::spawn(accept(listener, upstream, watching));
        ChaosProxy { addr, mode, task }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn set(&self, mode: Mode) {
        let _ = self.mode.send(mode);
    }
}

impl Drop for ChaosProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, upstream: SocketAddr, mode: watch::Receiver<Mode>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                connections.spawn(serve(client, upstream, mode.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve(client: TcpStream, upstream: SocketAddr, mut mode: watch::Receiver<Mode>) {
    let current = *mode.borrow_and_update();
    match current {
        Mode::Cut => {
            // Linger 0: the peer sees a reset, not a polite close.
            let _ = client.set_zero_linger();
            return;
        }
        Mode::Hang => {
            // Hold it until the mode changes, then drop it.
            let _ = mode.changed().await;
            let _ = client.set_zero_linger();
            return;
        }
        Mode::Pass | Mode::Delay(_) => {}
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = pump(&mut client_read, &mut server_write, mode.clone());
    let down = pump(&mut server_read, &mut client_write, mode.clone());
    let cut = {
        let both = async { tokio::join!(up, down) };
        tokio::pin!(both);
        loop {
            tokio::select! {
                _ = &mut both => break false,
                changed = mode.changed() => {
                    if changed.is_err() {
                        break false;
                    }
                    if mode.borrow_and_update().passes().is_none() {
                        break true;
                    }
                }
            }
        }
    };
    if cut {
        // Cut open connections mid-flight: both peers see a reset.
        if let (Ok(client), Ok(server)) = (
            client_read.reunite(client_write),
            server_read.reunite(server_write),
        ) {
            let _ = client.set_zero_linger();
            let _ = server.set_zero_linger();
        }
    }
}

/// Copies `from` to `to` until either ends, each chunk as late as the mode
/// says when it arrives.
async fn pump(
    from: &mut tokio::net::tcp::OwnedReadHalf,
    to: &mut tokio::net::tcp::OwnedWriteHalf,
    mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let late = mode.borrow().passes().unwrap_or(Duration::ZERO);
        if !late.is_zero() {
            tokio::time::sleep(late).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
