//! The stdio transport: a child process in its own process group speaking
//! newline-delimited JSON-RPC on stdin/stdout.
//!
//! Invariants:
//! - the child is the leader of a new process group, so stopping it stops everything it
//!   started (no orphans): SIGTERM to the group, then SIGKILL after a grace period, both
//!   on [`ChildGuard::terminate`] and when the guard is dropped;
//! - stderr is captured line by line, logged at debug level, and the last lines are kept
//!   so that start-up failures can quote them;
//! - a line on stdout that is not JSON-RPC is not fatal: it is logged, remembered (so a
//!   start-up timeout can say "the server wrote malformed JSON"), and skipped; when it
//!   is a reply to one of our requests (found by [`EnvelopeScan`]: too deep to parse, say)
//!   that request fails at once with the reason instead of waiting for its timeout;
//! - stdout is framed by a [`LineFramer`]: one line (one message) is at most the
//!   server's `maxMessageBytes`; a longer one is scanned, not buffered, and fails its
//!   request with an error naming the server and the limit. The transport stays usable;
//! - a reply to a call of the connection's raw lane (`crate::raw`) goes to the lane, not
//!   to rmcp; when stdout ends (or the transport goes), the lane's waiting calls fail.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::Mutex as AsyncMutex;

use crate::error::ConnectError;
use crate::framing::{self, EnvelopeScan, Frame, LineFramer};
use crate::raw::RawLane;
use crate::target::StdioTarget;

const STDERR_LINES_KEPT: usize = 40;
const MAX_LINE_CHARS: usize = 500;
/// How many bytes one read from the server's stdout takes.
const READ_CHUNK: usize = 64 * 1024;

/// The last lines a server wrote to stderr, plus notes about bad stdout lines.
#[derive(Debug, Default)]
pub(crate) struct Diagnostics {
    stderr: VecDeque<String>,
    malformed_stdout: Option<String>,
}

pub(crate) type SharedDiagnostics = Arc<Mutex<Diagnostics>>;

pub(crate) fn stderr_tail(diag: &SharedDiagnostics) -> Vec<String> {
    match diag.lock() {
        Ok(d) => {
            let mut lines: Vec<String> = d.stderr.iter().cloned().collect();
            if let Some(bad) = &d.malformed_stdout {
                lines.push(format!("(stdout) malformed JSON-RPC line: {bad}"));
            }
            lines
        }
        Err(_) => Vec::new(),
    }
}

fn truncate(s: &str) -> String {
    if s.chars().count() <= MAX_LINE_CHARS {
        s.to_string()
    } else {
        let cut: String = s.chars().take(MAX_LINE_CHARS).collect();
        format!("{cut}…")
    }
}

/// Owns the child process; stops its whole process group when asked or dropped.
#[derive(Debug)]
pub struct ChildGuard {
    pgid: i32,
    child: AsyncMutex<Option<tokio::process::Child>>,
    done: std::sync::atomic::AtomicBool,
}

impl ChildGuard {
    /// The operating-system process id (also the process group id).
    pub fn pid(&self) -> i32 {
        self.pgid
    }

