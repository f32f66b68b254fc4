//! A Redis Cluster of three primaries on free loopback ports, for the
//! cluster tests (`tests/tests/it/cluster.rs`).
//!
//! Start-up: three `redis-server --cluster-enabled yes` on ports of their
//! own (their cluster-bus ports chosen too, so a data port near the top of
//! the range cannot overflow `port + 10000`), `redis-cli --cluster create …
//! --cluster-replicas 0`, then every node polled until it reports
//! `cluster_state:ok` (a node that says so has the whole slot map). A port
//! taken between choosing and binding it makes the attempt start over on
//! new ports.
//!
//! Clean-up: a `sh` reaper per cluster holds the read end of a pipe whose
//! write end only this process has; when the process ends, however it ends
//! (tests finished, a panic, SIGKILL), the pipe closes and the reaper kills
//! the servers and removes their directory. So [`RedisCluster::shared`],
//! which lives in a static that is never dropped, is cleaned up at exit,
//! and a cluster owned by a test is cleaned up on drop as well.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use compactor_producer::queue::{Keys, Queue, QueueConfig, QueueName};
use compactor_producer::settings::RedisSettings;

/// How many primaries.
pub const NODES: usize = 3;

/// A running cluster; its servers are killed and files removed on drop
/// (or at process exit, see the module docs).
pub struct RedisCluster {
    /// Data ports of the nodes, in creation order.
    pub ports: Vec<u16>,
    dir: PathBuf,
    nodes: Vec<Child>,
    reaper: Option<(Child, ChildStdin)>,
}

