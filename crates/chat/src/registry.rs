//! The model-facing tool registry: which MCP tools the model sees, under which names,
//! and how a name the model calls maps back to a server and a tool.
//!
//! Names are `mcp_{server}_{tool}`:
//! - only `[A-Za-z0-9_-]` (every other character becomes `_`), valid for Gemini and
//!   for OpenAI-style APIs; case is kept; the `mcp_` prefix makes the first character a
//!   letter;
//! - at most [`MAX_NAME_LEN`] (63) characters: a longer name keeps its first 30 and last
//!   30 characters around `___`;
//! - when two tools end up with the same name after sanitizing or cutting, **every**
//!   member of that collision group gets `_` + 8 hex characters of SHA-256 of its raw
//!   identity `server\0tool` (the name cut again to fit). A suffixed name that still
//!   collides gets a longer hash (16, then 32 characters). Names therefore depend only
//!   on the set of tools, never on the order servers connected in;
//! - a table, not a regex, maps a name back to the raw server and tool names, so server
//!   names containing `_` work.
//!
//! Tools whose MCP Apps `_meta.ui.visibility` is present and lacks `"model"` are left
//! out (they are for the app only). A request carries at most a configurable number of
//! declarations ([`DEFAULT_MAX_DECLARATIONS`]); when there are more tools, a
//! deterministic subset is declared together with the built-in [`SEARCH_TOOLS_NAME`]
//! function, through which the model finds and enables the rest.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};
use switchboard_host::{cut_middle, identity_hash};
use switchboard_mcp::model::Tool;

use crate::schema::{Normalized, to_openapi};
use crate::schema_cache::{SchemaCache, SharedSchema};

/// Longest model-facing function name: one under the API's limit
/// ([`switchboard_model::MAX_FUNCTION_NAME_LEN`]), the length Gemini CLI keeps to.
pub const MAX_NAME_LEN: usize = switchboard_model::MAX_FUNCTION_NAME_LEN - 1;

/// Default cap on function declarations in one request.
pub const DEFAULT_MAX_DECLARATIONS: usize = 128;

/// Name of the built-in function that searches the tools left out of a request.
pub const SEARCH_TOOLS_NAME: &str = "search_tools";

/// Hash lengths (hex characters) tried, in order, for colliding names.
const HASH_LEVELS: [usize; 4] = [0, 8, 16, 32];

/// Longest description shown in a `search_tools` answer.
const SEARCH_DESCRIPTION_CHARS: usize = 300;

/// One function declaration for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Decl {
    /// The model-facing name.
    pub name: String,
    /// The description the model reads.
    pub description: String,
    /// The normalized JSON Schema of the arguments (shared with the registry, so
    /// declaring a tool does not copy its schema).
    pub parameters_json_schema: Arc<Value>,
}

impl Decl {
    /// The `FunctionDeclaration` JSON with `parametersJsonSchema`.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "parametersJsonSchema": self.parameters_json_schema.as_ref(),
        })
    }

    /// The `FunctionDeclaration` JSON with `parameters` (the OpenAPI 3.0 subset) instead,
    /// for APIs or proxies that do not take `parametersJsonSchema`.
    pub fn to_openapi_json(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "parameters": to_openapi(&self.parameters_json_schema),
        })
    }
}

/// The tools left out of one request by the cap.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Omitted {
    /// How many tools were left out.
    pub count: usize,
    /// Their model-facing names, sorted.
    pub names: Vec<String>,
}

impl Omitted {
    /// A notice for the person, or `None` when nothing was left out.
    pub fn notice(&self, cap: usize) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let s = if self.count == 1 { "" } else { "s" };
        Some(format!(
            "{} tool{s} left out of this request (at most {cap} declarations); \
             the model can find and enable them with {SEARCH_TOOLS_NAME}.",
            self.count
        ))
    }
}

/// A tool the model can call.
#[derive(Debug, Clone)]
pub struct RegisteredTool {
    /// The model-facing name.
    pub name: String,
    /// The MCP server's name (raw, as configured).
    pub server: String,
    /// The MCP tool, as listed by the server.
    pub tool: Tool,
    /// The description sent to the model.
    pub description: String,
    /// The normalized input schema (and the property renames to undo on a call),
    /// shared with every tool whose input schema has the same content.
    pub normalized: Arc<Normalized>,
    /// `normalized.schema`, as its declarations share it.
    declared: Arc<Value>,
}

impl RegisteredTool {
    /// The raw MCP tool name.
    pub fn tool_name(&self) -> &str {
        &self.tool.name
    }

    /// The tool's original `inputSchema` as JSON (for [`crate::args::check_args`]).
    pub fn input_schema(&self) -> Value {
        Value::Object((*self.tool.input_schema).clone())
    }