    /// The exit status, if the child has exited (does not wait).
    pub async fn try_exit_status(&self) -> Option<String> {
        let mut guard = self.child.lock().await;
        let child = guard.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => Some(describe_status(status)),
            _ => None,
        }
    }

    /// Waits up to `within` for the child to exit by itself.
    pub async fn wait_exit(&self, within: Duration) -> Option<String> {
        let mut guard = self.child.lock().await;
        let child = guard.as_mut()?;
        match tokio::time::timeout(within, child.wait()).await {
            Ok(Ok(status)) => Some(describe_status(status)),
            _ => None,
        }
    }

    /// Stops the process group: SIGTERM, then SIGKILL if it is still alive after `grace`.
    pub async fn terminate(&self, grace: Duration) {
        if self.done.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        signal_group(self.pgid, libc::SIGTERM);
        let mut guard = self.child.lock().await;
        if let Some(child) = guard.as_mut()
            && tokio::time::timeout(grace, child.wait()).await.is_err()
        {
            signal_group(self.pgid, libc::SIGKILL);
            let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
        }
        // Whatever the leader did, leftovers of the group get the final word.
        if group_alive(self.pgid) {
            signal_group(self.pgid, libc::SIGKILL);
        }
        guard.take();
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.done.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let pgid = self.pgid;
        signal_group(pgid, libc::SIGTERM);
        if let Ok(mut slot) = self.child.try_lock()
            && let Some(mut child) = slot.take()
        {
            // Reap if it already went; otherwise tokio's orphan reaper takes it.
            let _ = child.try_wait();
        }
        if group_alive(pgid) {
            // Escalate without blocking the dropping thread.
            let _ = std::thread::Builder::new()
                .name("switchboard-reaper".into())
                .spawn(move || {
                    for _ in 0..20 {
                        std::thread::sleep(Duration::from_millis(50));
                        if !group_alive(pgid) {
                            return;
                        }
                    }
                    signal_group(pgid, libc::SIGKILL);
                });
        }
    }
}

#[allow(unsafe_code)]
fn signal_group(pgid: i32, sig: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}

#[allow(unsafe_code)]
fn group_alive(pgid: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

fn describe_status(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        format!("exit status {code}")
    } else if let Some(sig) = status.signal() {
        format!("killed by signal {sig}")
    } else {
        status.to_string()
    }
}

/// A client transport over a child's stdin/stdout.
pub(crate) struct StdioTransport {
    stdin: SharedStdin,
    stdout: ChildStdout,
    framer: LineFramer,
    frames: VecDeque<Frame>,
    chunk: Vec<u8>,
    eof: bool,
    max_message_bytes: usize,
    diag: SharedDiagnostics,
    server: Arc<str>,
    lane: Arc<RawLane>,
    _guard: Arc<ChildGuard>,
}

/// The server's stdin, shared by rmcp's messages and the raw lane's; `None` once closed.
pub(crate) type SharedStdin = Arc<AsyncMutex<Option<ChildStdin>>>;

/// Writes one whole line (ending in `\n`) to the server's stdin and flushes it; a
/// stdin already closed is `NotConnected`.
pub(crate) async fn write_line(stdin: &SharedStdin, line: &[u8]) -> std::io::Result<()> {
    let mut guard = stdin.lock().await;
    let pipe = guard
        .as_mut()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotConnected, "closed"))?;
    pipe.write_all(line).await?;
    pipe.flush().await
}

/// What [`spawn`] starts: the transport for rmcp, the raw lane beside it, the process
/// and what it wrote to stderr.
pub(crate) struct Spawned {
    pub transport: StdioTransport,
    pub lane: Arc<RawLane>,
    pub guard: Arc<ChildGuard>,
    pub diag: SharedDiagnostics,
}