impl RedisCluster {
    /// The cluster of this test binary, started on first use. Tests that
    /// share it stay independent by using queue names of their own.
    pub fn shared() -> &'static RedisCluster {
        static SHARED: OnceLock<RedisCluster> = OnceLock::new();
        SHARED.get_or_init(RedisCluster::start)
    }

    /// A cluster of its own (a few seconds to start).
    pub fn start() -> RedisCluster {
        let mut last = String::new();
        for _ in 0..5 {
            match RedisCluster::try_start() {
                Ok(cluster) => return cluster,
                Err(why) => last = why,
            }
        }
        panic!("cannot start a Redis Cluster: {last}");
    }

    fn try_start() -> Result<RedisCluster, String> {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "compactor-cluster-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let free = compactor_testkit::ports::free_ports(2 * NODES);
        let (ports, bus_ports) = free.split_at(NODES);
        let mut cluster = RedisCluster {
            ports: ports.to_vec(),
            dir,
            nodes: Vec::new(),
            reaper: None,
        };
        for (port, bus) in ports.iter().zip(bus_ports) {
            let child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--cluster-port",
                    &bus.to_string(),
                ])
                .args(["--bind", "127.0.0.1", "--cluster-enabled", "yes"])
                .arg("--cluster-config-file")
                .arg(cluster.dir.join(format!("nodes-{port}.conf")))
                .arg("--dir")
                .arg(&cluster.dir)
                .arg("--logfile")
                .arg(cluster.dir.join(format!("redis-{port}.log")))
                .args(["--save", "", "--appendonly", "no"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("redis-server must be installed: {e}"))?;
            cluster.nodes.push(child);
        }
        cluster.start_reaper()?;
        for (i, port) in cluster.ports.clone().into_iter().enumerate() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                if let Ok(Some(status)) = cluster.nodes[i].try_wait() {
                    return Err(format!("redis-server on {port} exited: {status}"));
                }
                if Instant::now() > deadline {
                    return Err(format!("redis-server on {port} did not start"));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        for port in &cluster.ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        let output = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("redis-cli must be installed: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for port in cluster.ports.clone() {
            loop {
                let info = cluster_info(port).unwrap_or_default();
                if info.contains("cluster_state:ok") {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(format!("node {port} not ok: {info}"));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(cluster)
    }

    /// Starts the reaper of this cluster's servers and directory.
    fn start_reaper(&mut self) -> Result<(), String> {
        let mut reaper = Command::new("sh")
            .arg("-c")
            // EOF on stdin: this process is gone (or dropped the cluster).
            .arg(r#"cat >/dev/null; dir=$1; shift; kill -9 "$@" 2>/dev/null; rm -rf -- "$dir""#)
            .arg("reaper")
            .arg(&self.dir)
            .args(self.nodes.iter().map(|c| c.id().to_string()))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the reaper: {e}"))?;
        let stdin = reaper
            .stdin
            .take()
            .ok_or_else(|| "the reaper has no stdin".to_owned())?;
        self.reaper = Some((reaper, stdin));
        Ok(())
    }

    /// `redis://127.0.0.1:<port>` of node `i`.
    pub fn node_url(&self, i: usize) -> String {
        format!("redis://127.0.0.1:{}", self.ports[i])
    }

    /// Every node, comma-separated: the `[redis] url` of a cluster.
    pub fn url(&self) -> String {
        (0..NODES)
            .map(|i| self.node_url(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `[redis]` for this cluster.
    pub fn settings(&self) -> RedisSettings {
        RedisSettings {
            url: compactor_producer::settings::ConnectionUrl::new(self.url()),
            cluster: true,
        }
    }

    /// Index of the node that serves `key`'s slot.
    pub fn owner_of(&self, key: &str) -> usize {
        let mut conn = self.connection(0);
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut conn)
            .expect("CLUSTER KEYSLOT");
        let ranges: Vec<redis::Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut conn)
            .expect("CLUSTER SLOTS");
        // Each range: [start, end, [ip, port, id], replicas…].
        for range in ranges {
            let redis::Value::Array(fields) = range else {
                continue;
            };
            let int = |v: Option<&redis::Value>| match v {
                Some(redis::Value::Int(n)) => *n,
                _ => -1,
            };
            let (start, end) = (int(fields.first()), int(fields.get(1)));
            if !(start..=end).contains(&slot) {
                continue;
            }
            let Some(redis::Value::Array(primary)) = fields.get(2) else {
                continue;
            };
            let port = u16::try_from(int(primary.get(1))).expect("a port");
            return self
                .ports
                .iter()
                .position(|p| *p == port)
                .expect("a node of this cluster");
        }
        panic!("no node serves slot {slot}");
    }

    /// A queue name no other test uses, whose slot node `node` serves.
    pub fn queue_name_on(&self, node: usize, prefix: &str) -> QueueName {
        loop {
            let name = QueueName::parse(&crate::unique_name(prefix)).expect("a valid name");
            if self.owner_of(Keys::new(&name).prefix()) == node {
                return name;
            }
        }
    }

    /// A queue of this cluster named `name`, with `config`'s other settings.
    pub async fn queue(&self, name: &QueueName, config: QueueConfig) -> Queue {
        Queue::connect_with(
            &self.settings(),
            QueueConfig {
                name: name.clone(),
                ..config
            },
        )
        .await
        .expect("connects to the cluster")
    }

    /// A plain connection to node `i`.
    pub fn connection(&self, i: usize) -> redis::Connection {
        redis::Client::open(self.node_url(i))
            .expect("a URL")
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("the node answers")
    }

    /// Deletes every key of queue `name` (on whichever node holds them).
    pub fn delete_queue(&self, name: &QueueName) {
        crate::delete_queue_keys(&self.url(), name);
    }

    /// The log of node `i` (for failure messages).
    pub fn log(&self, i: usize) -> String {
        let mut out = String::new();
        if let Ok(mut f) =
            std::fs::File::open(self.dir.join(format!("redis-{}.log", self.ports[i])))
        {
            let _ = f.read_to_string(&mut out);
        }
        out
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        // Closing the pipe sets the reaper off: it kills the servers (not
        // waited for yet, so their pids cannot have been reused) and
        // removes the directory.
        if let Some((mut reaper, stdin)) = self.reaper.take() {
            drop(stdin);
            let _ = reaper.wait();
        } else {
            for node in &mut self.nodes {
                let _ = node.kill();
            }
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        for node in &mut self.nodes {
            let _ = node.wait();
        }
    }
}

/// `CLUSTER INFO` of the node on `port`.
fn cluster_info(port: u16) -> Option<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(1))
        .ok()?;
    redis::cmd("CLUSTER").arg("INFO").query(&mut conn).ok()
}
