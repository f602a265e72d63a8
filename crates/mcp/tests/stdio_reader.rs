//! The thread reading a stdio server's stdout ends with its connection, even when a
//! grandchild of the server, outside its process group, keeps the pipe open (the
//! thread waits on a stop descriptor beside stdout, not in `read` alone). So does the
//! task reading its stderr, a moment after the connection.

use std::time::{Duration, Instant};

use switchboard_mcp::{ConnectOptions, Connection, StdioTarget, Target};
use switchboard_testkit::bad_peer;

/// The threads of this process named like the stdout reader.
fn readers() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "mcp-stdout")
        .count()
}

/// Kills the grandchild whose pid is in `path`, whatever the test's outcome.
struct Grandchild(std::path::PathBuf);

impl Drop for Grandchild {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0)
            && let Ok(pid) = pid.trim().parse::<i32>()
        {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
    }
}

/// A connection to the `die_mid_call` peer started by `sh`, which first starts
/// `grandchild` (a shell command) in a session of its own, so the process-group kill
/// misses it, with its pid written to `pid_file`.
async fn with_grandchild(grandchild: &str, pid_file: &std::path::Path) -> Connection {
    let (python, args) = bad_peer("die_mid_call");
    let script = format!(
        "setsid {grandchild} & echo $! > '{}'; exec \"$0\" \"$@\"",
        pid_file.display()
    );
    let mut sh_args = vec!["-c".to_string(), script, python];
    sh_args.extend(args);
    let target = Target::Stdio(StdioTarget {
        program: "sh".into(),
        args: sh_args,
        env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
        cwd: None,
    });
    let mut opts = ConnectOptions::new("held", target);
    opts.startup_timeout = Duration::from_secs(30);
    Connection::connect(opts).await.expect("connects")
}

#[tokio::test]
async fn the_stdout_thread_ends_with_its_connection_despite_a_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild.pid");
    let _grandchild = Grandchild(pid_file.clone());
    // The grandchild holds the server's stdout for far longer than the test.
    let before = readers();
    let conn = with_grandchild("sleep 120 </dev/null 2>/dev/null", &pid_file).await;
    assert_eq!(readers(), before + 1, "one reader thread per stdio server");
    assert!(pid_file.exists(), "the grandchild did not start");
    conn.close(Duration::from_secs(2)).await;
    drop(conn);
    let deadline = Instant::now() + Duration::from_secs(10);
    while readers() > before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        readers(),
        before,
        "the stdout thread outlived its connection"
    );
}

/// A grandchild in its own session keeps the server's stderr open and writes to it 3 s
/// after the connection is gone: by then nothing reads stderr any more, so its write
/// fails (the pipe has no reader) and it leaves a mark. While a task still read the
/// pipe, the write went through and the task lived as long as the grandchild.
#[tokio::test]
async fn the_stderr_task_lets_go_of_a_grandchilds_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild.pid");
    let mark = dir.path().join("closed");
    let _grandchild = Grandchild(pid_file.clone());
    let grandchild = format!(
        "sh -c 'trap \"\" PIPE; sleep 3; echo late >&2 || echo closed > \"{}\"' \
         </dev/null >/dev/null",
        mark.display()
    );
    let conn = with_grandchild(&grandchild, &pid_file).await;
    assert!(pid_file.exists(), "the grandchild did not start");
    conn.close(Duration::from_secs(2)).await;
    drop(conn);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !mark.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        mark.exists(),
        "the grandchild's late write to stderr still had a reader"
    );
}
