//! The transport cache: which HTTP transport worked for each URL last time, so that a
//! later run skips the stateless probe (legacy servers) or goes straight to SSE.
//! A missing or unreadable file is an empty cache; writes are atomic.

use std::collections::HashMap;
use std::path::Path;

use switchboard_mcp::TransportKind;

fn kind_name(k: TransportKind) -> &'static str {
    match k {
        TransportKind::Stdio => "stdio",
        TransportKind::StreamableHttp => "streamable-http",
        TransportKind::StatelessHttp => "stateless-http",
        TransportKind::Sse => "sse",
    }
}

fn kind_from(s: &str) -> Option<TransportKind> {
    Some(match s {
        "streamable-http" => TransportKind::StreamableHttp,
        "stateless-http" => TransportKind::StatelessHttp,
        "sse" => TransportKind::Sse,
        _ => return None,
    })
}

pub(crate) fn load(path: &Path) -> HashMap<String, TransportKind> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return HashMap::new();
    };
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str(&text) else {
        return HashMap::new();
    };
    map.into_iter()
        .filter_map(|(url, v)| v.as_str().and_then(kind_from).map(|k| (url, k)))
        .collect()
}

pub(crate) fn save(path: &Path, hints: &HashMap<String, TransportKind>) -> std::io::Result<()> {
    let mut sorted: Vec<(&String, &TransportKind)> = hints.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let map: serde_json::Map<String, serde_json::Value> = sorted
        .into_iter()
        .map(|(u, k)| (u.clone(), serde_json::Value::String(kind_name(*k).into())))
        .collect();
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(map))?;
    // Switchboard's own file: random `create_new`/`O_NOFOLLOW` temp file, fsync,
    // rename; a link in its place is refused.
    switchboard_config::replace_file(path, text.as_bytes(), switchboard_config::Replace::OWNED)
        .map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage_tolerated() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        assert!(load(&p).is_empty());
        let mut h = HashMap::new();
        h.insert("http://a/sse".to_string(), TransportKind::Sse);
        h.insert("http://b/mcp".to_string(), TransportKind::StatelessHttp);
        save(&p, &h).unwrap();
        assert_eq!(load(&p), h);
        std::fs::write(&p, "not json").unwrap();
        assert!(load(&p).is_empty());
    }

    #[test]
    fn links_are_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let p = dir.path().join("c.json");
        let mut h = HashMap::new();
        h.insert("http://a/sse".to_string(), TransportKind::Sse);
        // A link at the temp path the cache used to use: not followed.
        let old_tmp = p.with_extension(format!("tmp{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &old_tmp).unwrap();
        save(&p, &h).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(load(&p), h);
        // A link in the cache's place: refused, with the path in the error.
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        let e = save(&p, &h).unwrap_err().to_string();
        assert!(e.contains("symbolic link") && e.contains("c.json"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }
}