/// Spawns the server process and wires its pipes; one message from it may be at most
/// `max_message_bytes` long.
pub(crate) fn spawn(
    server: &str,
    target: &StdioTarget,
    max_message_bytes: usize,
) -> Result<Spawned, ConnectError> {
    let mut cmd = tokio::process::Command::new(&target.program);
    cmd.args(&target.args)
        .env_clear()
        .envs(target.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false);
    if let Some(cwd) = &target.cwd {
        cmd.current_dir(cwd);
    }
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            match &target.cwd {
                Some(cwd) if !cwd.is_dir() => ConnectError::Spawn {
                    command: target.program.clone(),
                    source: std::io::Error::new(
                        e.kind(),
                        format!("working directory {} does not exist", cwd.display()),
                    ),
                },
                _ => ConnectError::CommandNotFound {
                    command: target.program.clone(),
                },
            }
        } else {
            ConnectError::Spawn {
                command: target.program.clone(),
                source: e,
            }
        }
    })?;
    let pid = child.id().map(|p| p as i32).unwrap_or(0);
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(ConnectError::Spawn {
            command: target.program.clone(),
            source: std::io::Error::other("child pipes were not available"),
        });
    };
    let diag: SharedDiagnostics = Arc::default();
    let server: Arc<str> = Arc::from(server);
    {
        let diag = diag.clone();
        let server = server.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "switchboard::server_stderr", server = %server, "{line}");
                if let Ok(mut d) = diag.lock() {
                    if d.stderr.len() == STDERR_LINES_KEPT {
                        d.stderr.pop_front();
                    }
                    d.stderr.push_back(truncate(&line));
                }
            }
        });
    }
    let guard = Arc::new(ChildGuard {
        pgid: pid,
        child: AsyncMutex::new(Some(child)),
        done: std::sync::atomic::AtomicBool::new(false),
    });
    let stdin = Arc::new(AsyncMutex::new(Some(stdin)));
    let lane = Arc::new(RawLane::new(server.clone(), stdin.clone()));
    let transport = StdioTransport {
        stdin,
        stdout,
        framer: LineFramer::new(max_message_bytes),
        frames: VecDeque::new(),
        chunk: vec![0; READ_CHUNK],
        eof: false,
        max_message_bytes,
        diag: diag.clone(),
        server,
        lane: lane.clone(),
        _guard: guard.clone(),
    };
    Ok(Spawned {
        transport,
        lane,
        guard,
        diag,
    })
}

impl StdioTransport {
    /// The message a frame stands for: the server's own, an error standing in for a
    /// reply that could not be read, or nothing (a skipped line).
    fn message(&self, frame: Frame) -> Option<RxJsonRpcMessage<RoleClient>> {
        let line = match frame {
            // A reply to a raw call goes to the lane; everything else to rmcp.
            Frame::Message(line) => self.lane.take_reply(line)?,
            Frame::Oversized { envelope, bytes } => {
                let text = framing::oversized_message(&self.server, bytes, self.max_message_bytes);
                tracing::warn!(server = %self.server, "{text}");
                if let Ok(mut d) = self.diag.lock() {
                    d.malformed_stdout = Some(format!(
                        "a message over the {} limit",
                        framing::human_bytes(self.max_message_bytes)
                    ));
                }
                let id = envelope.reply_id()?;
                if self.lane.fail_unreadable(id, text.clone()) {
                    return None;
                }
                return framing::stand_in(id, text);
            }
        };
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            return None;
        }
        match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(trimmed) {
            Ok(msg) => Some(msg),
            Err(e) => {
                let shown = truncate(&String::from_utf8_lossy(trimmed));
                tracing::debug!(
                    server = %self.server,
                    "skipping a stdout line that is not JSON-RPC ({e}): {shown}"
                );
                if let Ok(mut d) = self.diag.lock() {
                    d.malformed_stdout = Some(shown);
                }
                let envelope = EnvelopeScan::of(trimmed);
                let id = envelope.reply_id()?;
                let text = framing::unreadable_message(&self.server, &e.to_string());
                if self.lane.fail_unreadable(id, text.clone()) {
                    return None;
                }
                framing::stand_in(id, text)
            }
        }
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // Nothing reads the server's replies any more.
        self.lane.close();
    }
}

impl Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = self.stdin.clone();
        async move {
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            write_line(&stdin, &line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            while let Some(frame) = self.frames.pop_front() {
                if let Some(message) = self.message(frame) {
                    return Some(message);
                }
            }
            if self.eof {
                self.lane.close();
                return None;
            }
            let mut frames = Vec::new();
            match self.stdout.read(&mut self.chunk).await {
                Ok(0) => {
                    self.eof = true;
                    self.framer.finish(&mut frames);
                }
                Ok(n) => self.framer.push(&self.chunk[..n], &mut frames),
                Err(e) => {
                    tracing::warn!(server = %self.server, "reading server stdout failed: {e}");
                    self.lane.close();
                    return None;
                }
            }
            self.frames.extend(frames);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Closing stdin is the polite way to ask a stdio server to exit.
        self.stdin.lock().await.take();
        Ok(())
    }
}
