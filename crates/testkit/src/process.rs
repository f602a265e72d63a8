//! [`PeerProcess`]: a spawned peer in its own process group, killed (whole group) on drop.

use std::fmt;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 for a server a test starts: bound once and released,
/// and below the kernel's ephemeral range when there is room there. A port from that
/// range (what binding port 0 gives) can be taken by any outgoing connection of another
/// test before the server binds it (CI saw a Node server fail with `EADDRINUSE` so);
/// outgoing connections never take a port below it. Ports are picked at random and
/// never handed out twice by one process, so tests running at once rarely meet.
pub fn free_port() -> u16 {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let (low, high) = (10_000u16, ephemeral_start());
    if high > low + 1_000 {
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(port) = pick_port(low..high, given.get_or_insert_with(HashSet::new)) {
            return port;
        }
    }
    let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}

/// A port of `range` at random that is not in `given` and can be bound now (then
/// added to `given`); `None` after 200 tries.
fn pick_port(
    range: std::ops::Range<u16>,
    given: &mut std::collections::HashSet<u16>,
) -> Option<u16> {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new();
    let width = u64::from(range.end - range.start);
    for attempt in 0u64..200 {
        let mut h = random.build_hasher();
        h.write_u64(attempt);
        let port = range.start + (h.finish() % width) as u16;
        if given.contains(&port) || TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        given.insert(port);
        return Some(port);
    }
    None
}

/// The first port of the kernel's ephemeral range (32768 when it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// A running peer. Its process is the leader of its own process group; stdout and stderr
/// go to a temporary file ([`PeerProcess::stderr`]). On drop the whole group gets SIGKILL
/// and the child is reaped, so no test leaves a process behind — even when it panics.
pub struct PeerProcess {
    child: Child,
    pgid: i32,
    log: tempfile::NamedTempFile,
    name: String,
    killed: bool,
    /// The peer's MCP endpoint (`http://127.0.0.1:P/mcp` or `/sse`); empty for stdio.
    pub url: String,
    /// The TCP port the peer listens on (0 for none).
    pub port: u16,
}

