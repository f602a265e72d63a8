//! Locating the repository and installing the peers (once, across parallel test processes).

use std::fs::{self, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root (the directory holding the root `Cargo.toml`).
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest
        .parent()
        .and_then(Path::parent)
        .expect("crates/testkit has a grandparent directory");
    root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
}

/// `<repo>/tests/peers`.
pub fn peers_dir() -> PathBuf {
    repo_root().join("tests").join("peers")
}

/// Make sure the peers are installed: runs `scripts/install-peers.sh` at most once per
/// process, serialised across processes by an `flock` on `<repo>/target/peers.lock` (so
/// parallel nextest processes don't race; the script itself is a no-op when up to date).
///
/// # Panics
/// With the script's output when the install fails.
pub fn ensure_peers() {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    if let Err(message) = DONE.get_or_init(install_locked) {
        panic!("{message}");
    }
}

fn install_locked() -> Result<(), String> {
    let root = repo_root();
    let target = root.join("target");
    fs::create_dir_all(&target).map_err(|e| format!("cannot create {}: {e}", target.display()))?;
    let lock_path = target.join("peers.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
    flock_exclusive(&lock).map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;

    let script = root.join("scripts").join("install-peers.sh");
    let output = Command::new("bash")
        .arg(&script)
        .current_dir(&root)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    // The lock is released when `lock` is dropped (closing the descriptor).
    drop(lock);
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "installing the test peers failed ({}): {} exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            "run scripts/install-peers.sh by hand to see why",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        ))
    }
}

#[allow(unsafe_code)]
fn flock_exclusive(file: &fs::File) -> std::io::Result<()> {
    loop {
        // SAFETY: `file` owns a valid open descriptor for the duration of the call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}
