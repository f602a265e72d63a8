//! The throwaway PostgreSQL cluster starts, takes connections on its port, and is gone
//! (process and dir) after drop.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpStream;
use std::time::Duration;

use switchboard_testkit::PgCluster;

#[test]
fn cluster_starts_listens_and_is_gone_after_drop() {
    let cluster = PgCluster::start();
    let port = cluster.port();
    let dir = cluster.dir().to_path_buf();
    let pid_file = dir.join("data").join("postmaster.pid");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("postmaster.pid")
        .lines()
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(5))
        .expect("PostgreSQL listens on its port");
    let url = cluster.create_database("kit_check");
    assert!(
        url.ends_with(&format!("127.0.0.1:{port}/kit_check")),
        "{url}"
    );
    drop(cluster);
    assert!(!dir.exists(), "the cluster's temp dir is removed");
    // Gone, or a zombie waiting for whichever ancestor adopted it to reap it.
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let running = state
        .rsplit_once(") ")
        .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'));
    assert!(!running, "the postmaster (pid {pid}) is stopped: {state}");
    assert!(
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).is_err(),
        "nothing listens on the port any more"
    );
}
