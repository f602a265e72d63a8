//! Shell completion. `switchboard completions SHELL` prints the script a shell
//! sources; by default it is clap_complete's dynamic registration, which calls this
//! binary back on every Tab (`COMPLETE=<shell> switchboard -- <words>`, answered by
//! [`clap_complete::CompleteEnv`] in `main` before anything else runs), so that values
//! come from the person's own setup: server names from the settings (read the same
//! way every command reads them, `--config` included; no server is started, nothing
//! is printed on stderr) and workflow files for `run`. `--static` prints a
//! self-contained script instead (subcommands and flags only).
//!
//! Tool names after `mcp call SERVER` come from the names `mcp list` last saw for that
//! server (`tool_names.rs`), offered only while the settings still point the server
//! where they did; a server `mcp list` has not reached yet gets no tool names. A
//! connection is never made: a Tab must answer at once and start nothing.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::engine::{
    ArgValueCandidates, ArgValueCompleter, CompletionCandidate, PathCompleter, ValueCompleter,
};

use crate::ctx::{self, Globals};

/// The environment variable of clap_complete's completion protocol.
pub const COMPLETE_VAR: &str = "COMPLETE";

/// Whether a shell is asking for completions: `COMPLETE` names a shell clap_complete
/// knows (`bash`, or a path such as `/bin/bash`). Any other value, left in the
/// environment for some other purpose, leaves the command to run as usual.
pub fn requested() -> bool {
    std::env::var_os(COMPLETE_VAR).is_some_and(|v| names_a_shell(Path::new(&v)))
}

fn names_a_shell(value: &Path) -> bool {
    let stem = value
        .file_stem()
        .unwrap_or(value.as_os_str())
        .to_string_lossy();
    clap_complete::env::Shells::builtins()
        .completer(&stem)
        .is_some()
}

/// Completes a server name from the settings.
pub fn server_names() -> ArgValueCandidates {
    ArgValueCandidates::new(|| {
        configured_servers()
            .into_iter()
            .map(CompletionCandidate::new)
            .collect()
    })
}

/// Completes the first value of `<server|URL> …` positionals with a server name.
pub fn server_first() -> ArgValueCompleter {
    ArgValueCompleter::new(ServerFirst)
}

struct ServerFirst;

impl ValueCompleter for ServerFirst {
    fn complete(&self, current: &OsStr) -> Vec<CompletionCandidate> {
        self.complete_at(0, current)
    }

    // clap_complete's `arg_index` for a positional is 0 for both its first and its
    // second value, so the words before the cursor are counted here instead.
    fn complete_at(&self, _arg_index: usize, current: &OsStr) -> Vec<CompletionCandidate> {
        let (words, cursor) = words_and_cursor(std::env::args_os());
        if positionals_before(&words, cursor) != 0 {
            return Vec::new();
        }
        let prefix = current.to_string_lossy();
        configured_servers()
            .into_iter()
            .filter(|n| n.starts_with(prefix.as_ref()))
            .map(CompletionCandidate::new)
            .collect()
    }
}

/// Completes `mcp call`'s positionals: a server name first, then one of its tool
/// names (from `mcp list`'s cache), then nothing (`key=value` arguments).
pub fn server_then_tool() -> ArgValueCompleter {
    ArgValueCompleter::new(ServerThenTool)
}

struct ServerThenTool;

impl ValueCompleter for ServerThenTool {
    fn complete(&self, current: &OsStr) -> Vec<CompletionCandidate> {
        self.complete_at(0, current)
    }

    fn complete_at(&self, _arg_index: usize, current: &OsStr) -> Vec<CompletionCandidate> {
        let (words, cursor) = words_and_cursor(std::env::args_os());
        let before = positionals(&words, cursor);
        let prefix = current.to_string_lossy();
        // With --stdio the positionals are the tool of an ad-hoc server and its
        // arguments: nothing is known about them.
        let adhoc = words.iter().take(cursor).any(|w| w == "--stdio");
        let names = match before.as_slice() {
            _ if adhoc => Vec::new(),
            [] => configured_servers(),
            [server] => tool_names_of(&server.to_string_lossy()),
            _ => Vec::new(),
        };
        names
            .into_iter()
            .filter(|n| n.starts_with(prefix.as_ref()))
            .map(CompletionCandidate::new)
            .collect()
    }
}

