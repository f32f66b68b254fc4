//! Redis for tests: the machine's server, shared by every test under
//! names of their own, and private servers for tests that stop Redis.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::names::unique_name;
use crate::ports::free_port;

/// The machine's Redis: `REDIS_URL`, else `redis://127.0.0.1:6379`.
pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A multiplexed connection to `url`, for poking at keys behind the
/// code under test.
pub async fn connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Deletes every key starting with `prefix` from the Redis at `url`.
/// Best effort and synchronous, for `Drop`: a server that is gone (a
/// test's private one, stopped) has nothing left to delete. `prefix` must
/// hold no glob characters (a queue's `{cq:<validated name>}:` does not).
pub fn delete_prefix(url: &str, prefix: &str) {
    let Ok(client) = redis::Client::open(url) else {
        return;
    };
    let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
        return;
    };
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(&mut conn)
        .unwrap_or_default();
    // In chunks: a benchmark's backlog is 100k keys.
    for chunk in keys.chunks(1_000) {
        let _: Result<(), _> = redis::cmd("DEL").arg(chunk).query(&mut conn);
    }
}

/// A `redis-server` of the test's own on loopback, for tests that stop
/// Redis under the code (killed on drop). Nothing is saved to disk unless
/// it is [`PrivateRedis::start_persistent`].
pub struct PrivateRedis {
    pub port: u16,
    child: Option<Child>,
    /// `requirepass`, if any.
    password: Option<String>,
    /// The AOF directory of a persistent server (removed on drop).
    dir: Option<PathBuf>,
}

/// How many ports [`PrivateRedis::start`] tries before it gives up.
const START_ATTEMPTS: usize = 10;

impl PrivateRedis {
    /// On a free port. A port from [`free_port`] can be taken before
    /// `redis-server` binds it (see [`crate::ports`]); the server then
    /// exits, or whoever took the port answers instead. Either is noticed —
    /// the server we started must answer with its own process id — and
    /// another port is tried.
    pub fn start() -> PrivateRedis {
        PrivateRedis::start_with(None, None)
    }

    /// On a free port, refusing clients that do not give `password`
    /// (`requirepass`), for tests of refused credentials.
    pub fn start_with_password(password: &str) -> PrivateRedis {
        PrivateRedis::start_with(Some(password.to_owned()), None)
    }

    /// On a free port, with AOF fsynced on every write in a directory of
    /// its own: killed and [started again](PrivateRedis::start_again), it
    /// comes back with every acknowledged write.
    pub fn start_persistent() -> PrivateRedis {
        let dir = std::env::temp_dir().join(unique_name("redis_aof"));
        std::fs::create_dir_all(&dir).expect("a directory for the AOF");
        PrivateRedis::start_with(None, Some(dir))
    }

    fn start_with(password: Option<String>, dir: Option<PathBuf>) -> PrivateRedis {
        let mut redis = PrivateRedis {
            port: 0,
            child: None,
            password,
            dir,
        };
        let mut last = String::new();
        for _ in 0..START_ATTEMPTS {
            redis.port = free_port();
            match redis.spawn() {
                Ok(()) => return redis,
                Err(why) => last = why,
            }
        }
        panic!("no private redis-server after {START_ATTEMPTS} ports: {last}");
    }

    /// On `port` (e.g. the port of one that was killed: Redis "coming
    /// back" where a worker expects it). Panics if it cannot bind it.
    pub fn start_on(port: u16) -> PrivateRedis {
        let mut redis = PrivateRedis {
            port,
            child: None,
            password: None,
            dir: None,
        };
        redis.spawn().unwrap_or_else(|why| panic!("{why}"));
        redis
    }

    /// Starts the server again after [`PrivateRedis::kill`], on the same
    /// port (and, persistent, the same data). Panics if it cannot bind it.
    pub fn start_again(&mut self) {
        self.kill();
        self.spawn().unwrap_or_else(|why| panic!("{why}"));
    }

    /// Runs `redis-server` on `self.port` and waits until it answers with
    /// its own pid; on failure the child is gone and `self.child` `None`.
    fn spawn(&mut self) -> Result<(), String> {
        let mut command = Command::new("redis-server");
        command.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"]);
        match &self.dir {
            Some(dir) => command
                .args([
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--save",
                    "",
                ])
                .arg("--dir")
                .arg(dir),
            None => command.args(["--save", "", "--appendonly", "no"]),
        };
        if let Some(password) = &self.password {
            command.args(["--requirepass", password]);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("redis-server must be installed for this test: {e}"))?;
        let pid = child.id();
        // Owned from here: on an early return, `kill` (or drop) reaps it.
        self.child = Some(child);
        let port = self.port;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return Err(format!("redis-server on port {port} exited: {status}"));
            }
            let failure = match server_pid(port, self.password.as_deref()) {
                Some(answered) if answered == pid => return Ok(()),
                Some(other) => format!("port {port} is another redis-server's (pid {other})"),
                None if Instant::now() > deadline => {
                    format!("redis-server on port {port} did not start")
                }
                None => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            };
            self.kill();
            return Err(failure);
        }
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url_for(port: u16) -> String {
        format!("redis://127.0.0.1:{port}")
    }

    pub fn url(&self) -> String {
        PrivateRedis::url_for(self.port)
    }

    /// Freezes the server (SIGSTOP): connections stay open and every
    /// command waits, as on a host that stalls, until [`PrivateRedis::thaw`].
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets a frozen server go on (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, which: &str) {
        let child = self.child.as_ref().expect("a running redis-server");
        let status = Command::new("kill")
            .args([which, &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {which} redis-server");
    }

    /// Kills the server (SIGKILL: no goodbye, no final fsync) and reaps it:
    /// Redis gone at once.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The `process_id` the Redis on `port` reports, if one answers (to
/// `password`, when given).
fn server_pid(port: u16, password: Option<&str>) -> Option<u32> {
    let url = match password {
        Some(password) => format!("redis://:{password}@127.0.0.1:{port}"),
        None => PrivateRedis::url_for(port),
    };
    let client = redis::Client::open(url).ok()?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_millis(200))
        .ok()?;
    let info: String = redis::cmd("INFO").arg("server").query(&mut conn).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
}
