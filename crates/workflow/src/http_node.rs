//! The `http` node: one HTTP request through the URL guard (the CLI's URL policy),
//! with GemiHub's properties: `method` (GET), `contentType` (`json`, `text`,
//! `form-data`, `binary`), `headers` (JSON or `Key: Value` lines), `body`,
//! `responseType` (ours: `auto`, `text`, `json`, `binary`), `saveTo`, `saveStatus`,
//! `throwOnError` (default `"true"`: a 4xx/5xx status fails the node).
//!
//! Binary responses (and `responseType: binary`) are saved as GemiHub's file JSON:
//! `{path, basename, name, extension, mimeType, contentType: "binary", data}` with
//! the data in base64.

use std::time::Duration;

use base64::Engine as _;
use reqwest::Method;
use reqwest::header::CONTENT_TYPE;
use serde_json::{Value, json};

use crate::parse::Node;
use crate::run::{Runner, one_line};
use crate::template::render;
use crate::vars::{Variables, value_text};

fn parse_headers(text: &str) -> Vec<(String, String)> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => map.into_iter().map(|(k, v)| (k, value_text(&v))).collect(),
        _ => text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .filter(|(k, _)| !k.is_empty())
            .collect(),
    }
}

fn has_header(headers: &[(String, String)], name: &str) -> bool {
    headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name))
}

/// GemiHub's file JSON, when `text` is one.
fn file_data(text: &str) -> Option<Value> {
    let v: Value = serde_json::from_str(text).ok()?;
    (v.get("contentType").is_some() && v.get("data").is_some() && v.get("mimeType").is_some())
        .then_some(v)
}

fn guess_mime(filename: &str) -> &'static str {
    let ext = filename
        .rsplit('.')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "html" | "htm" => "text/html",
        "txt" => "text/plain",
        "json" => "application/json",
        "xml" => "application/xml",
        "css" => "text/css",
        "js" => "application/javascript",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        _ => "application/octet-stream",
    }
}

fn is_binary_mime(mime: &str) -> bool {
    if mime.starts_with("text/")
        || matches!(
            mime,
            "application/json" | "application/xml" | "application/javascript"
        )
        || mime.ends_with("+xml")
        || mime.ends_with("+json")
    {
        return false;
    }
    mime.starts_with("image/")
        || mime.starts_with("audio/")
        || mime.starts_with("video/")
        || matches!(
            mime,
            "application/pdf" | "application/zip" | "application/octet-stream"
        )
}

fn file_bytes(v: &Value) -> Result<(Vec<u8>, String), String> {
    let data = v.get("data").and_then(Value::as_str).unwrap_or("");
    let mime = v
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("application/octet-stream")
        .to_string();
    let bytes = if v.get("contentType").and_then(Value::as_str) == Some("binary") {
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| format!("the file's data is not base64: {e}"))?
    } else {
        data.as_bytes().to_vec()
    };
    Ok((bytes, mime))
}

/// A multipart/form-data body from a JSON object of fields. A key `name:file.ext`
/// sends the value as a file; a value holding file JSON sends that file.
fn form_data(fields_json: &str, vars: &Variables) -> Result<(Vec<u8>, String), String> {
    let fields = match serde_json::from_str::<Value>(fields_json) {
        Ok(Value::Object(m)) => m,
        _ => return Err("contentType form-data needs `body` to be a JSON object of fields".into()),
    };
    let boundary = format!(
        "----switchboard{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let mut body = Vec::new();
    for (key, value) in fields {
        let key = render(&key, vars);
        let value = render(&value_text(&value), vars);
        let (field, filename) = match key.split_once(':') {
            Some((f, name)) => (f.to_string(), Some(name.to_string())),
            None => (key.clone(), None),
        };
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        if let Some(file) = file_data(&value) {
            let (bytes, mime) = file_bytes(&file)?;
            let name = file
                .get("basename")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or(filename)
                .unwrap_or_else(|| "file".into());
            body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{field}\"; filename=\"{name}\"\r\nContent-Type: {mime}\r\n\r\n"
                )
                .as_bytes(),
            );
            body.extend_from_slice(&bytes);
        } else if let Some(name) = filename {
            body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{field}\"; filename=\"{name}\"\r\nContent-Type: {}\r\n\r\n",
                    guess_mime(&name)
                )
                .as_bytes(),
            );
            body.extend_from_slice(value.as_bytes());
        } else {
            body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{field}\"\r\n\r\n").as_bytes(),
            );
            body.extend_from_slice(value.as_bytes());
        }
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    Ok((body, format!("multipart/form-data; boundary={boundary}")))
}

