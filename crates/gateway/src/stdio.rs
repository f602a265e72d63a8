//! The gateway's own stdin and stdout.
//!
//! stdin is read by a thread of its own blocked in `read` (`crate::stdio_server`), on a
//! duplicate of fd 0: a plain call then reaches its server without waking the runtime
//! (BENCHMARKS.md), and a terminal, a file or `/dev/null` is read the same way.
//!
//! stdout is written without blocking where it can be, so that the raw relay's replies
//! are written on the thread that learns them and rmcp's on the reactor, instead of a
//! blocking-pool thread (`tokio::io::stdout()` hands every write to another thread; on
//! a busy machine each hand-off waits for a core):
//! - a socket (Node's `child_process.spawn` gives its children socketpairs, so this is
//!   what the TS SDK, Gemini CLI and MCP Inspector hand us): a duplicate of the
//!   descriptor written with `MSG_DONTWAIT`, so the open file's flags are never
//!   changed, watched by the reactor only while a write waits for room (watched always,
//!   Linux reports the room each read of the client frees as a new edge: one wasted
//!   wake-up per reply);
//! - a pipe or FIFO (Python's `subprocess`, shells): reopened through `/proc/self/fd`
//!   with `O_NONBLOCK`, which gives the gateway its own open file description; the
//!   process's fd 1 (and anything that shares it) stays blocking;
//! - anything else (a terminal, a file) or a failure on the way: tokio's blocking
//!   `stdout()`, every line through a task. `O_NONBLOCK` is never set on a terminal or
//!   on a descriptor shared with another process.
//!
//! It owns nothing but these handles; framing and JSON-RPC are rmcp's.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use switchboard_mcp::WriteNow;
use tokio::io::AsyncWrite;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

/// How a downstream stream is driven (for logs and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// A socket, written with `MSG_DONTWAIT`.
    Socket,
    /// A pipe or FIFO, reopened non-blocking on its own open file description.
    Pipe,
    /// tokio's blocking-pool `stdout()` (a terminal, a file, …).
    Blocking,
}

/// A socket written with `MSG_DONTWAIT`, watched by the reactor only while a write
/// would block. A socket watched for writability all the time wakes the reactor each
/// time the client reads what was written (Linux signals the freed space as a new
/// edge): one wake-up per reply, for nothing, and a context switch when the thread
/// was asleep.
#[derive(Debug)]
struct SocketOut {
    fd: OwnedFd,
    /// A watched duplicate, while a write waits for room.
    waiting: Option<AsyncFd<OwnedFd>>,
}

/// The gateway's stdout as an `AsyncWrite`.
#[derive(Debug)]
pub struct Output(OutputImp);

#[derive(Debug)]
enum OutputImp {
    Socket(SocketOut),
    Pipe(pipe::Sender),
    Blocking(tokio::io::Stdout),
}

impl Output {
    pub fn kind(&self) -> StreamKind {
        match self.0 {
            OutputImp::Socket(_) => StreamKind::Socket,
            OutputImp::Pipe(_) => StreamKind::Pipe,
            OutputImp::Blocking(_) => StreamKind::Blocking,
        }
    }

    /// Writes to `fd` without blocking when it is a socket or a pipe; `None` otherwise.
    pub fn nonblocking(fd: impl AsFd) -> Option<Self> {
        match classify(fd.as_fd())? {
            Class::Socket => fd
                .as_fd()
                .try_clone_to_owned()
                .ok()
                .map(|fd| Output(OutputImp::Socket(SocketOut { fd, waiting: None }))),
            Class::Fifo => {
                let fd = reopen_nonblocking(fd.as_fd(), true)?;
                pipe::Sender::from_owned_fd(fd)
                    .ok()
                    .map(|w| Output(OutputImp::Pipe(w)))
            }
        }
    }
}

