//! `switchboard-bench team`: issue 11's load benchmark. N simulated signed-in users, each
//! listing the tools of the demo server and calling its `echo` over Streamable HTTP
//! through the team API (`GET /api/servers/demo/tools`, `POST /api/servers/demo/call`),
//! against one `switchboard serve --team` instance and against two on one PostgreSQL
//! database (requests alternate between the instances, round-robin in this driver, no
//! proxy).
//!
//! Set-up, not timed: a throwaway PostgreSQL cluster (the test kit's `PgCluster`, a fresh
//! database per scenario), the real OpenID provider (`tests/peers/oidc`, with the
//! numbered accounts `user1` … `userN`), the demo server binary over Streamable HTTP, the
//! instances; then every user signs in through the real flow (`/auth/login` → the
//! provider → `/auth/callback`, the login started on one instance and finished on the
//! next) and adds the demo server, and one warm-up round opens each instance's cached
//! connections. Timed: `rounds` rounds per user, all users at once, each round a
//! `tools` then a `call`. Reported per scenario: requests/s, p50/p99 (all requests and
//! per kind), errors (a non-200 answer or a wrong echo), peak RSS (`VmHWM`) per instance
//! read from `/proc` after the run, and the 2-vs-1 throughput ratio.
//!
//! Must not: reach anything but 127.0.0.1, or leave a process running (every child is
//! killed on drop).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine as _;
use futures::StreamExt as _;
use serde_json::{Value, json};
use switchboard_net::{ClientOptions, GuardedClient, ProxySetting, UrlPolicy};
use switchboard_testkit::{OidcPeer, OidcPeerOptions, PeerProcess, PgCluster, free_port};

use crate::args::Args;
use crate::stats::{percentile_ms, round3};

/// Options of `team`.
#[derive(Debug)]
pub struct TeamOpts {
    users: usize,
    rounds: usize,
    warmup_rounds: usize,
    instances: Vec<usize>,
    sign_in_concurrency: usize,
    switchboard: PathBuf,
    demo: PathBuf,
}

impl TeamOpts {
    pub fn from_args(args: &mut Args) -> Result<Self> {
        let users: usize = args.parsed_or("users", 200)?;
        let rounds: usize = args.parsed_or("rounds", 10)?;
        let warmup_rounds: usize = args.parsed_or("warmup-rounds", 1)?;
        let sign_in_concurrency: usize = args.parsed_or("sign-in-concurrency", 8)?;
        let instances = args
            .take("instances")
            .unwrap_or_else(|| "1,2".into())
            .split(',')
            .map(|s| s.trim().parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .context("--instances: a comma-separated list of instance counts, e.g. 1,2")?;
        if users == 0 || rounds == 0 || sign_in_concurrency == 0 {
            bail!("--users, --rounds and --sign-in-concurrency must be at least 1");
        }
        if instances.is_empty() || instances.iter().any(|&n| n == 0 || n > 8) {
            bail!("--instances: each count from 1 to 8");
        }
        let switchboard = args.switchboard_bin()?;
        let demo = match args.take("demo") {
            Some(p) => PathBuf::from(p),
            None => switchboard.with_file_name("switchboard-demo-server"),
        };
        if !demo.is_file() {
            bail!(
                "{} does not exist: build it (`cargo build --release -p switchboard-demo-server`) or pass --demo PATH",
                demo.display()
            );
        }
        Ok(Self {
            users,
            rounds,
            warmup_rounds,
            instances,
            sign_in_concurrency,
            switchboard,
            demo,
        })
    }
}

/// The HTTP client of the simulated browsers: switchboard-net's, loopback allowed, no
/// proxy, redirects not followed (the driver follows the sign-in by hand).
fn client() -> Result<GuardedClient> {
    let mut o = ClientOptions::new(UrlPolicy::Local);
    o.proxy = ProxySetting::Disabled;
    o.timeout = Some(Duration::from_secs(120));
    GuardedClient::new(o).context("cannot build the HTTP client")
}

/// A fresh team secret key (32 random bytes, base64).
fn secret_key() -> Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("cannot read /dev/urandom for the team key")?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Peak and current resident set size of `pid` in KiB (`VmHWM`, `VmRSS`).
fn rss_kib(pid: u32) -> Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| anyhow!("no {name} in /proc/{pid}/status"))
    };
    Ok((field("VmHWM:")?, field("VmRSS:")?))
}

