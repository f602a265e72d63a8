//! The bundled demo MCP server's binary (`switchboard-demo-server`), for tests of other
//! crates that run it as a stdio command: found next to the running test's binary
//! (`target/<profile>/`), built with cargo once when it is not there yet.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The path of the `switchboard-demo-server` binary of this build.
///
/// # Panics
/// When it is missing and `cargo build -p switchboard-demo-server` fails.
pub fn demo_server_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary's path");
        // target/<profile>/deps/<test> → target/<profile>/switchboard-demo-server
        let profile_dir = exe
            .parent()
            .and_then(|deps| deps.parent())
            .expect("the test binary sits in target/<profile>/deps")
            .to_path_buf();
        let bin = profile_dir.join("switchboard-demo-server");
        if !bin.is_file() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = Command::new(cargo)
                .args([
                    "build",
                    "-p",
                    "switchboard-demo-server",
                    "--bin",
                    "switchboard-demo-server",
                ])
                .current_dir(crate::repo_root())
                .status()
                .expect("run cargo build -p switchboard-demo-server");
            assert!(
                status.success() && bin.is_file(),
                "cargo build -p switchboard-demo-server did not make {}",
                bin.display()
            );
        }
        bin
    })
    .clone()
}
