//! The raw lane (`switchboard_mcp::RawLane`) against real stdio peers written to lie
//! and to die (`tests/peers/python/bad/lying_replies.py`, `die_mid_call.py`): calls
//! started from many plain threads at once, answered, answered twice, left
//! unanswered until they time out, or cancelled. Every call's callback runs exactly
//! once with the right outcome, the server hears every cancellation, and a server
//! that dies fails its waiting calls at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use switchboard_mcp::{
    ConnectOptions, Connection, RawCall, RawOutcome, RequestError, StdioTarget, Target,
};
use switchboard_testkit::bad_peer;

/// The peer's timeout for the calls the tests leave unanswered.
const TIMEOUT: Duration = Duration::from_millis(400);

async fn connect(peer: &str, cancel_log: &std::path::Path) -> Connection {
    let (program, args) = bad_peer(peer);
    let target = Target::Stdio(StdioTarget {
        program,
        args,
        env: vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            (
                "SWITCHBOARD_CANCEL_LOG".into(),
                cancel_log.display().to_string(),
            ),
        ],
        cwd: None,
    });
    let mut opts = ConnectOptions::new(peer, target);
    opts.startup_timeout = Duration::from_secs(30);
    Connection::connect(opts).await.expect("connects")
}

/// How each call ended, by kind; the index is the call's number in the test.
#[derive(Debug, Clone, PartialEq)]
enum Ended {
    Answered(String),
    TimedOut(Duration),
    Cancelled,
    Closed,
    Other(String),
}

fn ended(outcome: RawOutcome, started: Instant) -> Ended {
    match outcome {
        Ok(r) => Ended::Answered(String::from_utf8_lossy(r.json()).into_owned()),
        Err(RequestError::Timeout { .. }) => Ended::TimedOut(started.elapsed()),
        Err(RequestError::Cancelled { .. }) => Ended::Cancelled,
        Err(RequestError::Closed(_)) => Ended::Closed,
        Err(e) => Ended::Other(e.to_string()),
    }
}

struct Record {
    count: Vec<AtomicUsize>,
    ended: Mutex<Vec<Option<Ended>>>,
}

impl Record {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Self {
            count: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            ended: Mutex::new(vec![None; n]),
        })
    }

    fn all_ended(&self) -> bool {
        self.count.iter().all(|c| c.load(Ordering::SeqCst) > 0)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_from_many_threads_ends_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let cancel_log = dir.path().join("cancel.log");
    let conn = Arc::new(connect("lying_replies", &cancel_log).await);
    assert!(
        conn.raw_lane().is_some(),
        "a stdio connection has a raw lane"
    );

    const THREADS: usize = 4;
    const EACH: usize = 60;
    let record = Record::new(THREADS * EACH);
    let empty: Box<RawValue> = RawValue::from_string("{}".into()).unwrap();
    let mut threads = Vec::new();
    for t in 0..THREADS {
        let (conn, record, empty) = (conn.clone(), record.clone(), empty.clone());
        threads.push(std::thread::spawn(move || {
            let lane = conn.raw_lane().unwrap();
            for i in 0..EACH {
                let n = t * EACH + i;
                // Answered, answered twice, left to time out, cancelled.
                let name = ["id", "twice", "silent", "silent"][i % 4];
                let started = Instant::now();
                let rec = record.clone();
                let done = Box::new(move |outcome: RawOutcome| {
                    rec.count[n].fetch_add(1, Ordering::SeqCst);
                    rec.ended.lock().unwrap()[n] = Some(ended(outcome, started));
                });
                let call = RawCall {
                    name,
                    arguments: Some(&empty),
                    timeout: TIMEOUT,
                };
                let ticket = lane.start(call, done).expect("starts");
                if i % 4 == 3 {
                    assert!(lane.cancel(ticket, "changed my mind"));
                    assert!(!lane.cancel(ticket, "again"), "cancelled twice");
                }
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while !record.all_ended() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Late replies (`twice`) and sweeps after the end change nothing.
    tokio::time::sleep(TIMEOUT * 2).await;

    let ended = record.ended.lock().unwrap().clone();
    for (n, c) in record.count.iter().enumerate() {
        assert_eq!(c.load(Ordering::SeqCst), 1, "call {n} ended {c:?} times");
        let e = ended[n].clone().unwrap();
        match (n % EACH) % 4 {
            0 => assert!(
                matches!(&e, Ended::Answered(t) if t.contains("sb.")),
                "call {n}: {e:?}"
            ),
            1 => assert!(
                matches!(&e, Ended::Answered(t) if t.contains("once")),
                "call {n}: {e:?}"
            ),
            2 => match e {
                // The timeout task looks every 50 ms: late by about that, not more.
                Ended::TimedOut(after) => assert!(
                    after >= TIMEOUT && after < TIMEOUT + Duration::from_secs(2),
                    "call {n} timed out after {after:?}"
                ),
                other => panic!("call {n}: {other:?}"),
            },
            _ => assert_eq!(e, Ended::Cancelled, "call {n}"),
        }
    }
    // The server heard every silent call's cancellation, timed out or cancelled.
    let silent = THREADS * EACH / 2;
    let deadline = Instant::now() + Duration::from_secs(10);
    let heard = loop {
        let heard = std::fs::read_to_string(&cancel_log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("cancelled sb."))
            .count();
        if heard >= silent || Instant::now() > deadline {
            break heard;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(heard, silent);
    // The lane is idle and the connection still answers through rmcp.
    assert!(!conn.raw_lane().unwrap().backed_up());
    conn.list_tools(&Default::default())
        .await
        .expect("still answers");
}

#[tokio::test]
async fn a_server_that_dies_fails_its_waiting_calls_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let conn = connect("die_mid_call", &dir.path().join("cancel.log")).await;
    let lane = conn.raw_lane().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let started = Instant::now();
    for _ in 0..3 {
        let tx = tx.clone();
        let call = RawCall {
            name: "boom",
            arguments: None,
            timeout: Duration::from_secs(600),
        };
        lane.start(call, Box::new(move |o| drop(tx.send(ended(o, started)))))
            .expect("starts");
    }
    drop(tx);
    let mut ends = Vec::new();
    while let Some(e) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("a waiting call was left waiting")
    {
        ends.push(e);
    }
    assert_eq!(ends, vec![Ended::Closed; 3]);
    assert!(started.elapsed() < Duration::from_secs(20));
    // The lane taken before the server went starts nothing now, and says why; the
    // connection offers no lane any more.
    let call = RawCall {
        name: "boom",
        arguments: None,
        timeout: Duration::from_secs(1),
    };
    let refused = lane.start(
        call,
        Box::new(|_| panic!("a refused call ran its callback")),
    );
    assert!(
        matches!(refused, Err(RequestError::Closed(_))),
        "{refused:?}"
    );
    assert!(conn.raw_lane().is_none());
}
