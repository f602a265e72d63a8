//! A tiny `--flag value` parser (the bench takes a handful of options), plus the
//! default locations of the `switchboard` binary and the test peers.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{Context, Result, anyhow, bail};

/// The tokio runtime flavor the benchmark runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Multi-thread, one worker per core (what the `switchboard` CLI uses).
    Multi,
    /// Everything on one thread.
    Current,
}

/// Parsed `--flag value` / `--flag=value` pairs; each getter consumes its flag so that
/// [`Args::finish`] can reject anything left over.
#[derive(Debug, Default)]
pub struct Args {
    flags: BTreeMap<String, String>,
}

impl Args {
    pub fn parse(mut argv: impl Iterator<Item = String>) -> Result<Self> {
        let mut flags = BTreeMap::new();
        while let Some(arg) = argv.next() {
            let Some(flag) = arg.strip_prefix("--") else {
                bail!("unexpected argument `{arg}`");
            };
            let (name, value) = match flag.split_once('=') {
                Some((n, v)) => (n.to_owned(), v.to_owned()),
                None => {
                    let v = argv
                        .next()
                        .ok_or_else(|| anyhow!("--{flag} needs a value"))?;
                    (flag.to_owned(), v)
                }
            };
            if flags.insert(name.clone(), value).is_some() {
                bail!("--{name} given twice");
            }
        }
        Ok(Self { flags })
    }

    /// The raw value of `--name`, if given.
    pub fn take(&mut self, name: &str) -> Option<String> {
        self.flags.remove(name)
    }

    /// `--name` parsed, or `default`.
    pub fn parsed_or<T>(&mut self, name: &str, default: T) -> Result<T>
    where
        T: FromStr,
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        match self.take(name) {
            Some(v) => v
                .parse()
                .with_context(|| format!("--{name}: cannot parse `{v}`")),
            None => Ok(default),
        }
    }

    /// `--name` parsed; an error if missing.
    pub fn required<T>(&mut self, name: &str) -> Result<T>
    where
        T: FromStr,
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        let v = self
            .take(name)
            .ok_or_else(|| anyhow!("--{name} is required"))?;
        v.parse()
            .with_context(|| format!("--{name}: cannot parse `{v}`"))
    }

    /// `--runtime multi|current`: the tokio runtime flavor (default `multi`, as the
    /// `switchboard` CLI uses).
    pub fn runtime(&mut self) -> Result<Flavor> {
        match self.take("runtime").as_deref() {
            None | Some("multi") => Ok(Flavor::Multi),
            Some("current") => Ok(Flavor::Current),
            Some(other) => bail!("--runtime: expected multi or current, got `{other}`"),
        }
    }

    /// `--switchboard PATH`, else the `switchboard` binary next to this executable.
    pub fn switchboard_bin(&mut self) -> Result<PathBuf> {
        if let Some(p) = self.take("switchboard") {
            return Ok(PathBuf::from(p));
        }
        let exe = std::env::current_exe().context("cannot find this executable's path")?;
        let dir = exe
            .parent()
            .ok_or_else(|| anyhow!("{} has no parent directory", exe.display()))?;
        let bin = dir.join("switchboard");
        if !bin.is_file() {
            bail!(
                "{} does not exist: build it (`cargo build --release -p switchboard-cli`) or pass --switchboard PATH",
                bin.display()
            );
        }
        Ok(bin)
    }

    /// `--peers DIR`, else the repository's `tests/peers`.
    pub fn peers_dir(&mut self) -> PathBuf {
        self.take("peers").map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("..")
                .join("tests")
                .join("peers")
        })
    }

    /// Fails if an option was given that no getter asked for.
    pub fn finish(self) -> Result<()> {
        if let Some(name) = self.flags.keys().next() {
            bail!("unknown option --{name}");
        }
        Ok(())
    }
}
