//! The stdio transport: a child process in its own process group speaking
//! newline-delimited JSON-RPC on stdin/stdout.
//!
//! Invariants:
//! - the child is the leader of a new process group, so stopping it stops everything it
//!   started (no orphans): SIGTERM to the group, then SIGKILL after a grace period, both
//!   on [`ChildGuard::terminate`] and when the guard is dropped (then SIGTERM at once and
//!   SIGKILL after 1 s, from a thread of its own). A closed connection first closes stdin
//!   and gives the server the grace period to exit on its own, as MCP's stdio shutdown
//!   asks (`Connection::close`);
//! - stderr is captured line by line, logged at debug level, and the last 40 lines are kept
//!   so that start-up failures can quote them; once the transport is dropped it is read
//!   for [`STDERR_GRACE`] more (a dying server's last lines), then let go, so a
//!   grandchild that keeps stderr open cannot keep the reading task;
//! - a line on stdout that is not JSON-RPC is not fatal: it is logged, remembered (so a
//!   start-up timeout can say "the server wrote malformed JSON"), and skipped; when it
//!   is a reply to one of our requests (found by [`EnvelopeScan`]: too deep to parse, say)
//!   that request fails at once with the reason instead of waiting for its timeout;
//! - stdout is read by a thread of its own (asleep in `poll` until the server writes,
//!   so a reply reaches its raw call without waking the runtime: see `crate::raw`)
//!   and framed by a
//!   [`LineFramer`]: one line (one message) is at most the server's `maxMessageBytes`;
//!   a longer one is scanned, not buffered, and fails its request with an error naming
//!   the server and the limit. The transport stays usable. The thread hands the frames
//!   of each read to rmcp as one batch, through a channel of [`BATCHES_QUEUED`]: at
//!   most that many reads (each at most 64 KiB plus one message) wait, and a flood of
//!   small messages costs one wake-up per read, not per message. It ends when stdout
//!   ends, when rmcp's side is gone, or when the transport is dropped (it polls a stop
//!   descriptor beside stdout, so a grandchild of the server that keeps its stdout
//!   open cannot keep the thread);
//! - a reply to a call of the connection's raw lane (`crate::raw`) goes to the lane on
//!   that thread, not to rmcp; when stdout ends (or the transport goes), the lane's
//!   waiting calls fail;
//! - stdin is a [`LineSink`]: rmcp's messages and the raw lane's calls, never
//!   interleaved, the lane's written from any thread without blocking.

use std::collections::VecDeque;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::Mutex as AsyncMutex;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::error::ConnectError;
use crate::framing::{self, EnvelopeScan, Frame, LineFramer};
use crate::line_sink::{LineSink, WriteNow};
use crate::raw::RawLane;
use crate::target::StdioTarget;

const STDERR_LINES_KEPT: usize = 40;
/// How long stderr is still read after the transport is dropped.
pub(crate) const STDERR_GRACE: Duration = Duration::from_secs(1);
const MAX_LINE_CHARS: usize = 500;
/// How many bytes one read from the server's stdout takes.
const READ_CHUNK: usize = 64 * 1024;
/// How many reads' frames the stdout thread hands on before it waits for rmcp.
pub(crate) const BATCHES_QUEUED: usize = 4;
/// The stdout thread's stack: the envelope of a reply is parsed there (serde_json
/// stops at 128 levels of nesting).
const READER_STACK: usize = 256 * 1024;

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
    batches: mpsc::Receiver<Vec<Frame>>,
    frames: VecDeque<Frame>,
    max_message_bytes: usize,
    diag: SharedDiagnostics,
    server: Arc<str>,
    lane: Arc<RawLane>,
    /// Ends the stdout thread when the transport goes.
    _stop: Stop,
    /// Ends the stderr task [`STDERR_GRACE`] after the transport goes.
    _stderr: DropGuard,
    _guard: Arc<ChildGuard>,
}

/// The server's stdin, shared by rmcp's messages and the raw lane's.
pub(crate) type SharedStdin = Arc<LineSink<ChildStdin>>;

impl WriteNow for ChildStdin {
    #[allow(unsafe_code)]
    fn write_now(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // SAFETY: the descriptor is the pipe this `ChildStdin` owns (non-blocking: see
        // `spawn`), and `buf` is valid for `buf.len()` bytes.
        let n = unsafe { libc::write(self.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

/// Sets or clears `O_NONBLOCK` on a descriptor only this process holds.
#[allow(unsafe_code)]
fn set_nonblocking(fd: i32, on: bool) -> std::io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL on a live descriptor change only its status flags.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let flags = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        if libc::fcntl(fd, libc::F_SETFL, flags) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Reads the server's stderr into `diag` (the last [`STDERR_LINES_KEPT`] lines) until it
/// ends, or until [`STDERR_GRACE`] after `stop` fires.
async fn read_stderr(
    stderr: tokio::process::ChildStderr,
    diag: SharedDiagnostics,
    server: Arc<str>,
    stop: CancellationToken,
) {
    let keep = |line: &str| {
        tracing::debug!(target: "switchboard::server_stderr", server = %server, "{line}");
        if let Ok(mut d) = diag.lock() {
            if d.stderr.len() == STDERR_LINES_KEPT {
                d.stderr.pop_front();
            }
            d.stderr.push_back(truncate(line));
        }
    };
    let mut lines = BufReader::new(stderr).lines();
    // `next_line` is cancel-safe: a line cut by `stop` is read whole by the drain below.
    loop {
        tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(line)) => keep(&line),
                _ => return,
            },
            () = stop.cancelled() => break,
        }
    }
    let drain = async {
        while let Ok(Some(line)) = lines.next_line().await {
            keep(&line);
        }
    };
    let _ = tokio::time::timeout(STDERR_GRACE, drain).await;
}

/// Tells the stdout thread to end (an `eventfd`), when dropped.
struct Stop(Arc<OwnedFd>);

impl Stop {
    #[allow(unsafe_code)]
    fn new() -> std::io::Result<Self> {
        // SAFETY: eventfd(2) returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(Self(Arc::new(unsafe {
            <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd)
        })))
    }
}

