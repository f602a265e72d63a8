//! Chat input rules shared by every front end: MCP prompts as slash commands (Gemini
//! CLI's argument rules) and `@server:uri` resource references.

use serde_json::{Map, Value};

/// A prompt argument as the slash command needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArg {
    pub name: String,
    pub required: bool,
    pub description: Option<String>,
}

/// The slash-command name of a prompt: whitespace runs replaced by `-`.
pub fn prompt_command_name(prompt: &str) -> String {
    prompt.split_whitespace().collect::<Vec<_>>().join("-")
}

/// Splits a command line like a shell would (quotes group words), keeping the text of
/// `--name="quoted value"` together.
fn split_words(input: &str) -> Result<Vec<String>, String> {
    shlex::split(input).ok_or_else(|| "unbalanced quotes in the arguments".to_string())
}

/// Parses a prompt's arguments with Gemini CLI's rules:
/// - `--name=value` and `--name="quoted value"` set named arguments;
/// - leftover words fill the still-unfilled *required* arguments in order; when exactly
///   one is unfilled it takes all leftover words joined by spaces (and so does the last
///   one when there are more words than arguments);
/// - missing required arguments are an error listing them: `Missing required
///   argument(s): --a, --b`.
pub fn parse_prompt_args(input: &str, args: &[PromptArg]) -> Result<Map<String, Value>, String> {
    let mut named = Map::new();
    let mut positional = Vec::new();
    for word in split_words(input)? {
        if let Some(rest) = word.strip_prefix("--") {
            let (k, v) = rest
                .split_once('=')
                .ok_or_else(|| format!("`--{rest}` needs a value: --{rest}=\"…\""))?;
            if !args.iter().any(|a| a.name == k) {
                let known: Vec<String> = args.iter().map(|a| format!("--{}", a.name)).collect();
                return Err(format!(
                    "unknown argument `--{k}`; this prompt takes: {}",
                    if known.is_empty() {
                        "no arguments".into()
                    } else {
                        known.join(", ")
                    }
                ));
            }
            named.insert(k.to_string(), Value::String(v.to_string()));
        } else {
            positional.push(word);
        }
    }
    let unfilled: Vec<&PromptArg> = args
        .iter()
        .filter(|a| a.required && !named.contains_key(&a.name))
        .collect();
    if !positional.is_empty() {
        if unfilled.is_empty() {
            return Err(format!(
                "unexpected words `{}`: every argument is already set (use --name=value)",
                positional.join(" ")
            ));
        }
        if unfilled.len() == 1 {
            named.insert(
                unfilled[0].name.clone(),
                Value::String(positional.join(" ")),
            );
        } else {
            let mut words = positional.into_iter();
            let last = unfilled.len() - 1;
            for (i, arg) in unfilled.iter().enumerate() {
                let value = if i == last {
                    words.by_ref().collect::<Vec<_>>().join(" ")
                } else {
                    match words.next() {
                        Some(w) => w,
                        None => break,
                    }
                };
                if !value.is_empty() {
                    named.insert(arg.name.clone(), Value::String(value));
                }
            }
        }
    }
    let missing: Vec<String> = args
        .iter()
        .filter(|a| a.required && !named.contains_key(&a.name))
        .map(|a| format!("--{}", a.name))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "Missing required argument(s): {}",
            missing.join(", ")
        ));
    }
    Ok(named)
}

/// The `help` text of a prompt command.
pub fn prompt_help(command: &str, description: Option<&str>, args: &[PromptArg]) -> String {
    let mut out = format!("/{command}");
    for a in args {
        if a.required {
            out.push_str(&format!(" --{}=\"…\"", a.name));
        } else {
            out.push_str(&format!(" [--{}=\"…\"]", a.name));
        }
    }
    if let Some(d) = description {
        out.push_str(&format!("\n  {d}"));
    }
    for a in args {
        out.push_str(&format!(
            "\n  --{}{}{}",
            a.name,
            if a.required { " (required)" } else { "" },
            a.description
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ));
    }
    out
}

/// A resource reference found in a chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRef {
    /// The text as typed (`@server:uri`).
    pub token: String,
    pub server: String,
    pub uri: String,
}

