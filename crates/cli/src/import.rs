//! `mcp import`: finds other MCP hosts' settings at their usual paths (Linux and
//! macOS), reads them with `switchboard_config`'s importers and writes the servers
//! into a Switchboard settings file through [`SettingsDoc`] (atomic, unknown fields
//! kept). A name that already exists is a conflict and is skipped, never replaced.
//! With no `--from`, it lists what it found and imports only when exactly one host
//! has servers (the choice is then clear); otherwise it says which `--from` to use.
//!
//! A folder's own files came with the folder, so they go only into the project scope
//! (where folder trust guards them): a host's project files are read only for
//! `--scope project`, and a file named by path is judged by where it is
//! (`switchboard_config::import_file_owner`: inside the project folder, or a host's
//! folder file anywhere, however the path was written, symlinks followed): with no
//! `--scope` it goes into the project's settings, and `--scope user` is refused.
//! The project files looked for (`.mcp.json`, `.vscode/mcp.json`, `.cursor/mcp.json`,
//! `.codex/config.toml`, `.gemini/settings.json`) are, for any other scope, named as
//! left out. Values keep their variable references (rewritten into our syntax, never
//! expanded), so no environment value is written into a file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Map, Value, json};
use switchboard_config::{
    ImportFileOwner, ImportHost, ImportSource, ImportedFile, SettingsDoc, import_file_owner,
    import_sources, is_secret_name, mask_secret, read_import,
};

use crate::ctx::{self, Globals};

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Where from: claude-desktop, claude-code, vscode, cursor, codex, gemini,
    /// windsurf, or a file's path (default: look at the usual places).
    #[arg(long, value_name = "HOST|FILE")]
    pub from: Option<String>,
    /// Which settings file to write: user (default) or project.
    #[arg(long, short)]
    pub scope: Option<String>,
    /// Show the entries that would be written, and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