/// The tool names `mcp list` saw for `server`, while its target is unchanged.
fn tool_names_of(server: &str) -> Vec<String> {
    let Some(path) = crate::tool_names::path() else {
        return Vec::new();
    };
    let g = Globals {
        config: config_flag(std::env::args_os()),
        url_policy: None,
    };
    let Ok(settings) = ctx::read_settings(&g) else {
        return Vec::new();
    };
    let target = match settings.server(server) {
        Some(entry) => switchboard_host::spec_from_entry(entry).target_display,
        None if server == ctx::DEMO && ctx::demo_reachable(&settings) => match ctx::demo_spec() {
            Ok(spec) => spec.target_display,
            Err(_) => return Vec::new(),
        },
        None => return Vec::new(),
    };
    crate::tool_names::tools(&path, server, &target)
}

/// The words the shell sent (`switchboard mcp call …`, after the protocol's `--`) and
/// the index of the one being completed: `_CLAP_COMPLETE_INDEX` where the shell's
/// script sets it (bash, zsh, elvish), else the last word.
fn words_and_cursor(args: impl IntoIterator<Item = OsString>) -> (Vec<OsString>, usize) {
    let words: Vec<OsString> = args.into_iter().skip_while(|a| a != "--").skip(1).collect();
    let last = words.len().saturating_sub(1);
    let cursor = std::env::var("_CLAP_COMPLETE_INDEX")
        .ok()
        .and_then(|i| i.parse::<usize>().ok())
        .map_or(last, |i| i.min(last));
    (words, cursor)
}

/// How many positional values the innermost subcommand has before `words[cursor]`.
fn positionals_before(words: &[OsString], cursor: usize) -> usize {
    positionals(words, cursor).len()
}

/// The positional values of the innermost subcommand before `words[cursor]`:
/// subcommand names, options and the values of options that take one are skipped.
fn positionals(words: &[OsString], cursor: usize) -> Vec<OsString> {
    let mut root = crate::Cli::command();
    root.build();
    let mut cmd = &root;
    let mut found: Vec<OsString> = Vec::new();
    let mut skip_value = false;
    let mut escaped = false;
    for word in words.iter().take(cursor).skip(1) {
        if skip_value {
            skip_value = false;
            continue;
        }
        let w = word.to_string_lossy();
        if !escaped && w == "--" {
            escaped = true;
            continue;
        }
        if !escaped && w.len() > 1 && w.starts_with('-') {
            skip_value = !w.contains('=') && option_takes_value(cmd, &w);
            continue;
        }
        if found.is_empty()
            && let Some(sub) = cmd.find_subcommand(w.as_ref())
        {
            cmd = sub;
            continue;
        }
        found.push(word.clone());
    }
    found
}

/// Whether `--long` or `-s` of `cmd` is followed by its value as the next word.
fn option_takes_value(cmd: &clap::Command, word: &str) -> bool {
    let takes = |a: &clap::Arg| a.get_num_args().is_some_and(|n| n.takes_values());
    if let Some(long) = word.strip_prefix("--") {
        return cmd
            .get_arguments()
            .any(|a| a.get_long() == Some(long) && takes(a));
    }
    // `-s VALUE`, but not `-sVALUE` or a cluster of flags.
    let mut chars = word.chars().skip(1);
    match (chars.next(), chars.next()) {
        (Some(short), None) => cmd
            .get_arguments()
            .any(|a| a.get_short() == Some(short) && takes(a)),
        _ => false,
    }
}

/// Completes a workflow file: folders, `.yaml`, `.yml` and Markdown files.
pub fn workflow_files() -> ArgValueCompleter {
    ArgValueCompleter::new(PathCompleter::any().filter(is_workflow_candidate))
}

fn is_workflow_candidate(path: &Path) -> bool {
    path.is_dir()
        || path
            .extension()
            .and_then(OsStr::to_str)
            .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "yaml" | "yml" | "md"))
}

/// The names of the configured servers (the bundled `demo` on a machine without
/// settings), or none when the settings cannot be read.
fn configured_servers() -> Vec<String> {
    let g = Globals {
        config: config_flag(std::env::args_os()),
        url_policy: None,
    };
    let Ok(settings) = ctx::read_settings(&g) else {
        return Vec::new();
    };
    let mut names: Vec<String> = settings.servers.into_iter().map(|s| s.name).collect();
    if settings.no_settings_file {
        names.push("demo".into());
    }
    names
}

