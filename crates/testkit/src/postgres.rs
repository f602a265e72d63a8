//! [`PgCluster`]: a throwaway PostgreSQL cluster (Debian's server binaries) in a temp dir,
//! on a free 127.0.0.1 port, stopped on drop.

use std::fmt;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::process::free_port;

/// The password of the cluster's `postgres` superuser (TCP logins use SCRAM, so URLs carry
/// it; tests check that it never shows in an error or `Debug`).
pub const PG_PASSWORD: &str = "pg-test-secret-7f3a";

/// A running PostgreSQL cluster owned by the test. Data, socket and log live in one temp
/// dir; the server listens on 127.0.0.1 only, with SCRAM password logins over TCP. When
/// the test process runs as root (CI), the cluster runs as `nobody` (PostgreSQL refuses
/// to run as root). Dropping it runs `pg_ctl stop -m immediate` and removes the dir.
pub struct PgCluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    as_nobody: bool,
    port: u16,
    stopped: bool,
}

impl fmt::Debug for PgCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgCluster")
            .field("dir", &self.dir.path())
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// Where Debian puts the server binaries: `$SWITCHBOARD_PG_BIN`, else the newest
/// `/usr/lib/postgresql/<version>/bin` holding `initdb` and `pg_ctl`.
///
/// # Errors
/// Names the package to install when no binaries are found.
pub fn pg_bin_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("SWITCHBOARD_PG_BIN").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
            Ok(dir)
        } else {
            Err(format!(
                "SWITCHBOARD_PG_BIN={} has no initdb and pg_ctl: point it at PostgreSQL's server bin folder",
                dir.display()
            ))
        };
    }
    let mut found: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).ok_or_else(|| {
        "PostgreSQL server binaries not found (no /usr/lib/postgresql/<version>/bin/initdb): \
         install them with `apt-get install postgresql` (.ci/run does), or set SWITCHBOARD_PG_BIN"
            .to_owned()
    })
}

fn is_root() -> bool {
    // The effective uid, without unsafe code: `/proc/self/status` has "Uid: real effective …".
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|rest| rest.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

impl PgCluster {
    /// `initdb` a fresh cluster in a temp dir and start it on a free port.
    ///
    /// # Panics
    /// When the binaries are missing (with the package to install) or the cluster does not
    /// start (with its log).
    pub fn start() -> Self {
        let bin = pg_bin_dir().unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::Builder::new()
            .prefix("switchboard-pg-")
            .tempdir()
            .expect("create a temp dir for PostgreSQL");
        let as_nobody = is_root();
        let data = dir.path().join("data");
        let pwfile = dir.path().join("pwfile");
        fs::write(&pwfile, format!("{PG_PASSWORD}\n")).expect("write the password file");
        if as_nobody {
            // PostgreSQL refuses to run as root: hand the dir to `nobody`.
            let status = Command::new("chown")
                .args(["-R", "nobody:", "--"])
                .arg(dir.path())
                .status()
                .expect("run chown");
            assert!(
                status.success(),
                "chown -R nobody {} failed",
                dir.path().display()
            );
        }
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700))
            .expect("chmod the PostgreSQL temp dir");
        let mut cluster = Self {
            bin,
            dir,
            as_nobody,
            port: 0,
            stopped: true,
        };
        let out = cluster.run_pg(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--auth-local=scram-sha-256".as_ref(),
                "--auth-host=scram-sha-256".as_ref(),
                "--pwfile".as_ref(),
                pwfile.as_os_str(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--locale=C".as_ref(),
                "--no-sync".as_ref(),
                "--no-instructions".as_ref(),
            ],
        );
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // A port picked free can be taken before the server binds it: try a few.
        let mut last = String::new();
        for _ in 0..3 {
            let port = free_port();
            let log = cluster.dir.path().join("server.log");
            let options = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c shared_buffers=16MB",
                cluster.dir.path().display()
            );
            let out = cluster.run_pg(
                "pg_ctl",
                &[
                    "-D".as_ref(),
                    data.as_os_str(),
                    "-l".as_ref(),
                    log.as_os_str(),
                    "-o".as_ref(),
                    options.as_ref(),
                    "-w".as_ref(),
                    "-t".as_ref(),
                    "60".as_ref(),
                    "start".as_ref(),
                ],
            );
            if out.status.success() {
                cluster.port = port;
                cluster.stopped = false;
                return cluster;
            }
            last = format!(
                "{}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                fs::read_to_string(&log).unwrap_or_default()
            );
        }
        panic!("PostgreSQL did not start: {last}");
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's temp dir (data in `data/`, the log in `server.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `postgres://postgres:PASSWORD@127.0.0.1:PORT/DATABASE`.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://postgres:{PG_PASSWORD}@127.0.0.1:{}/{database}",
            self.port
        )
    }

    /// Create a database (to give each test or each store its own).
    ///
    /// # Panics
    /// With `createdb`'s output when it fails.
    pub fn create_database(&self, name: &str) -> String {
        let out = self.run_pg(
            "createdb",
            &[
                "-h".as_ref(),
                "127.0.0.1".as_ref(),
                "-p".as_ref(),
                self.port.to_string().as_ref(),
                "-U".as_ref(),
                "postgres".as_ref(),
                name.as_ref(),
            ],
        );
        assert!(
            out.status.success(),
            "createdb {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url(name)
    }

    /// `pg_dump` of `database` (plain SQL, everything the database holds), as bytes.
    ///
    /// # Panics
    /// With `pg_dump`'s output when it fails.
    pub fn dump(&self, database: &str) -> Vec<u8> {
        let out = self.run_pg(
            "pg_dump",
            &[
                "-h".as_ref(),
                "127.0.0.1".as_ref(),
                "-p".as_ref(),
                self.port.to_string().as_ref(),
                "-U".as_ref(),
                "postgres".as_ref(),
                database.as_ref(),
            ],
        );
        assert!(
            out.status.success(),
            "pg_dump {database} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    fn run_pg(&self, program: &str, args: &[&std::ffi::OsStr]) -> Output {
        let path = self.bin.join(program);
        let mut cmd = if self.as_nobody {
            let mut c = Command::new("runuser");
            c.args(["-u", "nobody", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("PGPASSWORD", PG_PASSWORD)
            .env_remove("PGDATA")
            .env_remove("PGHOST")
            .env_remove("PGPORT");
        cmd.output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()))
    }

    /// Stop the server now (`pg_ctl stop -m immediate`), waiting for it to exit.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let data = self.dir.path().join("data");
        let deadline = Instant::now() + Duration::from_secs(30);
        let _ = self.run_pg(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
        );
        // `-w` waits for the postmaster to exit; make sure before the dir goes away.
        while data.join("postmaster.pid").exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        self.stop();
    }
}
