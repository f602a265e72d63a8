//! Printing MCP results for people: text as text, images saved to a file and described,
//! links and embedded resources described, `structuredContent` as JSON.

use std::fmt::Write as _;

use base64::Engine as _;
use serde_json::Value;

/// Renders content blocks (as JSON values) for a terminal.
pub fn content_blocks(blocks: &[Value], out: &mut String) {
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let _ = writeln!(
                    out,
                    "{}",
                    block.get("text").and_then(Value::as_str).unwrap_or("")
                );
            }
            Some(kind @ ("image" | "audio")) => {
                let mime = block
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("application/octet-stream");
                let data = block.get("data").and_then(Value::as_str).unwrap_or("");
                let _ = writeln!(out, "{}", save_binary(kind, mime, data));
            }
            Some("resource_link") => {
                let uri = block.get("uri").and_then(Value::as_str).unwrap_or("");
                let name = block
                    .get("title")
                    .or_else(|| block.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or(uri);
                let _ = writeln!(out, "[link: {name} → {uri}]");
            }
            Some("resource") => {
                let res = block.get("resource").cloned().unwrap_or(Value::Null);
                resource_contents(std::slice::from_ref(&res), out);
            }
            _ => {
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(block).unwrap_or_default()
                );
            }
        }
    }
}

/// Renders `resources/read` contents.
pub fn resource_contents(contents: &[Value], out: &mut String) {
    for c in contents {
        let uri = c.get("uri").and_then(Value::as_str).unwrap_or("");
        let mime = c.get("mimeType").and_then(Value::as_str).unwrap_or("");
        if let Some(text) = c.get("text").and_then(Value::as_str) {
            let _ = writeln!(
                out,
                "── {uri}{} ──",
                if mime.is_empty() {
                    String::new()
                } else {
                    format!(" ({mime})")
                }
            );
            let _ = writeln!(out, "{text}");
        } else if let Some(blob) = c.get("blob").and_then(Value::as_str) {
            let _ = writeln!(out, "── {uri} ──");
            let _ = writeln!(
                out,
                "{}",
                save_binary(
                    "resource",
                    if mime.is_empty() {
                        "application/octet-stream"
                    } else {
                        mime
                    },
                    blob
                )
            );
        }
    }
}

fn extension(mime: &str) -> &'static str {
    match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/mpeg" => "mp3",
        "application/pdf" => "pdf",
        _ => "bin",
    }
}

/// Saves base64 data to a temp file and returns a line describing it.
fn save_binary(kind: &str, mime: &str, data: &str) -> String {
    let bytes = match base64::engine::general_purpose::STANDARD.decode(data.trim()) {
        Ok(b) => b,
        Err(e) => return format!("[{kind}: {mime}, invalid base64 ({e})]"),
    };
    let dir = std::env::temp_dir();
    let name = format!(
        "switchboard-{kind}-{}-{}.{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
        extension(mime)
    );
    let path = dir.join(name);
    // The temp folder is shared: create the file new (never through a placed link),
    // readable by the user only.
    let written = {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(&bytes))
    };
    match written {
        Ok(()) => format!(
            "[{kind}: {mime}, {} bytes, saved to {}]",
            bytes.len(),
            path.display()
        ),
        Err(e) => format!(
            "[{kind}: {mime}, {} bytes; could not save: {e}]",
            bytes.len()
        ),
    }
}