/// One scenario's instances on one database, behind one public origin.
struct Deployment {
    instances: Vec<PeerProcess>,
    bases: Vec<String>,
    origin: String,
    _home: tempfile::TempDir,
}

struct StartDeployment<'a> {
    opts: &'a TeamOpts,
    ports: &'a [u16],
    database: &'a str,
    peer: &'a OidcPeer,
    key: &'a str,
}

async fn start_deployment(s: StartDeployment<'_>) -> Result<Deployment> {
    let home = tempfile::tempdir().context("cannot create a temp dir")?;
    let origin = format!("http://127.0.0.1:{}", s.ports[0]);
    let mut instances = Vec::new();
    let mut bases = Vec::new();
    for (i, port) in s.ports.iter().enumerate() {
        let mut c = Command::new(&s.opts.switchboard);
        c.args(["--url-policy", "local", "serve", "--team", "--port"])
            .arg(port.to_string())
            .args(["--public-origin", &origin, "--oidc-issuer", &s.peer.issuer])
            .args(["--allow-domain", "example.com"])
            .env("HOME", home.path())
            .env("SWITCHBOARD_HOME", home.path().join(format!("sb{i}")))
            .env("SWITCHBOARD_SECRET_KEY", s.key)
            .env("SWITCHBOARD_DATABASE_URL", s.database)
            .env("SWITCHBOARD_OIDC_CLIENT_ID", &s.peer.client_id)
            .env("SWITCHBOARD_OIDC_CLIENT_SECRET", &s.peer.secret)
            .env("SWITCHBOARD_LOG", "warn")
            .env_remove("SWITCHBOARD_SECRET_KEY_FILE");
        let mut p = PeerProcess::spawn(&format!("serve-team-{port}"), c);
        p.wait_for_port(*port, Duration::from_secs(60)).await;
        instances.push(p);
        bases.push(format!("http://127.0.0.1:{port}"));
    }
    Ok(Deployment {
        instances,
        bases,
        origin,
        _home: home,
    })
}

/// The value of the first `Set-Cookie` named `name` (`name=value`).
fn cookie(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|c| c.split(';').next().unwrap_or("").to_owned())
        .find(|c| c.starts_with(&format!("{name}=")))
}

/// Signs `account` in (started on `start`, finished on `finish`) and adds the demo
/// server; returns the session cookie.
async fn sign_in_user(
    http: &GuardedClient,
    peer: &OidcPeer,
    (start, finish, origin): (&str, &str, &str),
    account: &str,
    demo_url: &str,
) -> Result<String> {
    let r = http
        .get(&format!("{start}/auth/login"))
        .send()
        .await
        .context("GET /auth/login")?;
    if r.status().as_u16() != 303 {
        bail!("/auth/login answered {}", r.status());
    }
    let authorize = r
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| anyhow!("/auth/login gave no Location"))?
        .to_owned();
    let login = cookie(&r, "switchboard_login").ok_or_else(|| anyhow!("no login cookie"))?;
    let back = peer.drive_login(&authorize, account).await;
    let r = http
        .get(&format!("{finish}/auth/callback?{}", back.query))
        .header("Cookie", login)
        .send()
        .await
        .context("GET /auth/callback")?;
    if r.status().as_u16() != 303 {
        let status = r.status();
        let body = r.text().await.unwrap_or_default();
        bail!("/auth/callback answered {status}: {body}");
    }
    let session = cookie(&r, "switchboard_session").ok_or_else(|| anyhow!("no session cookie"))?;
    let r = http
        .post(&format!("{start}/api/servers"))
        .header("Origin", origin)
        .header("Cookie", &session)
        .json(&json!({"name": "demo", "url": demo_url}))
        .send()
        .await
        .context("POST /api/servers")?;
    if r.status().as_u16() != 201 {
        let status = r.status();
        let body = r.text().await.unwrap_or_default();
        bail!("adding the demo server answered {status}: {body}");
    }
    Ok(session)
}