/// Finds `@server:uri` and `@server://path` references. `servers` are the known server
/// names; `owner_of(uri)` names the server that lists a URI (for `@scheme://path`
/// references whose scheme is not a server name). Trailing punctuation (`.,;:!?)`) is
/// not part of a reference.
pub fn find_resource_refs(
    message: &str,
    servers: &[String],
    owner_of: &dyn Fn(&str) -> Option<String>,
) -> Vec<ResourceRef> {
    let mut out = Vec::new();
    for word in message.split_whitespace() {
        let Some(body) = word.strip_prefix('@') else {
            continue;
        };
        let body = body.trim_end_matches(['.', ',', ';', '!', '?', ')', '"', '\'']);
        if body.is_empty() {
            continue;
        }
        let token = format!("@{body}");
        // `@server:uri` with a known server (longest server name first).
        let mut by_name: Option<ResourceRef> = None;
        let mut names: Vec<&String> = servers.iter().collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        for name in names {
            if let Some(rest) = body
                .strip_prefix(name.as_str())
                .and_then(|r| r.strip_prefix(':'))
            {
                // `@server://path`: the URI is the whole `server://path` unless the server
                // lists `//path`-less URIs; prefer what the server lists.
                let uri = if rest.starts_with("//") {
                    let full = body.to_string();
                    if owner_of(&full).is_some() {
                        full
                    } else {
                        rest.to_string()
                    }
                } else {
                    rest.to_string()
                };
                if !uri.is_empty() {
                    by_name = Some(ResourceRef {
                        token: token.clone(),
                        server: name.clone(),
                        uri,
                    });
                    break;
                }
            }
        }
        if let Some(r) = by_name {
            out.push(r);
            continue;
        }
        if body.contains("://")
            && let Some(server) = owner_of(body)
        {
            out.push(ResourceRef {
                token,
                server,
                uri: body.to_string(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(spec: &[(&str, bool)]) -> Vec<PromptArg> {
        spec.iter()
            .map(|(n, r)| PromptArg {
                name: n.to_string(),
                required: *r,
                description: None,
            })
            .collect()
    }

    #[test]
    fn names_replace_whitespace_runs() {
        assert_eq!(prompt_command_name("poem writer  v2"), "poem-writer-v2");
        assert_eq!(prompt_command_name("simple"), "simple");
    }

    #[test]
    fn named_and_quoted_values() {
        let a = args(&[("title", true), ("mood", false)]);
        let m = parse_prompt_args(r#"--title="Gemini CLI" --mood=reverent"#, &a).unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"title": "Gemini CLI", "mood": "reverent"})
        );
    }

    #[test]
    fn positional_fill_required_in_order() {
        let a = args(&[("title", true), ("mood", false)]);
        // exactly one unfilled required: takes all words
        let m = parse_prompt_args("Gemini CLI rocks", &a).unwrap();
        assert_eq!(Value::Object(m), json!({"title": "Gemini CLI rocks"}));
        let b = args(&[("city", true), ("state", true)]);
        let m = parse_prompt_args(r#""New York" NY"#, &b).unwrap();
        assert_eq!(Value::Object(m), json!({"city": "New York", "state": "NY"}));
        let m = parse_prompt_args("--state=CA Sacramento", &b).unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"city": "Sacramento", "state": "CA"})
        );
        let m = parse_prompt_args("a b c", &b).unwrap();
        assert_eq!(Value::Object(m), json!({"city": "a", "state": "b c"}));
    }

    #[test]
    fn missing_and_unknown_arguments_are_clear() {
        let b = args(&[("city", true), ("state", true)]);
        assert_eq!(
            parse_prompt_args("", &b).unwrap_err(),
            "Missing required argument(s): --city, --state"
        );
        assert_eq!(
            parse_prompt_args("Paris", &b).unwrap_err(),
            "Missing required argument(s): --state"
        );
        assert!(
            parse_prompt_args("--town=x", &b)
                .unwrap_err()
                .contains("unknown argument `--town`")
        );
        assert!(
            parse_prompt_args("--city", &b)
                .unwrap_err()
                .contains("needs a value")
        );
        assert!(
            parse_prompt_args("\"open", &b)
                .unwrap_err()
                .contains("unbalanced")
        );
        let none = args(&[]);
        assert!(
            parse_prompt_args("x", &none)
                .unwrap_err()
                .contains("unexpected words")
        );
        assert!(parse_prompt_args("", &none).unwrap().is_empty());
    }

    #[test]
    fn help_lists_arguments() {
        let a = vec![PromptArg {
            name: "code".into(),
            required: true,
            description: Some("the code".into()),
        }];
        let h = prompt_help("review", Some("Review code"), &a);
        assert!(h.starts_with("/review --code=\"…\""));
        assert!(h.contains("--code (required): the code"));
    }

    #[test]
    fn resource_references() {
        let servers = vec![
            "demo".to_string(),
            "my-server".to_string(),
            "my".to_string(),
        ];
        let owner = |uri: &str| -> Option<String> {
            match uri {
                "demo://readme" => Some("demo".into()),
                "file:///tmp/a.txt" => Some("my".into()),
                _ => None,
            }
        };
        let refs = find_resource_refs(
            "see @demo:demo://readme, and @my-server:res/1. also @file:///tmp/a.txt and @nobody:x and mail@x.com",
            &servers,
            &owner,
        );
        assert_eq!(refs.len(), 3, "{refs:?}");
        assert_eq!(
            refs[0],
            ResourceRef {
                token: "@demo:demo://readme".into(),
                server: "demo".into(),
                uri: "demo://readme".into()
            }
        );
        assert_eq!(refs[1].server, "my-server");
        assert_eq!(refs[1].uri, "res/1");
        assert_eq!(refs[2].server, "my");
        assert_eq!(refs[2].uri, "file:///tmp/a.txt");
        // @server://path form where the server lists the full URI
        let refs = find_resource_refs("@demo://readme", &servers, &owner);
        assert_eq!(refs[0].server, "demo");
        assert_eq!(refs[0].uri, "demo://readme");
    }
}