    /// The tool's `outputSchema`, if it has one.
    pub fn output_schema(&self) -> Option<Value> {
        self.tool
            .output_schema
            .as_ref()
            .map(|s| Value::Object((**s).clone()))
    }

    /// Its declaration for the model.
    pub fn decl(&self) -> Decl {
        Decl {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters_json_schema: Arc::clone(&self.declared),
        }
    }
}

/// One `search_tools` result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The model-facing name.
    pub name: String,
    /// The MCP server.
    pub server: String,
    /// The raw MCP tool name.
    pub tool: String,
    /// The tool's description (may be empty).
    pub description: String,
    /// Relevance; higher is better.
    pub score: u32,
}

/// The tools offered to the model, their names and the way back to MCP.
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    /// Sorted by (server, tool).
    tools: Vec<RegisteredTool>,
    by_name: HashMap<String, usize>,
    by_identity: HashMap<(String, String), usize>,
    hidden: Vec<(String, String)>,
    /// Enabled through `search_tools`, most recent last.
    enabled: Vec<String>,
}

/// Whether MCP Apps visibility lets the model see this tool (`_meta.ui.visibility`, or
/// the flat `_meta["ui/visibility"]`; absent means visible).
pub fn visible_to_model(tool: &Tool) -> bool {
    let Some(meta) = tool.meta.as_ref() else {
        return true;
    };
    let vis = meta
        .get("ui")
        .and_then(|u| u.get("visibility"))
        .or_else(|| meta.get("ui/visibility"));
    match vis {
        Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some("model")),
        _ => true,
    }
}

/// Replaces every character outside `[A-Za-z0-9_-]` with `_`.
pub fn sanitize(part: &str) -> String {
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The model-facing name for `(server, tool)` at a collision level (0 = no suffix).
fn name_at_level(server: &str, tool: &str, level: usize) -> String {
    let base = format!("mcp_{}_{}", sanitize(server), sanitize(tool));
    let hex_len = HASH_LEVELS[level.min(HASH_LEVELS.len() - 1)];
    if hex_len == 0 {
        return cut_middle(&base, MAX_NAME_LEN);
    }
    let hash = identity_hash(server, tool);
    let suffix = &hash[..hex_len];
    format!("{}_{suffix}", cut_middle(&base, MAX_NAME_LEN - 1 - hex_len))
}

/// Assigns names to a sorted, deduplicated list of identities. Collision groups are
/// bumped to a longer hash together until every name is unique.
fn assign_names(ids: &[(String, String)]) -> Vec<String> {
    let mut levels = vec![0usize; ids.len()];
    loop {
        let names: Vec<String> = ids
            .iter()
            .zip(&levels)
            .map(|((s, t), l)| name_at_level(s, t, *l))
            .collect();
        let mut groups: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in names.iter().enumerate() {
            groups.entry(n.as_str()).or_default().push(i);
        }
        let mut bumped = false;
        for members in groups.values().filter(|m| m.len() > 1) {
            for &i in members {
                if levels[i] + 1 < HASH_LEVELS.len() {
                    levels[i] += 1;
                    bumped = true;
                }
            }
        }
        if !bumped {
            return names;
        }
    }
}

fn describe(server: &str, tool: &Tool) -> String {
    if let Some(d) = tool.description.as_deref().filter(|d| !d.trim().is_empty()) {
        return d.to_string();
    }
    if let Some(t) = tool
        .title
        .as_deref()
        .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.as_deref()))
        .filter(|t| !t.trim().is_empty())
    {
        return t.to_string();
    }
    format!("Tool `{}` of the MCP server `{server}`.", tool.name)
}

impl ToolRegistry {
    /// Builds the registry from each server's tools. Tools hidden from the model by MCP
    /// Apps visibility are left out (see [`ToolRegistry::hidden`]); a tool listed twice
    /// by the same server is kept once (its first listing).
    ///
    /// Input schemas are normalized once per content and shared, through a bounded
    /// process-wide cache (`schema_cache.rs`): rebuilding with the same or mostly the same
    /// tools costs only their names and the schemas not seen recently.
    pub fn new(servers: &[(&str, &[Tool])]) -> Self {
        Self::with_cache(servers, SchemaCache::shared())
    }