/// The process's stdin, for a thread to read blocked in `read` (a duplicate: the
/// process's fd 0 stays as it is), and its stdout, non-blocking where it can be. Must
/// be called inside a tokio runtime with I/O enabled.
pub fn stdio() -> io::Result<(OwnedFd, Output)> {
    let input = io::stdin().as_fd().try_clone_to_owned()?;
    let output = Output::nonblocking(io::stdout())
        .unwrap_or(Output(OutputImp::Blocking(tokio::io::stdout())));
    tracing::debug!("gateway stdio: stdout {:?}", output.kind());
    Ok((input, output))
}

enum Class {
    Socket,
    Fifo,
}

fn classify(fd: std::os::fd::BorrowedFd<'_>) -> Option<Class> {
    use std::os::unix::fs::FileTypeExt;
    let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
    let kind = file.metadata().ok()?.file_type();
    if kind.is_socket() {
        Some(Class::Socket)
    } else if kind.is_fifo() {
        Some(Class::Fifo)
    } else {
        None
    }
}

/// A new open file description of the same pipe, with `O_NONBLOCK` (Linux's
/// `/proc/self/fd`; elsewhere `None`, and the caller falls back).
fn reopen_nonblocking(fd: std::os::fd::BorrowedFd<'_>, write: bool) -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    if !cfg!(target_os = "linux") {
        return None;
    }
    std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .ok()
        .map(OwnedFd::from)
}

/// A duplicate of `fd`, registered with the reactor for `interest`.
#[allow(unsafe_code)]
fn watch(fd: std::os::fd::BorrowedFd<'_>, interest: Interest) -> Option<AsyncFd<OwnedFd>> {
    let dup = fd.try_clone_to_owned().ok()?;
    // SAFETY: the `OwnedFd` keeps its descriptor open, and always returns the same one,
    // for as long as the `AsyncFd` owns it.
    unsafe { AsyncFd::register_with_interest(dup, interest) }.ok()
}

