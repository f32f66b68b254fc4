//! Loopback ports.
//!
//! A port the kernel hands out for `127.0.0.1:0` is free when it is handed
//! out, and no longer reserved once the listener is closed: another test
//! (or an outgoing connection, whose local port comes from the same range)
//! can take it before the server meant for it binds it. So a port from
//! here is a hint. Whoever starts a server on it must notice a failed bind
//! and try another port — [`crate::PrivateRedis::start`] does — or accept
//! that the test fails on that rare collision. Tests that need a port
//! nothing listens on (a dead address) use it as it is.

use std::net::TcpListener;

/// A loopback port free right now (see the module doc).
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct loopback ports free right now: all listeners are held open
/// together while they are chosen, so the ports differ from each other.
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free loopback port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("a bound listener").port())
        .collect()
}
