//! `relay [--event-loop] -- PROGRAM [ARGS…]`: the least any process between an MCP
//! client and a stdio server can do. It spawns PROGRAM and copies bytes, stdin → its
//! stdin and its stdout → stdout, one thread blocked in `read` per direction, no
//! parsing, no runtime.
//!
//! The gateway benchmark runs the TS client through it next to `switchboard gateway`:
//! the relay's added latency is this machine's floor for a second process hop (two more
//! wake-ups per call), so the gateway's own share is the difference between the two.
//!
//! `--event-loop` copies the same bytes the way the gateway's one thread waits: one
//! task on a current-thread tokio runtime, both directions watched by its reactor
//! (`epoll`). Its added latency is the floor for any process built that way, whatever
//! it does with the bytes.

use std::io::{self, Read, Write};
use std::process::{Command, ExitCode, Stdio};
use std::thread;

/// Runs the relay until either side closes. `argv` is PROGRAM and its arguments.
pub fn run(argv: &[String]) -> ExitCode {
    let Some((program, args)) = argv.split_first() else {
        eprintln!("usage: switchboard-bench relay [--event-loop] -- PROGRAM [ARGS...]");
        return ExitCode::from(2);
    };
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("switchboard-bench relay: cannot start {program}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (Some(mut to_child), Some(mut from_child)) = (child.stdin.take(), child.stdout.take())
    else {
        eprintln!("switchboard-bench relay: {program} has no stdin/stdout pipes");
        return ExitCode::FAILURE;
    };
    // Client → server on a thread of its own; it ends (closing the child's stdin) when
    // the client closes ours.
    thread::spawn(move || {
        let _ = copy(&mut io::stdin().lock(), &mut to_child);
    });
    let _ = copy(&mut from_child, &mut io::stdout().lock());
    let _ = child.kill();
    let _ = child.wait();
    ExitCode::SUCCESS
}

/// Copies until end of input, writing each read at once (no buffering across reads).
fn copy(from: &mut impl Read, to: &mut impl Write) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        to.write_all(&buf[..n])?;
        to.flush()?;
    }
}

/// The `--event-loop` relay (see the module doc). Our stdin and stdout must be sockets
/// (what Node gives its children) or pipes; they are made non-blocking, which is fine
/// for a process that does nothing else with them.
pub fn run_event_loop(argv: &[String]) -> ExitCode {
    let Some((program, args)) = argv.split_first() else {
        eprintln!("usage: switchboard-bench relay --event-loop -- PROGRAM [ARGS...]");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchboard-bench relay: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(event_loop(program, args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchboard-bench relay: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `fd` as a socket on the reactor, or (when it is not one) the file for a pipe end.
fn socket_or_file(
    fd: std::os::fd::BorrowedFd<'_>,
) -> io::Result<Result<tokio::net::UnixStream, std::fs::File>> {
    use std::os::unix::fs::FileTypeExt;
    let file = std::fs::File::from(fd.try_clone_to_owned()?);
    if !file.metadata()?.file_type().is_socket() {
        return Ok(Err(file));
    }
    let std = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(file));
    std.set_nonblocking(true)?;
    Ok(Ok(tokio::net::UnixStream::from_std(std)?))
}

async fn event_loop(program: &str, args: &[String]) -> io::Result<()> {
    use std::os::fd::AsFd;
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
    use tokio::net::unix::pipe;

    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let (Some(to_child), Some(mut from_child)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(io::Error::other("the child has no stdin/stdout pipes"));
    };
    let mut input: Box<dyn AsyncRead + Unpin> = match socket_or_file(io::stdin().as_fd())? {
        Ok(socket) => Box::new(socket),
        Err(file) => Box::new(
            pipe::Receiver::from_file(file)
                .map_err(|e| io::Error::other(format!("stdin must be a socket or a pipe ({e})")))?,
        ),
    };
    let mut output: Box<dyn AsyncWrite + Unpin> =
        match socket_or_file(io::stdout().as_fd())? {
            Ok(socket) => Box::new(socket),
            Err(file) => Box::new(pipe::Sender::from_file(file).map_err(|e| {
                io::Error::other(format!("stdout must be a socket or a pipe ({e})"))
            })?),
        };
    let mut up = vec![0u8; 64 * 1024];
    let mut down = vec![0u8; 64 * 1024];
    // As the blocking relay: the client's end of input closes the child's stdin, and
    // what the child still writes is copied until its stdout ends.
    let mut to_child = Some(to_child);
    loop {
        tokio::select! {
            n = input.read(&mut up), if to_child.is_some() => {
                let n = n?;
                match (n, to_child.as_mut()) {
                    (0, _) => to_child = None,
                    (n, Some(w)) => w.write_all(&up[..n]).await?,
                    (_, None) => {}
                }
            }
            n = from_child.read(&mut down) => {
                let n = n?;
                if n == 0 {
                    return Ok(());
                }
                output.write_all(&down[..n]).await?;
                output.flush().await?;
            }
        }
    }
}
