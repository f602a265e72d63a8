//! How the CLI answers servers' requests: elicitation on the terminal (each field asked,
//! an empty line keeps the schema's default), or, with no terminal, accept only when
//! every field has a default. A URL-mode request's link is printed only when
//! `switchboard_web::links::link_target` accepts it (https, or http to this machine);
//! any other URL is refused with the reason and the request declined.

use std::io::{BufRead, IsTerminal, Write};

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use switchboard_mcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use switchboard_mcp::{ClientHooks, ServerEvent, decline_elicitation};

/// Terminal hooks for one-shot commands.
#[derive(Debug, Default)]
pub struct CliHooks;

impl ClientHooks for CliHooks {
    fn elicit(
        &self,
        server: &str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        let server = server.to_string();
        let value = serde_json::to_value(&request).unwrap_or(Value::Null);
        Box::pin(async move {
            let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
            let answer =
                tokio::task::spawn_blocking(move || elicit_blocking(&server, &value, interactive))
                    .await;
            answer.unwrap_or_else(|_| decline_elicitation())
        })
    }

    fn on_event(&self, server: &str, event: ServerEvent) {
        if let ServerEvent::Log { level, data, .. } = event {
            tracing::info!(server, level, "{data}");
        }
    }
}

/// The schema's properties in order, with (name, schema, required).
fn fields(schema: &Value) -> Vec<(String, Value, bool)> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(k, v)| (k.clone(), v.clone(), required.contains(&k.as_str())))
                .collect()
        })
        .unwrap_or_default()
}

/// Answers an elicitation without a person: accept with the defaults when every field
/// has one, else decline.
pub fn elicit_defaults(value: &Value) -> ElicitResult {
    let schema = value.get("requestedSchema").cloned().unwrap_or(Value::Null);
    let mut content = Map::new();
    for (name, prop, _) in fields(&schema) {
        match prop.get("default") {
            Some(d) => {
                content.insert(name, d.clone());
            }
            None => return decline_elicitation(),
        }
    }
    if value.get("mode").and_then(Value::as_str) == Some("url") {
        return decline_elicitation();
    }
    ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
}

/// A URL-mode request's link to print, or the refusal to show (the URL made visible,
/// never as something a terminal would open).
fn url_to_show(value: &Value) -> Result<String, String> {
    let raw = value.get("url").and_then(Value::as_str).unwrap_or("");
    switchboard_web::links::link_target(raw)
        .map(|u| u.to_string())
        .map_err(|why| {
            format!(
                "Switchboard will not open this link: {why}. The server sent: {:?}",
                raw
            )
        })
}

/// A URL-mode request on the terminal: print the link and ask whether the person
/// finished there (accept) or not (decline); a refused URL is declined.
fn elicit_url(value: &Value) -> ElicitResult {
    let href = match url_to_show(value) {
        Ok(href) => href,
        Err(refusal) => {
            errln!("  {refusal}");
            errln!("  (declined)");
            return decline_elicitation();
        }
    };
    errln!("  Open this link in your browser: {href}");
    errout!("  Type y when done, n to decline, /cancel to cancel: ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).unwrap_or(0) == 0 {
        return ElicitResult::new(ElicitationAction::Cancel);
    }
    match line.trim() {
        "y" | "Y" | "yes" => ElicitResult::new(ElicitationAction::Accept),
        "/cancel" => ElicitResult::new(ElicitationAction::Cancel),
        _ => decline_elicitation(),
    }
}

fn parse_field(raw: &str, prop: &Value) -> Result<Value, String> {
    let ty = prop.get("type").and_then(Value::as_str).unwrap_or("string");
    match ty {
        "number" => raw
            .parse::<f64>()
            .map(Value::from)
            .map_err(|_| "enter a number".into()),
        "integer" => raw
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| "enter a whole number".into()),
        "boolean" => match raw.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" | "1" => Ok(Value::Bool(true)),
            "n" | "no" | "false" | "0" => Ok(Value::Bool(false)),
            _ => Err("answer yes or no".into()),
        },
        _ => {
            if let Some(options) = prop.get("enum").and_then(Value::as_array)
                && !options.iter().any(|o| o.as_str() == Some(raw))
            {
                let names: Vec<String> = options.iter().map(|o| o.to_string()).collect();
                return Err(format!("choose one of {}", names.join(", ")));
            }
            Ok(Value::String(raw.to_string()))
        }
    }
}

