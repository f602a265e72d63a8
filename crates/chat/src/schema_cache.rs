//! Normalized input schemas, computed once per schema and shared: the cache behind
//! [`crate::ToolRegistry::new`].
//!
//! Normalizing ([`normalize`]) every schema again on each registry build cost most of
//! the build (BENCHMARKS.md, "Registry and normalized declarations"), and a registry is
//! built at every conversation's first turn and whenever a server's tool list changes.
//! This cache makes a build pay only for schemas it has not seen.
//!
//! - **Key: the schema's content**, the SHA-256 of its JSON text. `serde_json` keeps key
//!   order, so equal text means the normalizer gets the same input. Two tools with the
//!   same schema share one result; a changed schema is a new key. The property renames the
//!   normalizer chose travel with their entry, so each schema keeps its own.
//! - **Fast path: the `Arc` holding the schema.** The host hands every snapshot the same
//!   `Arc`s while a server's tool list is unchanged, so a rebuild finds them by address
//!   without hashing. The entry holds a [`Weak`] to that `Arc`: its allocation cannot be
//!   freed and reused for another schema while the entry exists, and the content cannot
//!   change under it (`Arc::get_mut` refuses while a `Weak` exists; `Arc::make_mut`
//!   moves the value out instead).
//! - **Bounded.** Each build stamps the entries it used. After a build, schemas beyond the
//!   capacity (1,024 by default; identities beyond four times that) are dropped, least recently
//!   used first, never the ones that build used (a registry larger than the capacity
//!   stays cached whole until the next build). Identity entries whose `Arc` is gone are
//!   dropped at every build.
//! - **Locking.** One `std::sync::Mutex`, taken for at most three short spells per build,
//!   never while normalizing or hashing, and never across an `.await`: the cache is only
//!   called from synchronous code, and a `MutexGuard` is not `Send`.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError, Weak};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::schema::{Normalized, normalize};

/// An MCP tool's `inputSchema`, as `rmcp` holds it.
type Schema = Map<String, Value>;

/// SHA-256 of a schema's JSON text.
type ContentKey = [u8; 32];

/// How many schemas the process-wide cache keeps beyond the ones the latest build used.
pub(crate) const DEFAULT_CAPACITY: usize = 1024;

/// `Arc` identities kept per schema of capacity: equal schemas listed by several servers,
/// or listed again, sit in different `Arc`s, and an identity entry is small.
const IDENTITIES_PER_SCHEMA: usize = 4;

/// One normalized schema, shared by every tool whose input schema has the same content.
#[derive(Debug, Clone)]
pub(crate) struct SharedSchema {
    /// The normalizer's result (schema, renames, notes).
    pub(crate) normalized: Arc<Normalized>,
    /// `normalized.schema` again, as the declarations lend it to requests.
    pub(crate) declared: Arc<Value>,
}

impl SharedSchema {
    fn new(normalized: Normalized) -> Self {
        let declared = Arc::new(normalized.schema.clone());
        Self {
            normalized: Arc::new(normalized),
            declared,
        }
    }

    fn compute(schema: &Schema) -> Self {
        Self::new(normalize(&Value::Object(schema.clone())))
    }
}

struct ContentEntry {
    shared: SharedSchema,
    /// The last build that used it.
    used: u64,
}

struct IdentityEntry {
    /// Keeps the `Arc`'s allocation (not its content) alive, so its address stays this
    /// schema's.
    schema: Weak<Schema>,
    key: ContentKey,
    used: u64,
}

#[derive(Default)]
struct Inner {
    by_content: HashMap<ContentKey, ContentEntry>,
    /// By the address of the `Arc`'s value.
    by_identity: HashMap<usize, IdentityEntry>,
    /// Builds so far; stamps entries.
    builds: u64,
    /// How many times [`normalize`] ran, for the tests.
    #[cfg(test)]
    normalizations: usize,
}

/// Normalized schemas by content, bounded; see the module documentation.
pub(crate) struct SchemaCache {
    inner: Mutex<Inner>,
    capacity: usize,
}

impl std::fmt::Debug for SchemaCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("SchemaCache")
            .field("capacity", &self.capacity)
            .field("schemas", &inner.by_content.len())
            .field("arcs", &inner.by_identity.len())
            .finish()
    }
}

