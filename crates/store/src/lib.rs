//! Team mode's store: who is signed in and each user's servers and secrets, in an embedded
//! SQLite file (one machine) or PostgreSQL (several instances), through one code path
//! (sqlx's `Any` driver and portable SQL).
//!
//! - [`Store::open`] a `sqlite://` or `postgres://` URL ([`DatabaseUrl`]; the password is
//!   never shown), then [`Store::migrate`] (embedded migrations, idempotent, locked);
//!   [`Store::ping`] for readiness probes.
//! - Sign-in: [`Store::sign_in_user`] (a user is the issuer's account, issuer + `sub`;
//!   the email only shows; users from before schema 15 are claimed once, by a verified
//!   email: `account`'s docs), sessions ([`Store::create_session`],
//!   [`Store::session_user`], [`Store::end_all_sessions`]) stored as hashes, and OpenID
//!   logins in flight ([`Store::put_pending_login`] / [`Store::take_pending_login`]).
//! - Per user, only through [`Store::for_user`] ([`UserStore`]): MCP servers (HTTP/SSE),
//!   OAuth tokens per server (refreshed by one instance at a time: [`UserStore::begin_refresh`]),
//!   the model API key, and OAuth logins to a server in flight
//!   ([`UserStore::start_server_login`] / [`UserStore::take_server_login`], bound to the user),
//!   chats (conversations, messages sealed, confirmations answered from any instance) and
//!   the team model key an admin sets ([`UserStore::put_team_model_key`]), saved
//!   workflows (source sealed) and their runs (started and finished from any instance,
//!   the run log sealed, the newest kept: [`UserStore::start_workflow_run`]), and the MCP
//!   App sessions a chat's tool results open (`app_session`: user, chat, server, tool
//!   call, `ui://` resource, allowed host methods, the tool input and result sealed;
//!   [`UserStore::create_app_session`]).
//! - The team catalog: servers admins publish for everyone ([`Store::publish_catalog_server`],
//!   refused unless the acting user is an admin), each user's enablement
//!   ([`UserStore::enable_catalog_server`]) and own tokens for it ([`ServerRef::Catalog`]).
//! - The team gateway's authorization server (`gateway_oauth`): registered MCP clients
//!   (at most [`MAX_PENDING_GATEWAY_CLIENTS`] never approved, the oldest purged first:
//!   [`Store::register_gateway_client_within`]), metadata-document clients recorded at
//!   their approval ([`Store::put_document_client`]), grants bound to the approving
//!   session, codes taken once, hashed access and rotated refresh tokens
//!   ([`Store::approve_gateway_grant`], [`Store::gateway_access`]).
//! - Secrets at rest are sealed ([`SecretKeys`]: AES-256-GCM, key id, random nonce, the
//!   row as associated data) and rotated with [`Store::reencrypt`].

mod account;
mod app_session;
mod catalog;
mod chat;
mod elicit;
mod error;
mod gateway_input;
mod gateway_oauth;
mod location;
mod migrate;
mod seal;
mod server_login;
mod store;
mod user_data;
mod workflows;

pub use account::{PendingLogin, SessionToken, SignInIdentity, User, UserId};
pub use app_session::{
    AppSession, MAX_APP_CONTEXT_BYTES, MAX_APP_INIT_BYTES, MAX_APP_SESSIONS_PER_USER, NewAppSession,
};
pub use catalog::{CatalogEntry, CatalogLaunch, CatalogRecord, CatalogServer};
pub use chat::{
    Approvals, ChatMessage, ChatSize, Conversation, KeySource, MAX_CHAT_BYTES, MAX_CHAT_MESSAGES,
    MAX_CHATS_PER_USER, MAX_MESSAGE_BYTES, MAX_TITLE_CHARS, MessageRole, PendingConfirmation,
    TeamKeyInfo,
};
pub use elicit::{
    ElicitAction, ElicitAnswer, MAX_ELICIT_CONTENT_BYTES, MAX_ELICIT_REQUEST_BYTES,
    PendingElicitation,
};
pub use error::{Result, StoreError};
pub use gateway_input::{
    InputRow, MAX_GATEWAY_ANSWER_BYTES, MAX_GATEWAY_OUTCOME_BYTES, MAX_GATEWAY_PROGRESS_BYTES,
    call_hash,
};
pub use gateway_oauth::{
    GatewayAccess, GatewayApproval, GatewayClient, GatewayGrant, GrantId, IssuedTokens,
    MAX_PENDING_GATEWAY_CLIENTS, RefreshOutcome, RegisteredClient, Revocation, TakenCode,
    TokenHint, TokenLifetimes,
};
pub use location::{Backend, DatabaseUrl};
pub use migrate::{LATEST_VERSION, MigrationInfo, MigrationReport};
pub use seal::{
    KEY_ENV, KEY_FILE_ENV, PREVIOUS_KEY_ENV, PREVIOUS_KEY_FILE_ENV, Secret, SecretKeys,
};
pub use server_login::{NewServerLogin, PendingServerLogin, ServerLoginClient, StartedServerLogin};
pub use store::{ReencryptReport, Store};
pub use user_data::{
    ModelKey, RefreshLease, ServerRecord, ServerRef, StoredTokens, Transport, UserStore,
};
pub use workflows::{
    MAX_RUN_LOG_BYTES, MAX_RUNNING_PER_USER, MAX_RUNS_PER_USER, MAX_WORKFLOW_BYTES,
    MAX_WORKFLOWS_PER_USER, RunState, SavedWorkflow, WorkflowRun,
};