    /// [`ToolRegistry::new`] with a given schema cache.
    pub(crate) fn with_cache(servers: &[(&str, &[Tool])], cache: &SchemaCache) -> Self {
        let mut unique: BTreeMap<(String, String), Tool> = BTreeMap::new();
        let mut hidden = Vec::new();
        for (server, tools) in servers {
            for tool in *tools {
                let key = ((*server).to_string(), tool.name.to_string());
                if !visible_to_model(tool) {
                    hidden.push(key);
                    continue;
                }
                if unique.contains_key(&key) {
                    tracing::debug!(server = %key.0, tool = %key.1, "tool listed twice; keeping the first");
                    continue;
                }
                unique.insert(key, tool.clone());
            }
        }
        hidden.sort();
        hidden.dedup();
        let ids: Vec<(String, String)> = unique.keys().cloned().collect();
        let names = assign_names(&ids);
        let schemas: Vec<&Arc<_>> = unique.values().map(|t| &t.input_schema).collect();
        let normalized = cache.normalize_all(&schemas);

        let n = unique.len();
        let mut reg = ToolRegistry {
            tools: Vec::with_capacity(n),
            by_name: HashMap::with_capacity(n),
            by_identity: HashMap::with_capacity(n),
            hidden,
            enabled: Vec::new(),
        };
        for ((((server, tool_name), tool), name), shared) in
            unique.into_iter().zip(names).zip(normalized)
        {
            if reg.by_name.contains_key(&name) {
                // Only possible with a full hash collision; never seen in practice.
                tracing::warn!(%name, server = %server, "tool name still collides; tool left out");
                continue;
            }
            let i = reg.tools.len();
            reg.by_name.insert(name.clone(), i);
            reg.by_identity.insert((server.clone(), tool_name), i);
            let description = describe(&server, &tool);
            let SharedSchema {
                normalized,
                declared,
            } = shared;
            reg.tools.push(RegisteredTool {
                name,
                server,
                tool,
                description,
                normalized,
                declared,
            });
        }
        reg
    }

    /// Every tool the model may see, sorted by server then tool.
    pub fn tools(&self) -> &[RegisteredTool] {
        &self.tools
    }

    /// How many tools the model may see.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there is no tool at all.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// `(server, tool)` pairs left out because their visibility excludes the model.
    pub fn hidden(&self) -> &[(String, String)] {
        &self.hidden
    }

    /// The tool behind a model-facing name.
    pub fn resolve(&self, name: &str) -> Option<&RegisteredTool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// The registered tool for a raw `(server, tool)` pair.
    pub fn get(&self, server: &str, tool: &str) -> Option<&RegisteredTool> {
        self.by_identity
            .get(&(server.to_string(), tool.to_string()))
            .map(|&i| &self.tools[i])
    }

    /// The model-facing name of a raw `(server, tool)` pair.
    pub fn name_of(&self, server: &str, tool: &str) -> Option<&str> {
        self.get(server, tool).map(|t| t.name.as_str())
    }

    /// The declarations for one request, at most `cap` of them. When every tool fits,
    /// all are declared (sorted by server then tool). Otherwise the tools enabled through
    /// `search_tools` (most recent first) and then the first tools in sorted order fill
    /// `cap - 1` slots, and the last slot is the built-in `search_tools` declaration.
    /// The declarations come out sorted by server then tool, `search_tools` last.
    pub fn declarations(&self, cap: usize) -> (Vec<Decl>, Omitted) {
        let n = self.tools.len();
        if n <= cap {
            return (
                self.tools.iter().map(RegisteredTool::decl).collect(),
                Omitted::default(),
            );
        }
        let slots = cap.saturating_sub(1);
        let mut chosen = vec![false; n];
        let mut count = 0;
        for name in self.enabled.iter().rev() {
            if count >= slots {
                break;
            }
            if let Some(&i) = self.by_name.get(name)
                && !chosen[i]
            {
                chosen[i] = true;
                count += 1;
            }
        }
        for flag in chosen.iter_mut() {
            if count >= slots {
                break;
            }
            if !*flag {
                *flag = true;
                count += 1;
            }
        }
        let mut decls = Vec::with_capacity(cap);
        let mut omitted = Vec::new();
        for (t, &c) in self.tools.iter().zip(&chosen) {
            if c {
                decls.push(t.decl());
            } else {
                omitted.push(t.name.clone());
            }
        }
        omitted.sort();
        if cap > 0 {
            decls.push(self.search_tools_decl(omitted.len()));
        }
        (
            decls,
            Omitted {
                count: omitted.len(),
                names: omitted,
            },
        )
    }