impl SchemaCache {
    /// An empty cache keeping up to `capacity` schemas beyond the latest build's.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            capacity,
        }
    }

    /// The process-wide cache every [`crate::ToolRegistry::new`] uses, so registries of
    /// different conversations share their work too.
    pub(crate) fn shared() -> &'static SchemaCache {
        static SHARED: LazyLock<SchemaCache> = LazyLock::new(|| SchemaCache::new(DEFAULT_CAPACITY));
        &SHARED
    }

    /// A poisoned lock only means another thread panicked between two complete map
    /// updates; every entry is still whole, so the cache stays usable.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The normalized form of each schema, in order: from the cache where possible, each
    /// missing content normalized once (outside the lock). Counts as one build for the
    /// bound.
    pub(crate) fn normalize_all(&self, schemas: &[&Arc<Schema>]) -> Vec<SharedSchema> {
        let mut found: Vec<Option<SharedSchema>> = vec![None; schemas.len()];

        // 1. By identity.
        let build = {
            let mut inner = self.lock();
            inner.builds += 1;
            let build = inner.builds;
            for (slot, schema) in found.iter_mut().zip(schemas) {
                *slot = inner.by_identity_hit(schema, build);
            }
            build
        };

        // 2. Content keys of the rest, outside the lock.
        let keyed: Vec<(usize, ContentKey)> = found
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_none())
            .map(|(i, _)| (i, content_key(schemas[i])))
            .collect();
        if keyed.is_empty() {
            self.lock().evict(self.capacity, build);
            return found.into_iter().flatten().collect();
        }

        // 3. By content.
        let mut missing: Vec<(usize, ContentKey)> = Vec::new();
        {
            let mut inner = self.lock();
            for (i, key) in keyed {
                match inner.by_content.get_mut(&key) {
                    Some(entry) => {
                        entry.used = build;
                        found[i] = Some(entry.shared.clone());
                        inner.remember_identity(schemas[i], key, build);
                    }
                    None => missing.push((i, key)),
                }
            }
        }

        // 4. Normalize each missing content once, outside the lock.
        let mut fresh: HashMap<ContentKey, SharedSchema> = HashMap::new();
        for &(i, key) in &missing {
            let shared = fresh
                .entry(key)
                .or_insert_with(|| SharedSchema::compute(schemas[i]));
            found[i] = Some(shared.clone());
        }

        // 5. Keep them, then enforce the bound.
        {
            let mut inner = self.lock();
            #[cfg(test)]
            {
                inner.normalizations += fresh.len();
            }
            for (key, shared) in fresh {
                inner
                    .by_content
                    .entry(key)
                    .or_insert(ContentEntry {
                        shared,
                        used: build,
                    })
                    .used = build;
            }
            for &(i, key) in &missing {
                inner.remember_identity(schemas[i], key, build);
            }
            inner.evict(self.capacity, build);
        }

        // Every slot is filled by now; computing again is only a safe fallback.
        found
            .into_iter()
            .zip(schemas)
            .map(|(s, schema)| s.unwrap_or_else(|| SharedSchema::compute(schema)))
            .collect()
    }

    /// How many times this cache ran the normalizer.
    #[cfg(test)]
    pub(crate) fn normalizations(&self) -> usize {
        self.lock().normalizations
    }

    /// How many schemas and how many `Arc` identities it holds.
    #[cfg(test)]
    pub(crate) fn sizes(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.by_content.len(), inner.by_identity.len())
    }
}

impl Inner {
    fn by_identity_hit(&mut self, schema: &Arc<Schema>, build: u64) -> Option<SharedSchema> {
        let entry = self.by_identity.get_mut(&address(schema))?;
        let content = self.by_content.get_mut(&entry.key)?;
        entry.used = build;
        content.used = build;
        Some(content.shared.clone())
    }

    fn remember_identity(&mut self, schema: &Arc<Schema>, key: ContentKey, build: u64) {
        self.by_identity.insert(
            address(schema),
            IdentityEntry {
                schema: Arc::downgrade(schema),
                key,
                used: build,
            },
        );
    }

    /// Drops identities whose `Arc` is gone, then the least recently used entries beyond
    /// the bound (never those of `build`), then identities whose content was dropped.
    fn evict(&mut self, capacity: usize, build: u64) {
        self.by_identity.retain(|_, e| e.schema.strong_count() > 0);
        drop_oldest(&mut self.by_content, capacity, build, |e| e.used);
        drop_oldest(
            &mut self.by_identity,
            capacity.saturating_mul(IDENTITIES_PER_SCHEMA),
            build,
            |e| e.used,
        );
        let contents = &self.by_content;
        self.by_identity
            .retain(|_, e| contents.contains_key(&e.key));
    }
}

/// Removes the entries with the oldest `used` stamps until at most `capacity` are left,
/// sparing those stamped `build`.
fn drop_oldest<K: Hash + Eq + Clone, E>(
    map: &mut HashMap<K, E>,
    capacity: usize,
    build: u64,
    used: impl Fn(&E) -> u64,
) {
    let Some(excess) = map.len().checked_sub(capacity).filter(|&n| n > 0) else {
        return;
    };
    let mut old: Vec<(u64, K)> = map
        .iter()
        .filter(|(_, e)| used(e) != build)
        .map(|(k, e)| (used(e), k.clone()))
        .collect();
    old.sort_unstable_by_key(|(stamp, _)| *stamp);
    for (_, key) in old.into_iter().take(excess) {
        map.remove(&key);
    }
}

/// The address of the `Arc`'s value: the identity key.
fn address(schema: &Arc<Schema>) -> usize {
    Arc::as_ptr(schema) as usize
}

/// SHA-256 of the schema's JSON text, written straight into the hasher.
fn content_key(schema: &Schema) -> ContentKey {
    struct HashWriter(Sha256);
    impl std::io::Write for HashWriter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = HashWriter(Sha256::new());
    // Writing a `Map` of `Value`s into a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut w, schema);
    let mut key = [0u8; 32];
    key.copy_from_slice(&w.0.finalize());
    key
}
