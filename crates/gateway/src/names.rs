//! Downstream names for upstream tools and prompts: `{server}__{item}`, collision-proof
//! and reversible through a table (never parsed back).
//!
//! Scheme:
//! - the server name and the item name are each sanitized to `[A-Za-z0-9_.-]` (any other
//!   character becomes `_`) and joined with `__` (two underscores);
//! - a name longer than [`MAX_NAME_LEN`] (64, the limit most MCP clients and model APIs
//!   keep to) keeps its first 30 and last 31 characters around `___`;
//! - when two upstream items end up with the same name (sanitizing, cutting, or a server
//!   name containing `__`), **every** member of that collision group gets `_` + 8 hex
//!   characters of SHA-256 of `server\0item` (then 16, then 32 if a suffixed name still
//!   collides), so a name depends only on the set of items, never on which server
//!   connected first;
//! - [`NameTable::resolve`] maps a downstream name back to `(server, item)`.
//!
//! This module must not know about connections: it is a pure function of the names.

use std::collections::HashMap;

use switchboard_host::{cut_middle, identity_hash};

/// Longest downstream name.
pub const MAX_NAME_LEN: usize = 64;

/// Between the server part and the item part.
pub const SEPARATOR: &str = "__";

/// Hash lengths (hex characters) tried, in order, for colliding names.
const HASH_LEVELS: [usize; 4] = [0, 8, 16, 32];

/// `[A-Za-z0-9_.-]`, every other character as `_`.
pub fn sanitize(part: &str) -> String {
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The downstream name of `(server, item)` at a collision level (0: no suffix).
pub fn name_at(server: &str, item: &str, level: usize) -> String {
    let base = format!("{}{SEPARATOR}{}", sanitize(server), sanitize(item));
    let hash_len = HASH_LEVELS[level.min(HASH_LEVELS.len() - 1)];
    if hash_len == 0 {
        return cut_middle(&base, MAX_NAME_LEN);
    }
    let hash = identity_hash(server, item);
    format!(
        "{}_{}",
        cut_middle(&base, MAX_NAME_LEN - hash_len - 1),
        &hash[..hash_len]
    )
}

/// Downstream names ↔ `(server, item)`, for one kind of item (tools or prompts).
#[derive(Debug, Clone, Default)]
pub struct NameTable {
    back: HashMap<String, (String, String)>,
    forward: HashMap<(String, String), String>,
}

impl NameTable {
    /// Names every `(server, item)` pair. Duplicate pairs are named once.
    pub fn build<'a>(items: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut pairs: Vec<(String, String)> = items
            .into_iter()
            .map(|(s, i)| (s.to_string(), i.to_string()))
            .collect();
        pairs.sort();
        pairs.dedup();
        let mut levels = vec![0usize; pairs.len()];
        for _ in 0..HASH_LEVELS.len() {
            let mut groups: HashMap<String, Vec<usize>> = HashMap::new();
            for (idx, (s, i)) in pairs.iter().enumerate() {
                groups
                    .entry(name_at(s, i, levels[idx]))
                    .or_default()
                    .push(idx);
            }
            let mut bumped = false;
            for members in groups.values().filter(|m| m.len() > 1) {
                for &idx in members {
                    if levels[idx] + 1 < HASH_LEVELS.len() {
                        levels[idx] += 1;
                        bumped = true;
                    }
                }
            }
            if !bumped {
                break;
            }
        }
        let mut table = NameTable::default();
        for (idx, (s, i)) in pairs.into_iter().enumerate() {
            let name = name_at(&s, &i, levels[idx]);
            // A full 32-character hash collision would need a SHA-256 collision; the
            // first pair keeps the name and the other is left out rather than misrouted.
            if table.back.contains_key(&name) {
                tracing::warn!(
                    "two upstream items share the downstream name `{name}`; `{s}`/`{i}` is left out"
                );
                continue;
            }
            table.back.insert(name.clone(), (s.clone(), i.clone()));
            table.forward.insert((s, i), name);
        }
        table
    }

    /// The server and item behind a downstream name.
    pub fn resolve(&self, name: &str) -> Option<(&str, &str)> {
        self.back.get(name).map(|(s, i)| (s.as_str(), i.as_str()))
    }

    /// The downstream name of an upstream item.
    pub fn name_of(&self, server: &str, item: &str) -> Option<&str> {
        self.forward
            .get(&(server.to_string(), item.to_string()))
            .map(String::as_str)
    }

    /// Takes `(server, item)` out of the table; its name, when it had one. The other
    /// names stay as they were (they were chosen with it in the set).
    pub fn remove(&mut self, server: &str, item: &str) -> Option<String> {
        let name = self
            .forward
            .remove(&(server.to_string(), item.to_string()))?;
        self.back.remove(&name);
        Some(name)
    }

    /// How many names the table holds.
    pub fn len(&self) -> usize {
        self.back.len()
    }

    /// True when the table holds no name.
    pub fn is_empty(&self) -> bool {
        self.back.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_join_with_two_underscores() {
        let t = NameTable::build([("demo", "echo"), ("py", "echo")]);
        assert_eq!(t.name_of("demo", "echo"), Some("demo__echo"));
        assert_eq!(t.resolve("py__echo"), Some(("py", "echo")));
        assert_eq!(t.resolve("demo_echo"), None);
    }

    #[test]
    fn a_collision_hashes_every_member_whatever_the_order() {
        // `a__b` + `c` and `a` + `b__c` both make `a__b__c`.
        let one = NameTable::build([("a__b", "c"), ("a", "b__c"), ("x", "y")]);
        let two = NameTable::build([("x", "y"), ("a", "b__c"), ("a__b", "c")]);
        let n1 = one.name_of("a__b", "c").unwrap().to_string();
        let n2 = one.name_of("a", "b__c").unwrap().to_string();
        assert_ne!(n1, n2);
        assert!(n1.starts_with("a__b__c_") && n1.len() == "a__b__c_".len() + 8);
        assert_eq!(one.name_of("x", "y"), Some("x__y"));
        assert_eq!(two.name_of("a__b", "c"), Some(n1.as_str()));
        assert_eq!(one.resolve(&n2), Some(("a", "b__c")));
    }

    #[test]
    fn sanitizing_and_cutting_keep_names_valid_and_distinct() {
        let long = "t".repeat(100);
        let t = NameTable::build([("my server", "do/it"), ("my_server", "do_it"), ("s", &long)]);
        let a = t.name_of("my server", "do/it").unwrap();
        let b = t.name_of("my_server", "do_it").unwrap();
        assert_ne!(a, b);
        for n in [a, b, t.name_of("s", &long).unwrap()] {
            assert!(n.len() <= MAX_NAME_LEN, "{n}");
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
            );
        }
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn a_removed_pair_no_longer_resolves_and_the_others_keep_their_names() {
        let mut t = NameTable::build([("a__b", "c"), ("a", "b__c")]);
        let kept = t.name_of("a", "b__c").unwrap().to_string();
        let gone = t.remove("a__b", "c").unwrap();
        assert_eq!(t.resolve(&gone), None);
        assert_eq!(t.name_of("a__b", "c"), None);
        assert_eq!(t.resolve(&kept), Some(("a", "b__c")));
        assert_eq!(t.remove("a__b", "c"), None);
        assert_eq!(t.len(), 1);
    }
}