fn codex_home() -> Option<PathBuf> {
    std::env::var_os("CODEX_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn sources(host: ImportHost, home: &Path, project: &Path) -> Vec<ImportSource> {
    import_sources(host, home, project, codex_home().as_deref())
}

/// The scope a file named by path goes into: a folder's own file only into the
/// project's (see the module doc); `Err` when `--scope user` was asked for one.
fn scope_for_file(path: &Path, project: &Path, asked: Option<&str>) -> Result<String> {
    let home = ctx::user_home()?;
    let owner = import_file_owner(path, &home, project, codex_home().as_deref())
        .with_context(|| format!("cannot resolve {}", path.display()))?;
    if !owner.is_folders() {
        return Ok(asked.unwrap_or("user").to_owned());
    }
    let why = match &owner {
        ImportFileOwner::InProject(dir) => {
            format!("it is inside this project folder ({})", dir.display())
        }
        ImportFileOwner::FolderFile(rel) => {
            format!("it is a folder's `{}`", rel.display())
        }
        ImportFileOwner::User => String::new(),
    };
    match asked {
        Some("user") => bail!(
            "{} is a folder's own file ({why}): it came with the folder, so it is imported \
             only into the project's settings, which apply once you `switchboard trust` the \
             folder. Run the import again with --scope project (or without --scope); to use \
             its servers everywhere, add each with `switchboard mcp add` after reading it",
            path.display()
        ),
        Some(other) => Ok(other.to_owned()),
        None => Ok("project".to_owned()),
    }
}

/// A file that was read, with what it gave.
struct Read {
    host: ImportHost,
    path: PathBuf,
    file: ImportedFile,
}

/// The host's files that exist. Project files (`./.mcp.json`, `./.vscode/mcp.json`, …)
/// came with the folder: they are read only for `--scope project`, where Switchboard's
/// folder trust still guards them; otherwise they are named in `left_out`.
fn read_existing(
    host: ImportHost,
    home: &Path,
    project: &Path,
    scope: &str,
    left_out: &mut Vec<(ImportHost, PathBuf)>,
) -> Result<Vec<Read>> {
    let mut out = Vec::new();
    for s in sources(host, home, project) {
        if !s.path.is_file() {
            continue;
        }
        if s.project && scope != "project" {
            left_out.push((s.host, s.path));
            continue;
        }
        let file = read_import(s.host, &s.path, project)?;
        out.push(Read {
            host: s.host,
            path: s.path,
            file,
        });
    }
    Ok(out)
}

/// Secret-looking literal values masked for display; `${VAR}` references shown.
fn shown(entry: &Map<String, Value>) -> Map<String, Value> {
    let mut e = entry.clone();
    for field in ["env", "headers"] {
        if let Some(Value::Object(m)) = e.get_mut(field) {
            for (k, v) in m.iter_mut() {
                if let Value::String(s) = v
                    && is_secret_name(k)
                    && !s.contains("${")
                {
                    *v = json!(mask_secret(s));
                }
            }
        }
    }
    e
}

pub fn run(g: &Globals, a: ImportArgs) -> Result<ExitCode> {
    let project = ctx::project_dir()?;
    let mut scope = a.scope.clone().unwrap_or_else(|| "user".into());
    let mut left_out = Vec::new();
    let reads: Vec<Read> = match a.from.as_deref() {
        Some(from) => match ImportHost::from_id(from) {
            Some(host) => {
                let home = ctx::user_home()?;
                let reads = read_existing(host, &home, &project, &scope, &mut left_out)?;
                if reads.is_empty() && left_out.is_empty() {
                    let looked: Vec<String> = sources(host, &home, &project)
                        .iter()
                        .map(|s| s.path.display().to_string())
                        .collect();
                    bail!(
                        "no {} settings found (looked at {}); name the file with --from FILE",
                        host.label(),
                        looked.join(", ")
                    );
                }
                reads
            }
            None => {
                let path = PathBuf::from(from);
                if !path.is_file() {
                    let hosts: Vec<&str> = ImportHost::ALL.iter().map(|h| h.id()).collect();
                    bail!(
                        "`{from}` is neither a host ({}) nor an existing file",
                        hosts.join(", ")
                    );
                }
                scope = scope_for_file(&path, &project, a.scope.as_deref())?;
                if a.scope.is_none() && scope == "project" && !a.json {
                    outln!(
                        "{} is a folder's own file, so it goes into this project's settings.",
                        path.display()
                    );
                }
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let host = ImportHost::detect(&path, &text);
                let file = switchboard_config::parse_import(host, &path, &text, &project)?;
                vec![Read { host, path, file }]
            }
        },
        None => {
            let home = ctx::user_home()?;
            let mut found = Vec::new();
            for host in ImportHost::ALL {
                found.extend(read_existing(host, &home, &project, &scope, &mut left_out)?);
            }
            let mut hosts: Vec<ImportHost> = found
                .iter()
                .filter(|r| !r.file.servers.is_empty())
                .map(|r| r.host)
                .collect();
            hosts.dedup();
            if hosts.len() != 1 {
                return list_found(&found, &left_out, a.json);
            }
            if !a.json {
                outln!(
                    "Only {} has MCP servers here, so importing from it (use --from to choose).",
                    hosts[0].label()
                );
            }
            found
        }
    };
    write(g, &scope, &reads, &left_out, a.dry_run, a.json)
}

fn left_out_note(path: &Path) -> String {
    format!(
        "{} is this folder's own file, so it is imported only with --scope project (it then applies once you `switchboard trust` the folder)",
        path.display()
    )
}

fn list_found(
    found: &[Read],
    left_out: &[(ImportHost, PathBuf)],
    as_json: bool,
) -> Result<ExitCode> {
    if as_json {
        let sources: Vec<Value> = found
            .iter()
            .map(|r| {
                json!({"host": r.host.id(), "file": r.path.display().to_string(),
                       "servers": r.file.servers.len()})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"found": sources, "imported": [],
                "notes": left_out.iter().map(|(_, p)| json!({"file": p.display().to_string(), "note": left_out_note(p)})).collect::<Vec<_>>()}))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    for (_, p) in left_out {
        outln!("note: {}", left_out_note(p));
    }
    if found.is_empty() {
        outln!(
            "No other host's MCP settings found in the usual places. Name a file with `switchboard mcp import --from FILE`."
        );
        return Ok(ExitCode::SUCCESS);
    }
    outln!("Found MCP settings of other hosts:");
    for r in found {
        let n = r.file.servers.len();
        outln!(
            "  {:<15} {} ({n} server{})",
            r.host.id(),
            r.path.display(),
            if n == 1 { "" } else { "s" }
        );
    }
    outln!(
        "Nothing imported: choose one with `switchboard mcp import --from HOST` (add --dry-run to see the entries first)."
    );
    Ok(ExitCode::SUCCESS)
}

fn write(
    g: &Globals,
    scope: &str,
    reads: &[Read],
    left_out: &[(ImportHost, PathBuf)],
    dry_run: bool,
    as_json: bool,
) -> Result<ExitCode> {
    let path = crate::edit::settings_path(g, Some(scope))?;
    let mut doc = SettingsDoc::open(&path)?;
    let mut imported = Vec::new();
    let mut conflicts = Vec::new();
    let mut skipped = Vec::new();
    let mut notes: Vec<Value> = left_out
        .iter()
        .map(|(_, p)| json!({"file": p.display().to_string(), "note": left_out_note(p)}))
        .collect();
    let mut planned: Vec<(String, String)> = Vec::new();
    for r in reads {
        let src = r.path.display().to_string();
        for n in &r.file.notes {
            notes.push(json!({"file": src, "note": n}));
        }
        for s in &r.file.skipped {
            skipped.push(json!({"name": s.name, "file": src, "reason": s.reason}));
        }
        for s in &r.file.servers {
            let existing = match planned.iter().find(|(n, _)| *n == s.name) {
                Some((_, from)) => Some(format!("{from} (imported just before)")),
                None => doc.server(&s.name).map(|_| path.display().to_string()),
            };
            if let Some(existing) = existing {
                conflicts.push(json!({"name": s.name, "file": src, "location": s.location,
                                      "existsIn": existing}));
                continue;
            }
            planned.push((s.name.clone(), src.clone()));
            doc.set_server(&s.name, Value::Object(s.entry.clone()))?;
            imported.push(json!({"name": s.name, "host": r.host.id(), "file": src,
                                 "location": s.location, "entry": Value::Object(shown(&s.entry)),
                                 "warnings": s.warnings}));
        }
    }
    let wrote = !dry_run && !imported.is_empty();
    if wrote {
        doc.save()?;
    }
    if as_json {
        let sources: Vec<Value> = reads
            .iter()
            .map(|r| {
                json!({"host": r.host.id(), "file": r.path.display().to_string(),
                            "servers": r.file.servers.len()})
            })
            .collect();
        let doc = json!({"target": path.display().to_string(), "dryRun": dry_run,
            "written": wrote, "found": sources, "imported": imported,
            "conflicts": conflicts, "skipped": skipped, "notes": notes});
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    for r in reads {
        let n = r.file.servers.len() + r.file.skipped.len();
        outln!(
            "Reading {} settings: {} ({n} server{})",
            r.host.label(),
            r.path.display(),
            if n == 1 { "" } else { "s" }
        );
    }
    for i in &imported {
        let name = i["name"].as_str().unwrap_or_default();
        outln!("  + {name}: {}", i["entry"]);
        for w in i["warnings"].as_array().into_iter().flatten() {
            outln!("      warning: {}", w.as_str().unwrap_or_default());
        }
    }
    for c in &conflicts {
        outln!(
            "  ! {}: conflict, a server with this name already exists in {}; skipped (remove or rename one, then import again)",
            c["name"].as_str().unwrap_or_default(),
            c["existsIn"].as_str().unwrap_or_default()
        );
    }
    for s in &skipped {
        outln!(
            "  - {}: skipped: {}",
            s["name"].as_str().unwrap_or_default(),
            s["reason"].as_str().unwrap_or_default()
        );
    }
    for n in &notes {
        outln!("  note: {}", n["note"].as_str().unwrap_or_default());
    }
    let count = imported.len();
    let servers = if count == 1 { "server" } else { "servers" };
    if dry_run {
        outln!(
            "Dry run: would add {count} {servers} to {}; nothing was written.",
            path.display()
        );
    } else if wrote {
        outln!("Imported {count} {servers} into {}.", path.display());
        if g.config.is_none() && scope == "project" {
            let dir = ctx::project_dir()?;
            if !switchboard_config::is_trusted(&ctx::home_dir()?, &dir) {
                outln!(
                    "Note: a project's settings apply only in a trusted folder; run `switchboard trust` here to use them."
                );
            }
        }
    } else {
        outln!("Nothing to import into {}.", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
