//! Errors returned by the config crate.
//!
//! Only problems that make a whole load meaningless are errors (a settings file that
//! is not JSON, a file that cannot be read, a top-level field of the wrong type).
//! A broken *server entry* is not an error: it is reported on that entry only
//! (see [`crate::ServerEntry::config`]).

use std::io;
use std::path::PathBuf;

/// An error loading, reading or writing settings.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A file could not be written (or its directory created).
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A file could not be replaced (see [`crate::replace_file`]).
    #[error(transparent)]
    Replace(#[from] crate::replace::ReplaceError),
    /// A file is not valid JSON (after comments and trailing commas were removed).
    #[error("{}:{line}:{column}: invalid JSON: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser said.
        message: String,
    },
    /// A top-level field has the wrong shape.
    #[error("{}: {field}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The field path, e.g. `mcp.allowed`.
        field: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The file given with `--config` does not exist.
    #[error("{}: no such settings file (given with --config)", path.display())]
    ConfigFileMissing {
        /// The file.
        path: PathBuf,
    },
    /// A named server is not in the file.
    #[error("{}: no server named `{name}` in mcpServers", path.display())]
    NoSuchServer {
        /// The file.
        path: PathBuf,
        /// The server name.
        name: String,
    },
}