    /// The built-in `search_tools` declaration (`{query: string}`).
    pub fn search_tools_decl(&self, omitted: usize) -> Decl {
        Decl {
            name: SEARCH_TOOLS_NAME.to_string(),
            description: format!(
                "Find MCP tools that are not declared in this request ({omitted} more are \
                 available). Searches tool names and descriptions for the keywords in \
                 `query` (case-insensitive); the tools found can be called from your next \
                 step on. An empty query lists every tool."
            ),
            parameters_json_schema: Arc::new(json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "Keywords describing the tool you need, e.g. \"create issue\" or \"screenshot\"."
                    }
                },
                "required": ["query"]
            })),
        }
    }

    /// Searches tool names (model-facing and raw), server names, titles and
    /// descriptions, case-insensitively. Each whitespace-separated keyword scores more in
    /// a name than in a description; an exact name match scores highest. Tools matching
    /// no keyword are left out; an empty query returns every tool. Ranked by score, then
    /// by name.
    pub fn search(&self, query: &str) -> Vec<SearchHit> {
        let q = query.trim().to_lowercase();
        let tokens: Vec<&str> = q
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|t| !t.is_empty())
            .collect();
        let mut hits: Vec<SearchHit> = Vec::new();
        for t in &self.tools {
            let raw_tool = t.tool.name.to_lowercase();
            let names = format!(
                "{} {} {} {}",
                t.name.to_lowercase(),
                raw_tool,
                t.server.to_lowercase(),
                t.tool.title.as_deref().unwrap_or("").to_lowercase()
            );
            let desc = t.description.to_lowercase();
            let score = if tokens.is_empty() {
                1
            } else {
                let mut score = 0u32;
                let mut matched = 0u32;
                if raw_tool == q || t.name.to_lowercase() == q {
                    score += 100;
                }
                if tokens.len() > 1 && (names.contains(&q) || desc.contains(&q)) {
                    score += 20;
                }
                for tok in &tokens {
                    if names.contains(tok) {
                        score += 10;
                        matched += 1;
                    } else if desc.contains(tok) {
                        score += 3;
                        matched += 1;
                    }
                }
                if matched == 0 {
                    continue;
                }
                if matched as usize == tokens.len() {
                    score += 5;
                }
                score
            };
            hits.push(SearchHit {
                name: t.name.clone(),
                server: t.server.clone(),
                tool: t.tool.name.to_string(),
                description: t.description.clone(),
                score,
            });
        }
        hits.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.name.cmp(&b.name)));
        hits
    }

    /// Enables tools by model-facing name so they join the next request's declarations
    /// (most recently enabled first when they do not all fit). Returns the names that are
    /// not known.
    pub fn enable<I, S>(&mut self, names: I) -> Vec<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut unknown = Vec::new();
        for n in names {
            let n = n.as_ref();
            if !self.by_name.contains_key(n) {
                unknown.push(n.to_string());
                continue;
            }
            self.enabled.retain(|e| e != n);
            self.enabled.push(n.to_string());
        }
        unknown
    }

    /// The tools enabled through `search_tools`, most recent last.
    pub fn enabled(&self) -> &[String] {
        &self.enabled
    }

    /// Carries the enabled tools of a previous registry over (by server and tool, so a
    /// renamed tool stays enabled), e.g. after a server's tool list changed.
    pub fn carry_enabled_from(&mut self, old: &ToolRegistry) {
        let names: Vec<String> = old
            .enabled
            .iter()
            .filter_map(|n| old.resolve(n))
            .filter_map(|t| self.name_of(&t.server, &t.tool.name).map(String::from))
            .collect();
        self.enable(names);
    }

    /// Handles a `search_tools` call: searches, enables the best `limit` hits, and
    /// returns the JSON for `functionResponse.response` (`{"output": {...}}`, or
    /// `{"error": "..."}` when `query` is missing).
    pub fn handle_search_tools(&mut self, args: &Value, limit: usize) -> Value {
        let query = match args.get("query") {
            Some(Value::String(q)) => q.clone(),
            Some(Value::Null) | None => {
                return json!({"error": "search_tools needs a string argument `query`."});
            }
            Some(other) => other.to_string(),
        };
        let hits = self.search(&query);
        let total = hits.len();
        let shown: Vec<SearchHit> = hits.into_iter().take(limit).collect();
        self.enable(shown.iter().map(|h| h.name.as_str()));
        let tools: Vec<Value> = shown
            .iter()
            .map(|h| {
                let mut d: String = h
                    .description
                    .chars()
                    .take(SEARCH_DESCRIPTION_CHARS)
                    .collect();
                if h.description.chars().count() > SEARCH_DESCRIPTION_CHARS {
                    d.push('…');
                }
                json!({"name": h.name, "description": d})
            })
            .collect();
        let note = if shown.is_empty() {
            format!("No tool matched \"{query}\". Try other or fewer keywords.")
        } else if total > shown.len() {
            format!(
                "{} of {total} matching tools shown and enabled; they can be called from the next step on. Refine the query to see others.",
                shown.len()
            )
        } else {
            "These tools are enabled and can be called from the next step on.".to_string()
        };
        json!({"output": {"tools": tools, "note": note}})
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