/// What one timed request gave.
struct Sample {
    list: bool,
    took: Duration,
    ok: bool,
}

/// One user's `tools` + `call echo`, each to the next instance round-robin.
async fn user_round(
    http: &GuardedClient,
    d: (&[String], &str, &AtomicUsize),
    session: &str,
    tag: &str,
) -> [Sample; 2] {
    let (bases, origin, next) = d;
    let pick = || &bases[next.fetch_add(1, Ordering::Relaxed) % bases.len()];
    let started = Instant::now();
    let list = http
        .get(&format!("{}/api/servers/demo/tools", pick()))
        .header("Origin", origin)
        .header("Sec-Fetch-Site", "same-origin")
        .header("Cookie", session)
        .send()
        .await;
    let list_ok = match list {
        Ok(r) if r.status().as_u16() == 200 => r
            .json::<Value>()
            .await
            .ok()
            .and_then(|v| v["tools"].as_array().map(|t| !t.is_empty()))
            .unwrap_or(false),
        _ => false,
    };
    let list_took = started.elapsed();
    let started = Instant::now();
    let call = http
        .post(&format!("{}/api/servers/demo/call", pick()))
        .header("Origin", origin)
        .header("Cookie", session)
        .json(&json!({"tool": "echo", "args": {"message": tag}}))
        .send()
        .await;
    let want = format!("Echo: {tag}");
    let call_ok = match call {
        Ok(r) if r.status().as_u16() == 200 => r
            .json::<Value>()
            .await
            .ok()
            .is_some_and(|v| v["result"]["content"][0]["text"].as_str() == Some(&want)),
        _ => false,
    };
    [
        Sample {
            list: true,
            took: list_took,
            ok: list_ok,
        },
        Sample {
            list: false,
            took: started.elapsed(),
            ok: call_ok,
        },
    ]
}

fn latency(samples: &mut [Duration]) -> Value {
    samples.sort();
    json!({
        "n": samples.len(),
        "p50_ms": round3(percentile_ms(samples, 50.0)),
        "p99_ms": round3(percentile_ms(samples, 99.0)),
        "max_ms": round3(percentile_ms(samples, 100.0)),
    })
}

struct Scenario<'a> {
    opts: &'a TeamOpts,
    cluster: &'a PgCluster,
    ports: &'a [u16],
    peer: &'a OidcPeer,
    demo_url: &'a str,
    key: &'a str,
}

