//! The two pieces every front end uses to name a server's items under its own scheme
//! (the chat's `mcp_{server}_{tool}`, the gateway's `{server}__{name}`): cutting a name
//! to a length limit in the middle, and the stable hash of a `(server, item)` identity
//! that tells colliding names apart. Each front end keeps its own alphabet, separator
//! and limit; this module must not know any of them.

use sha2::{Digest, Sha256};

/// Cuts `name` to at most `max` characters in the middle: the head and the tail around
/// `___`, so both the server part and the item part stay recognisable.
pub fn cut_middle(name: &str, max: usize) -> String {
    let len = name.chars().count();
    if len <= max {
        return name.to_string();
    }
    let keep = max.saturating_sub(3);
    let head = keep / 2;
    let tail = keep - head;
    let first: String = name.chars().take(head).collect();
    let last: String = name.chars().skip(len - tail).collect();
    format!("{first}___{last}")
}

/// Lower-case hex SHA-256 of `server`, a NUL byte and `item`: the same identity always
/// gets the same suffix, whatever order servers connect in.
pub fn identity_hash(server: &str, item: &str) -> String {
    let mut h = Sha256::new();
    h.update(server.as_bytes());
    h.update([0u8]);
    h.update(item.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_head_and_tail_within_the_limit() {
        assert_eq!(cut_middle("short", 10), "short");
        let cut = cut_middle(&"x".repeat(30), 11);
        assert_eq!(cut.chars().count(), 11);
        assert!(cut.contains("___"));
        assert_eq!(cut_middle("0123456789", 9), "012___789");
        // Not ASCII: cut on characters, never inside one.
        assert_eq!(cut_middle("ééééééééé", 7), "éé___éé");
    }

    #[test]
    fn the_hash_separates_server_and_item() {
        assert_eq!(identity_hash("a", "b").len(), 64);
        assert_ne!(identity_hash("a_", "b"), identity_hash("a", "_b"));
        assert_eq!(identity_hash("s", "t"), identity_hash("s", "t"));
    }
}