impl fmt::Debug for PeerProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerProcess")
            .field("name", &self.name)
            .field("pid", &self.child.id())
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl PeerProcess {
    /// Spawn `command` in a new process group with stdin closed and stdout + stderr going
    /// to a temporary file. `name` is used in panic messages.
    ///
    /// # Panics
    /// When the program cannot be started.
    pub fn spawn(name: &str, mut command: Command) -> Self {
        let log = tempfile::Builder::new()
            .prefix(&format!("switchboard-peer-{}-", sanitize(name)))
            .suffix(".log")
            .tempfile()
            .expect("create a temp file for the peer's output");
        let out = log.reopen().expect("reopen peer log");
        let err = log.reopen().expect("reopen peer log");
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .process_group(0);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start peer {name} ({command:?}): {e}"));
        let pgid = i32::try_from(child.id()).expect("pid fits in i32");
        Self {
            child,
            pgid,
            log,
            name: name.to_owned(),
            killed: false,
            url: String::new(),
            port: 0,
        }
    }

    /// The child's process id (also its process-group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the peer wrote to stderr (and stdout) so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// `Some(status)` once the child has exited.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGKILL the whole process group and reap the child. Idempotent; also done on drop.
    /// Use it to simulate a server dying (connection refused, stream cut).
    pub fn kill(&mut self) {
        if self.killed {
            return;
        }
        self.killed = true;
        kill_group(self.pgid, libc::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Wait until `port` on 127.0.0.1 accepts TCP connections, at most `limit`.
    ///
    /// # Panics
    /// If the peer exits first or the limit passes; the message includes its output.
    pub async fn wait_for_port(&mut self, port: u16, limit: Duration) {
        if let Err(why) = self.listens_within(port, limit).await {
            panic!("{why}");
        }
    }

    /// Like [`wait_for_port`](Self::wait_for_port), but says why instead of panicking:
    /// the peer exited (with its output), or it did not listen in time (with its output
    /// and what `/proc` says it was doing: state, CPU time, where it waits).
    pub async fn listens_within(&mut self, port: u16, limit: Duration) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.try_wait() {
                return Err(format!(
                    "peer {} exited ({status}) before listening on 127.0.0.1:{port}\n--- output ---\n{}",
                    self.name,
                    self.stderr()
                ));
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            if start.elapsed() > limit {
                return Err(format!(
                    "peer {} did not listen on 127.0.0.1:{port} within {limit:?} ({})\n--- output ---\n{}",
                    self.name,
                    proc_state(self.child.id()),
                    self.stderr()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[allow(unsafe_code)]
fn kill_group(pgid: i32, signal: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) has no memory-safety preconditions; a negative pid names a group.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

/// Whether any process is still in process group `pgid` (`kill(-pgid, 0)` succeeds).
/// Zombies still count until they are reaped.
#[allow(unsafe_code)]
pub fn process_group_alive(pgid: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission; no memory is touched.
    let rc = unsafe { libc::kill(-pgid, 0) };
    if rc == 0 {
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Poll until process group `pgid` is gone, at most `limit`; returns whether it went.
pub fn wait_group_gone(pgid: i32, limit: Duration) -> bool {
    let start = Instant::now();
    loop {
        if !process_group_alive(pgid) {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What `/proc` says a process is doing, for a peer that did not start in time: its
/// state (`R` running, `S` sleeping, `D` in the kernel), user and system CPU time in
/// clock ticks, and the kernel function it waits in.
fn proc_state(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
    match (fields.first(), fields.get(11), fields.get(12)) {
        (Some(state), Some(utime), Some(stime)) => {
            format!("state {state}, CPU {utime}+{stime} ticks, waiting in `{wchan}`")
        }
        _ => "no /proc entry".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer that neither exits nor listens is reported with what it was doing; one
    /// that exits, with its exit status.
    #[tokio::test]
    async fn a_peer_that_does_not_listen_is_described() {
        let port = free_port();
        let mut sleeper = PeerProcess::spawn("sleeper", {
            let mut c = Command::new("sleep");
            c.arg("30");
            c
        });
        let why = sleeper
            .listens_within(port, Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(why.contains("did not listen"), "{why}");
        assert!(why.contains("state S"), "{why}");
        let mut quitter = PeerProcess::spawn("quitter", Command::new("true"));
        let why = quitter
            .listens_within(port, Duration::from_secs(10))
            .await
            .unwrap_err();
        assert!(why.contains("quitter exited"), "{why}");
    }

    #[test]
    fn free_ports_are_below_the_ephemeral_range_distinct_and_free() {
        let start = ephemeral_start();
        let ports: Vec<u16> = (0..300).map(|_| free_port()).collect();
        let distinct: std::collections::HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port was handed out twice");
        assert!(
            ports.iter().all(|p| *p < start),
            "{ports:?} against {start}"
        );
        // Each is free: a server can bind it.
        for p in &ports[..20] {
            TcpListener::bind(("127.0.0.1", *p)).unwrap();
        }
    }

    #[test]
    fn a_port_in_use_is_never_handed_out() {
        // Ten ports of which nine are held: the tenth is the only answer.
        let (base, held) = (0..50)
            .find_map(|_| {
                let base = free_port().min(30_000);
                let held: Result<Vec<TcpListener>, _> = (base..base + 9)
                    .map(|p| TcpListener::bind(("127.0.0.1", p)))
                    .collect();
                let tenth_free = TcpListener::bind(("127.0.0.1", base + 9)).is_ok();
                held.ok().filter(|_| tenth_free).map(|h| (base, h))
            })
            .expect("nine free ports in a row");
        let mut given = std::collections::HashSet::new();
        let port = pick_port(base..base + 10, &mut given);
        assert_eq!(port, Some(base + 9));
        // Handed out once: not again, and nothing else is left.
        assert_eq!(pick_port(base..base + 10, &mut given), None);
        drop(held);
    }
}
