//! Processes a test started: the worker binary, the CLI, servers.

use std::process::{Child, Command};

/// Sends SIGTERM to `child` (what systemd and Kubernetes send to stop a
/// worker gracefully); panics if it cannot be sent.
pub fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill(1) runs");
    assert!(status.success(), "SIGTERM to {} failed", child.id());
}

/// Stops `child` gracefully (SIGTERM) and reaps it; best effort, for the
/// end of a benchmark.
pub fn stop_process(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}