/// One `send(MSG_DONTWAIT | MSG_NOSIGNAL)` of `buf`.
#[allow(unsafe_code)]
fn send_now(fd: &OwnedFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `fd` is a live descriptor we own and `buf` is valid for `buf.len()` bytes.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

impl WriteNow for Output {
    fn write_now(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.0 {
            // A write that waits for room is under way: the caller's task finishes it.
            OutputImp::Socket(out) if out.waiting.is_some() => {
                Err(io::ErrorKind::WouldBlock.into())
            }
            OutputImp::Socket(out) => send_now(&out.fd, buf),
            OutputImp::Pipe(w) => w.try_write(buf),
            // tokio's blocking stdout goes through its own thread: its task writes.
            OutputImp::Blocking(_) => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().0 {
            OutputImp::Socket(out) => loop {
                if let Some(watched) = &out.waiting {
                    let mut guard = ready!(watched.poll_write_ready(cx))?;
                    match guard.try_io(|inner| send_now(inner.get_ref(), buf)) {
                        Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Ok(r) => {
                            // Room again: stop watching (dropping deregisters).
                            out.waiting = None;
                            return Poll::Ready(r);
                        }
                        Err(_would_block) => continue,
                    }
                }
                match send_now(&out.fd, buf) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        // Watched from now on; registering reports room that came
                        // meanwhile, so no wake-up is lost.
                        match watch(out.fd.as_fd(), Interest::WRITABLE) {
                            Some(w) => out.waiting = Some(w),
                            None => {
                                return Poll::Ready(Err(io::Error::other(
                                    "could not watch the client's socket for room",
                                )));
                            }
                        }
                    }
                    r => return Poll::Ready(r),
                }
            },
            OutputImp::Pipe(w) => Pin::new(w).poll_write(cx, buf),
            OutputImp::Blocking(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            OutputImp::Socket(_) => Poll::Ready(Ok(())),
            OutputImp::Pipe(w) => Pin::new(w).poll_flush(cx),
            OutputImp::Blocking(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            OutputImp::Socket(_) => Poll::Ready(Ok(())),
            OutputImp::Pipe(w) => Pin::new(w).poll_shutdown(cx),
            OutputImp::Blocking(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    use tokio::io::AsyncWriteExt;

    use super::*;

    #[allow(unsafe_code)]
    fn nonblocking_flag(fd: &impl AsRawFd) -> bool {
        // SAFETY: F_GETFL on a live descriptor only reads its flags.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        assert!(flags >= 0, "F_GETFL failed");
        flags & libc::O_NONBLOCK != 0
    }

    #[tokio::test]
    async fn a_socket_is_written_without_changing_its_flags() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let mut output = Output::nonblocking(&ours).unwrap();
        assert_eq!(output.kind(), StreamKind::Socket);
        assert!(!nonblocking_flag(&ours));

        use std::io::Read;
        assert_eq!(output.write_now(b"{\"id\":1}\n").unwrap(), 9);
        let mut got = [0u8; 9];
        theirs.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"{\"id\":1}\n");
        // A big reply: more than the socket buffer, so the writer must wait for the
        // reader (readiness, not a busy loop or an error), and `write_now` says so.
        let big = vec![b'x'; 4 << 20];
        let n = output.write_now(&big).unwrap();
        assert!(n < big.len());
        assert_eq!(
            output.write_now(&big[n..]).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut chunk = [0u8; 65536];
            while all.len() < 4 << 20 {
                let n = theirs.read(&mut chunk).unwrap();
                assert!(n > 0);
                all.extend_from_slice(&chunk[..n]);
            }
            all.len()
        });
        output.write_all(&big[n..]).await.unwrap();
        output.flush().await.unwrap();
        assert_eq!(reader.join().unwrap(), 4 << 20);
        assert!(!nonblocking_flag(&ours), "the shared socket stays blocking");
    }

    /// A write larger than the socket's buffer waits for the client to read (the
    /// socket is watched only then) and every byte arrives, in order.
    #[tokio::test]
    async fn a_full_socket_waits_for_room_and_loses_nothing() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let mut output = Output::nonblocking(&ours).unwrap();
        let data: Vec<u8> = (0..4 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
        let reader = std::thread::spawn(move || {
            use std::io::Read;
            let mut theirs = theirs;
            let mut got = Vec::new();
            let mut buf = [0u8; 8192];
            while got.len() < 4 * 1024 * 1024 {
                std::thread::sleep(std::time::Duration::from_micros(200));
                let n = theirs.read(&mut buf).unwrap();
                assert!(n > 0, "the socket closed early");
                got.extend_from_slice(&buf[..n]);
            }
            got
        });
        output.write_all(&data).await.unwrap();
        output.flush().await.unwrap();
        assert_eq!(reader.join().unwrap(), data);
        // Written twice: the watch taken while full was given up, and a new one works.
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let mut output = Output::nonblocking(&ours).unwrap();
        output.write_all(b"one\n").await.unwrap();
        output.write_all(b"two\n").await.unwrap();
        let mut buf = [0u8; 8];
        std::io::Read::read_exact(&mut theirs, &mut buf).unwrap();
        assert_eq!(&buf, b"one\ntwo\n");
    }

    #[tokio::test]
    async fn a_pipe_is_reopened_and_the_original_stays_blocking() {
        let (their_read, their_write) = std::io::pipe().unwrap();
        let mut output = Output::nonblocking(&their_write).unwrap();
        assert_eq!(output.kind(), StreamKind::Pipe);
        assert!(!nonblocking_flag(&their_write));

        use std::io::Read;
        output.write_all(b"world\n").await.unwrap();
        assert_eq!(output.write_now(b"again\n").unwrap(), 6);
        let mut r = their_read;
        let mut back = [0u8; 12];
        r.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"world\nagain\n");
        assert!(!nonblocking_flag(&their_write));
    }

    #[tokio::test]
    async fn files_and_character_devices_are_left_to_the_blocking_handles() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("f")).unwrap();
        assert!(Output::nonblocking(&file).is_none());
        let null = std::fs::File::options()
            .write(true)
            .open("/dev/null")
            .unwrap();
        assert!(Output::nonblocking(&null).is_none());
        assert!(!nonblocking_flag(&null));
    }
}