async fn scenario(s: Scenario<'_>) -> Result<Value> {
    let n = s.ports.len();
    let database = s.cluster.create_database(&format!("team{n}"));
    let d = start_deployment(StartDeployment {
        opts: s.opts,
        ports: s.ports,
        database: &database,
        peer: s.peer,
        key: s.key,
    })
    .await?;
    let http = client()?;

    // Sign-in (untimed): each login starts on one instance and ends on the next.
    let setup = Instant::now();
    let sessions: Vec<Result<String>> = futures::stream::iter(0..s.opts.users)
        .map(|i| {
            let (http, bases, origin) = (&http, &d.bases, &d.origin);
            async move {
                let start = &bases[i % bases.len()];
                let finish = &bases[(i + 1) % bases.len()];
                sign_in_user(
                    http,
                    s.peer,
                    (start, finish, origin),
                    &format!("user{}", i + 1),
                    s.demo_url,
                )
                .await
                .with_context(|| format!("signing in user{}", i + 1))
            }
        })
        .buffer_unordered(s.opts.sign_in_concurrency)
        .collect()
        .await;
    let sessions: Vec<String> = sessions.into_iter().collect::<Result<_>>()?;
    let sign_in_s = setup.elapsed().as_secs_f64();

    let next = AtomicUsize::new(0);
    let run_rounds =
        |rounds: usize| {
            let (http, bases, origin, next) = (&http, &d.bases, &d.origin, &next);
            futures::future::join_all(sessions.iter().enumerate().map(
                move |(u, session)| async move {
                    let mut out = Vec::with_capacity(rounds * 2);
                    for r in 0..rounds {
                        let tag = format!("u{u}r{r}");
                        out.extend(user_round(http, (bases, origin, next), session, &tag).await);
                    }
                    out
                },
            ))
        };
    // Warm-up (untimed): every user's connection on every instance.
    let warm = run_rounds(s.opts.warmup_rounds.max(n)).await;
    let warm_errors = warm.iter().flatten().filter(|x| !x.ok).count();

    let started = Instant::now();
    let timed = run_rounds(s.opts.rounds).await;
    let wall = started.elapsed();
    let samples: Vec<Sample> = timed.into_iter().flatten().collect();
    let errors = samples.iter().filter(|x| !x.ok).count();
    let mut all: Vec<Duration> = samples.iter().map(|x| x.took).collect();
    let mut lists: Vec<Duration> = samples.iter().filter(|x| x.list).map(|x| x.took).collect();
    let mut calls: Vec<Duration> = samples.iter().filter(|x| !x.list).map(|x| x.took).collect();
    let mut per_instance = Vec::new();
    for p in &d.instances {
        let (peak, now) = rss_kib(p.pid())?;
        per_instance.push(json!({"peak_rss_mib": round3(peak as f64 / 1024.0), "rss_mib": round3(now as f64 / 1024.0)}));
    }
    let requests = samples.len();
    let result = json!({
        "instances": n,
        "users": s.opts.users,
        "rounds": s.opts.rounds,
        "requests": requests,
        "wall_s": round3(wall.as_secs_f64()),
        "requests_per_s": round3(requests as f64 / wall.as_secs_f64()),
        "errors": errors,
        "warmup_errors": warm_errors,
        "sign_in_s": round3(sign_in_s),
        "all": latency(&mut all),
        "tools_list": latency(&mut lists),
        "call_echo": latency(&mut calls),
        "per_instance": per_instance,
    });
    drop(d);
    Ok(result)
}

/// Runs every scenario of `opts.instances`; prints one JSON object.
pub async fn run(opts: TeamOpts) -> Result<Value> {
    let cluster = tokio::task::spawn_blocking(PgCluster::start)
        .await
        .map_err(|e| anyhow!("starting PostgreSQL failed: {e}"))?;
    let plans: Vec<Vec<u16>> = opts
        .instances
        .iter()
        .map(|&n| (0..n).map(|_| free_port()).collect())
        .collect();
    let peer = switchboard_testkit::spawn_oidc_provider_with(OidcPeerOptions {
        redirect_uris: plans
            .iter()
            .map(|p| format!("http://127.0.0.1:{}/auth/callback", p[0]))
            .collect(),
        numbered_users: opts.users,
        ..Default::default()
    })
    .await;
    let demo_port = free_port();
    let mut demo = Command::new(&opts.demo);
    demo.args(["http", "--host", "127.0.0.1", "--port"])
        .arg(demo_port.to_string());
    let mut demo = PeerProcess::spawn("demo-server", demo);
    demo.wait_for_port(demo_port, Duration::from_secs(30)).await;
    let demo_url = format!("http://127.0.0.1:{demo_port}/mcp");
    let key = secret_key()?;
    let mut results = Vec::new();
    for ports in &plans {
        results.push(
            scenario(Scenario {
                opts: &opts,
                cluster: &cluster,
                ports,
                peer: &peer,
                demo_url: &demo_url,
                key: &key,
            })
            .await?,
        );
    }
    let rate = |n: u64| {
        results
            .iter()
            .find(|r| r["instances"].as_u64() == Some(n))
            .and_then(|r| r["requests_per_s"].as_f64())
    };
    let ratio = match (rate(1), rate(2)) {
        (Some(one), Some(two)) if one > 0.0 => Some(round3(two / one)),
        _ => None,
    };
    let demo_peak = rss_kib(demo.pid())
        .ok()
        .map(|(p, _)| round3(p as f64 / 1024.0));
    Ok(json!({
        "bench": "team",
        "scenarios": results,
        "ratio_2_vs_1": ratio,
        "demo_server_peak_rss_mib": demo_peak,
        "machine": {
            "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            "loadavg": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
        },
    }))
}
