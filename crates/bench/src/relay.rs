//! `relay -- PROGRAM [ARGS…]`: the least any process between an MCP client and a stdio
//! server can do. It spawns PROGRAM and copies bytes, stdin → its stdin and its stdout →
//! stdout, one thread blocked in `read` per direction, no parsing, no runtime.
//!
//! The gateway benchmark runs the TS client through it next to `switchboard gateway`:
//! the relay's added latency is this machine's floor for a second process hop (two more
//! wake-ups per call), so the gateway's own share is the difference between the two.

use std::io::{self, Read, Write};
use std::process::{Command, ExitCode, Stdio};
use std::thread;

/// Runs the relay until either side closes. `argv` is PROGRAM and its arguments.
pub fn run(argv: &[String]) -> ExitCode {
    let Some((program, args)) = argv.split_first() else {
        eprintln!("usage: switchboard-bench relay -- PROGRAM [ARGS...]");
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