impl Drop for Stop {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        let one: u64 = 1;
        // SAFETY: an 8-byte write from a live u64 to a live eventfd.
        unsafe {
            libc::write(self.0.as_raw_fd(), (&raw const one).cast(), 8);
        }
    }
}

/// Waits until `fd` has something to read (data, end, or an error): `false` when
/// `stop` fired first.
#[allow(unsafe_code)]
fn readable(fd: &impl AsRawFd, stop: &OwnedFd) -> bool {
    let mut fds = [
        libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: two valid pollfds, for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // Let `read` report what is wrong.
            return true;
        }
        return fds[1].revents == 0;
    }
}

/// The server's stdout, on its own thread: frames it, gives replies to raw calls to
/// the lane and everything else to `frames`, and closes the lane when it ends.
fn read_stdout(
    stdout: OwnedFd,
    stop: Arc<OwnedFd>,
    mut framer: LineFramer,
    lane: Arc<RawLane>,
    batches: mpsc::Sender<Vec<Frame>>,
    server: Arc<str>,
) {
    let mut stdout = std::fs::File::from(stdout);
    let mut chunk = vec![0; READ_CHUNK];
    let mut out = Vec::new();
    loop {
        if !readable(&stdout, &stop) {
            break;
        }
        let n = match stdout.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!(server = %server, "reading server stdout failed: {e}");
                break;
            }
        };
        framer.read(&chunk[..n], &mut out);
        let batch: Vec<Frame> = out
            .drain(..)
            .filter_map(|frame| match frame {
                Frame::Message(line) => lane.take_reply(line).map(Frame::Message),
                other => Some(other),
            })
            .collect();
        if !batch.is_empty() && batches.blocking_send(batch).is_err() {
            // rmcp's side is gone.
            lane.close();
            return;
        }
        if n == 0 {
            break;
        }
    }
    lane.close();
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
    let pipes = |source: std::io::Error| ConnectError::Spawn {
        command: target.program.clone(),
        source,
    };
    // Our ends of the pipes are ours alone: stdin written without blocking (the raw
    // lane writes from other threads), stdout read by a thread blocked in `read`.
    set_nonblocking(stdin.as_raw_fd(), true).map_err(pipes)?;
    let stdout = stdout.into_owned_fd().map_err(pipes)?;
    set_nonblocking(stdout.as_raw_fd(), false).map_err(pipes)?;
    let diag: SharedDiagnostics = Arc::default();
    let server: Arc<str> = Arc::from(server);
    let stderr_stop = CancellationToken::new();
    tokio::spawn(read_stderr(
        stderr,
        diag.clone(),
        server.clone(),
        stderr_stop.clone(),
    ));
    let guard = Arc::new(ChildGuard {
        pgid: pid,
        child: AsyncMutex::new(Some(child)),
        done: std::sync::atomic::AtomicBool::new(false),
    });
    let stdin = Arc::new(LineSink::new(stdin));
    let lane = RawLane::new(server.clone(), stdin.clone());
    let (tx, batches) = mpsc::channel(BATCHES_QUEUED);
    let stop = Stop::new().map_err(pipes)?;
    {
        let framer = LineFramer::new(max_message_bytes);
        let (lane, server, stop) = (lane.clone(), server.clone(), stop.0.clone());
        std::thread::Builder::new()
            .name("mcp-stdout".into())
            .stack_size(READER_STACK)
            .spawn(move || read_stdout(stdout, stop, framer, lane, tx, server))
            .map_err(pipes)?;
    }
    let transport = StdioTransport {
        stdin,
        batches,
        frames: VecDeque::new(),
        max_message_bytes,
        diag: diag.clone(),
        server,
        lane: lane.clone(),
        _stop: stop,
        _stderr: stderr_stop.drop_guard(),
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
            // Replies to raw calls went to the lane on the stdout thread.
            Frame::Message(line) => line,
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
            stdin.write_line(&line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            while let Some(frame) = self.frames.pop_front() {
                if let Some(message) = self.message(frame) {
                    return Some(message);
                }
            }
            // Cancel-safe: a batch received is kept before the next await. `None`:
            // the stdout thread ended (and closed the lane).
            self.frames.extend(self.batches.recv().await?);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Closing stdin is the polite way to ask a stdio server to exit.
        self.stdin.close().await;
        Ok(())
    }
}