/// `--config FILE` (or `--config=FILE`) among the words being completed, so that
/// completion reads the same settings the finished command will.
fn config_flag(args: impl IntoIterator<Item = OsString>) -> Option<PathBuf> {
    let mut it = args.into_iter();
    let mut found = None;
    while let Some(a) = it.next() {
        if a == "--config" {
            found = it.next().map(PathBuf::from);
        } else if let Some(v) = a.to_str().and_then(|s| s.strip_prefix("--config=")) {
            found = Some(PathBuf::from(v));
        }
    }
    found.filter(|p| !p.as_os_str().is_empty())
}

/// `switchboard completions SHELL [--static]`.
pub fn print(shell: clap_complete::Shell, static_script: bool, mut cmd: clap::Command) -> ExitCode {
    let mut buf = Vec::new();
    if static_script {
        clap_complete::generate(shell, &mut cmd, "switchboard", &mut buf);
    } else {
        let shells = clap_complete::env::Shells::builtins();
        let Some(completer) = shells.completer(&shell.to_string()) else {
            errln!(
                "error: no dynamic completion for {shell}; use `switchboard completions {shell} --static`"
            );
            return ExitCode::from(1);
        };
        if let Err(e) = completer.write_registration(
            COMPLETE_VAR,
            "switchboard",
            "switchboard",
            &completer_path(),
            &mut buf,
        ) {
            errln!("error: cannot write the {shell} completion script: {e}");
            return ExitCode::from(1);
        }
    }
    match std::io::stdout().lock().write_all(&buf) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("error: cannot write the completion script: {e}");
            ExitCode::from(1)
        }
    }
}

/// The program the shell runs for completions: as this one was invoked (looked up on
/// `PATH` when given as a bare name, made absolute when given as a path), as
/// clap_complete's own `COMPLETE=<shell> switchboard` registration does.
fn completer_path() -> String {
    let argv0 = std::env::args_os()
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("switchboard"));
    let path = if argv0.components().count() > 1 {
        std::env::current_dir()
            .map(|d| d.join(&argv0))
            .unwrap_or(argv0)
    } else {
        argv0
    };
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_flag_is_found_in_either_form() {
        let words = |w: &[&str]| w.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            config_flag(words(&[
                "switchboard",
                "--",
                "switchboard",
                "--config",
                "a.json",
                "mcp",
                "get",
                ""
            ])),
            Some(PathBuf::from("a.json"))
        );
        assert_eq!(
            config_flag(words(&["switchboard", "mcp", "--config=b.json", "get"])),
            Some(PathBuf::from("b.json"))
        );
        assert_eq!(
            config_flag(words(&["switchboard", "mcp", "get", "--config"])),
            None
        );
    }

    #[test]
    fn positionals_are_counted_past_options_and_their_values() {
        let words = |w: &str| w.split(' ').map(OsString::from).collect::<Vec<_>>();
        let at_end = |w: &str| {
            let w = words(w);
            positionals_before(&w, w.len() - 1)
        };
        assert_eq!(at_end("switchboard mcp call x"), 0);
        assert_eq!(at_end("switchboard -v mcp call --timeout 5 --json x"), 0);
        assert_eq!(
            at_end("switchboard --config a.json mcp call --args={} x"),
            0
        );
        assert_eq!(at_end("switchboard mcp call alpha x"), 1);
        assert_eq!(at_end("switchboard mcp call --stdio cmd alpha x"), 1);
        assert_eq!(at_end("switchboard mcp read alpha --json x"), 1);
        assert_eq!(at_end("switchboard mcp remove -s user x"), 0);
        assert_eq!(
            positionals_before(&words("switchboard mcp call alpha tool"), 3),
            0
        );
    }

    #[test]
    fn only_a_shell_name_asks_for_completion() {
        for yes in [
            "bash",
            "zsh",
            "fish",
            "powershell",
            "elvish",
            "/bin/bash",
            "/usr/bin/zsh",
        ] {
            assert!(names_a_shell(Path::new(yes)), "{yes}");
        }
        for no in ["1", "true", "yes", "", "0"] {
            assert!(!names_a_shell(Path::new(no)), "{no}");
        }
    }

    #[test]
    fn workflow_candidates_are_yaml_markdown_and_folders() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["a.yaml", "b.YML", "c.md", "d.txt"] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        assert!(is_workflow_candidate(dir.path()));
        assert!(is_workflow_candidate(&dir.path().join("a.yaml")));
        assert!(is_workflow_candidate(&dir.path().join("b.YML")));
        assert!(is_workflow_candidate(&dir.path().join("c.md")));
        assert!(!is_workflow_candidate(&dir.path().join("d.txt")));
    }
}