/// Runs an `http` node; returns the summary.
pub(crate) async fn run(
    runner: &Runner,
    node: &Node,
    vars: &mut Variables,
) -> Result<String, String> {
    let r = |k: &str| node.get(k).map(|v| render(v, vars));
    let url = r("url").unwrap_or_default();
    let method_text = r("method")
        .unwrap_or_else(|| "GET".into())
        .to_ascii_uppercase();
    let method = Method::from_bytes(method_text.as_bytes())
        .map_err(|_| format!("unknown HTTP method `{method_text}`"))?;
    let content_type = r("contentType").unwrap_or_else(|| "json".into());
    let response_type = r("responseType").unwrap_or_else(|| "auto".into());
    let throw_on_error = r("throwOnError").is_none_or(|v| v != "false");
    let timeout = match r("timeout") {
        Some(t) => Duration::from_millis(
            t.trim()
                .parse::<u64>()
                .map_err(|_| format!("`timeout` is not a number of milliseconds: `{t}`"))?,
        ),
        None => runner.options().http_timeout,
    };
    let mut headers = r("headers").map(|h| parse_headers(&h)).unwrap_or_default();
    let mut body: Option<Vec<u8>> = None;
    if let Some(raw) = node.get("body")
        && matches!(method_text.as_str(), "POST" | "PUT" | "PATCH" | "DELETE")
    {
        match content_type.as_str() {
            "form-data" => {
                let (bytes, ct) = form_data(raw, vars)?;
                headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
                headers.push(("Content-Type".into(), ct));
                body = Some(bytes);
            }
            "binary" => {
                let resolved = render(raw, vars);
                let file = file_data(&resolved)
                    .or_else(|| vars.get(resolved.trim()).and_then(|v| file_data(&value_text(v))))
                    .ok_or("contentType binary needs `body` to be file JSON (from an http download), or the name of a variable holding one")?;
                let (bytes, mime) = file_bytes(&file)?;
                if !has_header(&headers, "content-type") {
                    headers.push(("Content-Type".into(), mime));
                }
                body = Some(bytes);
            }
            "text" => {
                if !has_header(&headers, "content-type") {
                    headers.push(("Content-Type".into(), "text/plain".into()));
                }
                body = Some(render(raw, vars).into_bytes());
            }
            _ => {
                if !has_header(&headers, "content-type") {
                    headers.push(("Content-Type".into(), "application/json".into()));
                }
                body = Some(render(raw, vars).into_bytes());
            }
        }
    }
    let guard = runner.guard()?;
    let mut request = guard.request(method, &url).timeout(timeout);
    for (k, v) in &headers {
        request = request.header(k.as_str(), v.as_str());
    }
    if let Some(b) = body {
        request = request.body(b);
    }
    let response = tokio::select! {
        r = guard.send(request) => r.map_err(|e| format!("HTTP request failed: {method_text} {url}: {e}"))?,
        () = runner.cancel().cancelled() => return Err("the run was cancelled".into()),
    };
    let status = response.status().as_u16();
    if let Some(to) = node.get("saveStatus") {
        vars.set(to, json!(status));
    }
    let mime = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| format!("reading the response of {method_text} {url} failed: {e}"))?;
    if status >= 400 && throw_on_error {
        let text = String::from_utf8_lossy(&bytes);
        return Err(format!(
            "HTTP {status} from {method_text} {url}: {}",
            one_line(&text)
        ));
    }
    let binary = match response_type.as_str() {
        "binary" => true,
        "text" | "json" => false,
        _ => is_binary_mime(&mime),
    };
    let saved = if binary {
        let mut basename = url
            .split(['?', '#'])
            .next()
            .and_then(|u| u.rsplit('/').next())
            .filter(|b| b.contains('.'))
            .unwrap_or("")
            .to_string();
        let mut extension = basename.rsplit('.').next().unwrap_or("").to_string();
        if basename.is_empty() {
            extension = match mime.as_str() {
                "image/png" => "png",
                "image/jpeg" => "jpg",
                "image/gif" => "gif",
                "image/webp" => "webp",
                "application/pdf" => "pdf",
                "application/json" => "json",
                _ => "",
            }
            .to_string();
            basename = if extension.is_empty() {
                "download".into()
            } else {
                format!("download.{extension}")
            };
        }
        let name = basename
            .rsplit_once('.')
            .map(|(n, _)| n.to_string())
            .unwrap_or_else(|| basename.clone());
        json!({
            "path": "",
            "basename": basename,
            "name": name,
            "extension": extension,
            "mimeType": mime,
            "contentType": "binary",
            "data": base64::engine::general_purpose::STANDARD.encode(&bytes),
        })
        .to_string()
    } else {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        match serde_json::from_str::<Value>(&text) {
            Ok(v) => v.to_string(),
            Err(e) if response_type == "json" => {
                return Err(format!(
                    "responseType json, but the response of {method_text} {url} is not JSON ({e}): {}",
                    one_line(&text)
                ));
            }
            Err(_) => text,
        }
    };
    let summary = format!("{status} ({} bytes, {mime})", bytes.len());
    if let Some(to) = node.get("saveTo") {
        vars.set_external(
            to,
            saved,
            switchboard_chat::UntrustedKind::HttpResponse,
            format!("{method_text} {url}"),
        );
    }
    Ok(summary)
}
