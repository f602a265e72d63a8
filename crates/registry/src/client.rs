//! [`Registry`]: the requests to an MCP Registry (`/v0.1` API). Every request goes
//! through the caller's `switchboard-net` [`GuardedClient`] (the URL policy in force),
//! with a time limit ([`REQUEST_TIMEOUT`] unless changed) that covers the whole body,
//! and bodies are read through `switchboard_net::read_limited` up to [`MAX_BODY`]
//! ([`REQUEST_TIMEOUT`] is 20 s, [`MAX_BODY`] 8 MiB). A search follows
//! `metadata.nextCursor` for at most the pages asked for, and keeps each name once, the
//! first active listing winning.
//!
//! Must not: build its own HTTP client, keep anything between requests, or decide
//! which answers a person sees (inactive servers are left out of a search and refused
//! by [`Registry::server`], and that is all).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use switchboard_net::{GuardedClient, LimitedBody};
use url::Url;

use crate::error::RegistryError;
use crate::server_json::{Listing, parse_listing};

/// The registry asked when none is configured.
pub const DEFAULT_REGISTRY: &str = "https://registry.modelcontextprotocol.io";
/// Time limit for one registry request, body included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// Largest registry answer read (a page of 100 servers is well under this).
pub const MAX_BODY: usize = 8 * 1024 * 1024;
/// Servers per page asked for.
const PAGE_LIMIT: usize = 100;

/// What a search found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Active servers, each once (the first listing of a name wins), in the registry's
    /// order.
    pub servers: Vec<Listing>,
    /// Stopped at the page limit with more to come.
    pub truncated: bool,
}

/// A client of one registry.
#[derive(Debug, Clone)]
pub struct Registry {
    base: Url,
    client: GuardedClient,
    timeout: Duration,
}

impl Registry {
    /// A client of the registry at `base` (http or https), through `client`.
    pub fn new(base: &str, client: GuardedClient) -> Result<Self, RegistryError> {
        let bad = |why: &str| RegistryError::BadUrl {
            url: base.to_string(),
            why: why.to_string(),
        };
        let url = Url::parse(base.trim().trim_end_matches('/')).map_err(|e| bad(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad("it must be http(s)://"));
        }
        if url.cannot_be_a_base() {
            return Err(bad("it cannot take a path"));
        }
        Ok(Self {
            base: url,
            client,
            timeout: REQUEST_TIMEOUT,
        })
    }

    /// The same client with another time limit per request.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The registry's base URL.
    pub fn base(&self) -> &Url {
        &self.base
    }

    /// `base` + path segments (each percent-encoded, so `a/b` stays one segment).
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty();
            for s in segments {
                path.push(s);
            }
        }
        url
    }

    /// GET `url` and parse JSON: `Ok(None)` on 404.
    async fn get(&self, url: &Url) -> Result<Option<Value>, RegistryError> {
        let req = self.client.get(url.as_str()).timeout(self.timeout);
        let resp = self
            .client
            .send(req)
            .await
            .map_err(|source| RegistryError::Unreachable {
                base: self.base.to_string(),
                source,
            })?;
        let status = resp.status();
        let body = match switchboard_net::read_limited(resp, MAX_BODY)
            .await
            .map_err(|source| RegistryError::Read {
                url: url.to_string(),
                source,
            })? {
            LimitedBody::Whole(body) => body,
            LimitedBody::Cut(_) => {
                return Err(RegistryError::TooLarge {
                    url: url.to_string(),
                    base: self.base.to_string(),
                    limit_mib: MAX_BODY / (1024 * 1024),
                });
            }
        };
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            let detail = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| {
                    ["detail", "title", "error"]
                        .iter()
                        .find_map(|k| v.get(*k).and_then(Value::as_str).map(str::to_string))
                })
                .unwrap_or_default();
            let detail: String = detail.chars().take(500).collect();
            return Err(RegistryError::Status {
                status: status.as_u16(),
                url: url.to_string(),
                detail,
            });
        }
        let value = serde_json::from_slice(&body).map_err(|_| RegistryError::Malformed {
            url: url.to_string(),
            base: self.base.to_string(),
            what: "JSON",
        })?;
        Ok(Some(value))
    }

    /// Active servers whose names match `text`, following the cursor for at most
    /// `max_pages` pages.
    pub async fn search(&self, text: &str, max_pages: usize) -> Result<Found, RegistryError> {
        let mut servers: Vec<Listing> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut truncated = false;
        for page in 0.. {
            if page == max_pages {
                truncated = true;
                break;
            }
            let mut url = self.url(&["v0.1", "servers"]);
            {
                let mut q = url.query_pairs_mut();
                q.append_pair("search", text);
                q.append_pair("version", "latest");
                q.append_pair("limit", &PAGE_LIMIT.to_string());
                if let Some(c) = &cursor {
                    q.append_pair("cursor", c);
                }
            }
            let Some(doc) = self.get(&url).await? else {
                return Err(RegistryError::NotARegistry {
                    base: self.base.to_string(),
                });
            };
            let Some(items) = doc.get("servers").and_then(Value::as_array) else {
                return Err(RegistryError::Malformed {
                    url: url.to_string(),
                    base: self.base.to_string(),
                    what: "a list of servers (`servers`)",
                });
            };
            for item in items {
                let Some(listing) = parse_listing(item) else {
                    continue;
                };
                if !listing.is_active()
                    || servers.iter().any(|s| s.server.name == listing.server.name)
                {
                    continue;
                }
                servers.push(listing);
            }
            cursor = doc
                .get("metadata")
                .and_then(|m| m.get("nextCursor"))
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        Ok(Found { servers, truncated })
    }

    /// Server `id` at `version` (`None`: the latest); an inactive one is refused.
    pub async fn server(&self, id: &str, version: Option<&str>) -> Result<Listing, RegistryError> {
        let url = self.url(&[
            "v0.1",
            "servers",
            id,
            "versions",
            version.unwrap_or("latest"),
        ]);
        let not_found = || RegistryError::NotFound {
            base: self.base.to_string(),
            id: id.to_string(),
            version: version.map(str::to_string),
        };
        let item = self.get(&url).await?.ok_or_else(not_found)?;
        let listing = parse_listing(&item).ok_or_else(|| RegistryError::Malformed {
            url: url.to_string(),
            base: self.base.to_string(),
            what: "a server.json with a name",
        })?;
        if !listing.is_active() {
            return Err(RegistryError::Inactive {
                id: id.to_string(),
                status: listing.status,
            });
        }
        Ok(listing)
    }
}

/// `ID[@VERSION]` → (id, version); no version, or an empty one, is the latest.
pub fn split_id(spec: &str) -> (&str, Option<&str>) {
    match spec.rsplit_once('@') {
        Some((id, v)) if !id.is_empty() && !v.is_empty() && v != "latest" => (id, Some(v)),
        Some((id, "latest")) if !id.is_empty() => (id, None),
        _ => (spec, None),
    }
}