fn elicit_blocking(server: &str, value: &Value, interactive: bool) -> ElicitResult {
    if !interactive {
        let r = elicit_defaults(value);
        tracing::warn!(
            server,
            "elicitation answered without a terminal: {:?}",
            r.action
        );
        return r;
    }
    let message = value.get("message").and_then(Value::as_str).unwrap_or("");
    let schema = value.get("requestedSchema").cloned().unwrap_or(Value::Null);
    let mut err = std::io::stderr();
    errln!("\n[{server}] asks: {message}");
    if value.get("mode").and_then(Value::as_str) == Some("url") {
        return elicit_url(value);
    }
    errln!("(an empty answer keeps the default; type /decline or /cancel to refuse)");
    let stdin = std::io::stdin();
    let mut content = Map::new();
    for (name, prop, required) in fields(&schema) {
        let title = prop
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or(&name)
            .to_string();
        let ty = prop.get("type").and_then(Value::as_str).unwrap_or("string");
        let default = prop.get("default").cloned();
        loop {
            let d = default
                .as_ref()
                .map(|d| format!(" [{d}]"))
                .unwrap_or_default();
            errout!(
                "  {title} ({ty}{}){d}: ",
                if required { ", required" } else { "" }
            );
            let _ = err.flush();
            let mut line = String::new();
            if stdin.lock().read_line(&mut line).unwrap_or(0) == 0 {
                return ElicitResult::new(ElicitationAction::Cancel);
            }
            let line = line.trim();
            match line {
                "/decline" => return decline_elicitation(),
                "/cancel" => return ElicitResult::new(ElicitationAction::Cancel),
                "" => {
                    if let Some(d) = &default {
                        content.insert(name.clone(), d.clone());
                        break;
                    }
                    if !required {
                        break;
                    }
                    errln!("    this field is required");
                }
                raw => match parse_field(raw, &prop) {
                    Ok(v) => {
                        content.insert(name.clone(), v);
                        break;
                    }
                    Err(e) => {
                        errln!("    {e}");
                    }
                },
            }
        }
    }
    ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_accept_only_when_every_field_has_one() {
        let all = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "a": {"type": "string", "default": "x"}, "b": {"type": "number", "default": 2}}}});
        let r = elicit_defaults(&all);
        assert_eq!(r.action, ElicitationAction::Accept);
        assert_eq!(r.content, Some(json!({"a": "x", "b": 2})));
        let some = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "a": {"type": "string", "default": "x"}, "b": {"type": "number"}}}});
        assert_eq!(elicit_defaults(&some).action, ElicitationAction::Decline);
    }

    #[test]
    fn url_requests_print_only_safe_links() {
        let url = |u: &str| json!({"mode": "url", "message": "m", "url": u, "elicitationId": "e"});
        assert_eq!(
            url_to_show(&url("https://auth.example.com/x")).unwrap(),
            "https://auth.example.com/x"
        );
        assert_eq!(
            url_to_show(&url("http://127.0.0.1:9/cb")).unwrap(),
            "http://127.0.0.1:9/cb"
        );
        for hostile in [
            "javascript:alert(1)",
            "data:text/html,x",
            "file:///etc/passwd",
            "http://evil.example/",
            "https://bank.example@evil.example/",
            "\u{1b}]8;;https://evil.example\u{7}click\u{1b}]8;;\u{7}",
            "",
        ] {
            let refusal = url_to_show(&url(hostile)).unwrap_err();
            assert!(refusal.contains("will not open"), "{refusal}");
            assert!(
                !refusal.contains('\u{1b}'),
                "escaped for the terminal: {refusal}"
            );
        }
        assert!(url_to_show(&json!({"mode": "url"})).is_err());
    }

    #[test]
    fn fields_are_typed() {
        assert_eq!(
            parse_field("3", &json!({"type": "integer"})).unwrap(),
            json!(3)
        );
        assert!(parse_field("x", &json!({"type": "number"})).is_err());
        assert_eq!(
            parse_field("yes", &json!({"type": "boolean"})).unwrap(),
            json!(true)
        );
        assert!(parse_field("c", &json!({"type": "string", "enum": ["a", "b"]})).is_err());
    }
}
