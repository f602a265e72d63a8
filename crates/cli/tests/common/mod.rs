//! What several test files share: a throwaway home for the real binary (`HOME`,
//! `SWITCHBOARD_HOME`, a project folder as the working directory) and output helpers.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

/// A temporary HOME, Switchboard home and project folder; removed when dropped.
pub struct Env {
    pub home: tempfile::TempDir,
    pub sb: tempfile::TempDir,
    pub project: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            sb: tempfile::tempdir().unwrap(),
            project: tempfile::tempdir().unwrap(),
        }
    }

    /// Runs `switchboard ARGS` in the project folder with this home, stdin closed.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(args)
            .env("HOME", self.home.path())
            .env("SWITCHBOARD_HOME", self.sb.path())
            .env_remove("CODEX_HOME")
            .env_remove("SWITCHBOARD_LOG")
            .current_dir(self.project.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs `switchboard ARGS`, insists it succeeded, and parses its stdout as JSON.
    pub fn json(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The user settings file.
    pub fn user_settings(&self) -> PathBuf {
        self.sb.path().join("settings.json")
    }

    /// The user settings file, parsed.
    pub fn settings(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.user_settings()).unwrap()).unwrap()
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
