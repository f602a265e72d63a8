//! Switchboard settings: Gemini-CLI-style `settings.json` layers, validation,
//! variable expansion, folder trust, the stdio environment rule and safe writes, and
//! reading other MCP hosts' settings for `mcp import` ([`read_import`]); and the one rule
//! for showing text Switchboard does not control ([`visible`]: controls and bidi
//! overrides made visible, in the terminal and on the team server's pages).
//!
//! Start with [`load`]; edit files with [`SettingsDoc`].

mod doc;
mod env_policy;
mod error;
mod expand;
mod import;
mod jsonc;
mod load;
mod mask;
mod raw;
mod references;
mod replace;
mod server;
mod suggest;
mod trust;
mod visible;

pub use doc::{SettingsDoc, project_settings_path, user_settings_path};
pub use env_policy::{EnvPolicy, child_env, describe_env_policy, is_filtered_out};
pub use error::ConfigError;
pub use expand::{ExpandError, expand_vars, is_var_name};
pub use import::{
    ImportError, ImportFileOwner, ImportHost, ImportSource, ImportedFile, ImportedServer,
    SkippedServer, import_file_owner, import_sources, parse_import, read_import,
};
pub use load::{EntryState, IgnoredProject, LoadOptions, Origin, ServerEntry, Settings, load};
pub use mask::{is_secret_name, mask_secret};
pub use raw::{AuthProviderType, IdpConfig, OAuthConfig};
pub use references::{EXPANDED_FIELDS, LocalReference, escape_vars, local_references};
pub use replace::{Links, Replace, ReplaceError, open_owned, refuse_symlink, replace_file};
pub use server::{
    DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TIMEOUT, ServerConfig, Transport,
};
pub use suggest::did_you_mean;
pub use trust::{
    Revoked, is_trusted, revoke_folder, trust_folder, trusted_folders, trusted_folders_path,
};
pub use visible::{is_unsafe_to_show, visible};
