//! `{{…}}` templates, conditions and `set` expressions, with GemiHub's rules:
//!
//! - `{{var}}`, `{{a.b}}`, `{{arr[0]}}`, `{{arr[idx]}}` (`idx` another variable),
//!   `{{list.length}}`, and `{{var:json}}` (JSON-escaped, no quotes added). A string
//!   variable holding JSON (or a fenced ```` ```json ```` block) is parsed to look
//!   inside it. A placeholder that cannot be resolved is left as it is.
//! - Substitution is a single pass: text coming out of a variable is not expanded
//!   again (GemiHub repeats the pass; we do not, so tool output cannot pull in other
//!   variables).
//! - Conditions: `left op right` with `== != < > <= >= contains`; both sides numbers →
//!   numeric comparison, else text; quotes around a side are removed; `contains` looks
//!   into a JSON array on the left, else is a substring test.
//! - `set`: a single `number op number` (`+ - * / %`) is evaluated.

use serde_json::Value;

use crate::vars::{Variables, format_number, number_value, parse_number, value_text};

/// One `{{…}}` placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    /// Byte range in the template.
    pub start: usize,
    pub end: usize,
    /// The path inside the braces, without `:json`.
    pub path: String,
    pub json: bool,
}

impl Placeholder {
    /// The variable the path starts with (`a` in `a.b[0]`).
    pub fn root(&self) -> &str {
        let end = self.path.find(['.', '[']).unwrap_or(self.path.len());
        &self.path[..end]
    }

    /// Variables used as indexes (`idx` in `arr[idx]`).
    pub fn index_vars(&self) -> Vec<&str> {
        let mut out = Vec::new();
        let mut rest = self.path.as_str();
        while let Some(open) = rest.find('[') {
            let after = &rest[open + 1..];
            let Some(close) = after.find(']') else { break };
            let inner = &after[..close];
            if !inner.is_empty() && !inner.bytes().all(|b| b.is_ascii_digit()) {
                out.push(inner);
            }
            rest = &after[close + 1..];
        }
        out
    }
}

fn is_path_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'[' | b']')
}

/// Every placeholder in `text`, left to right.
pub fn placeholders(text: &str) -> Vec<Placeholder> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b'{' && bytes[i + 1] == b'{' {
            let start = i;
            let mut j = i + 2;
            while j < bytes.len() && is_path_byte(bytes[j]) {
                j += 1;
            }
            let path_end = j;
            let mut json = false;
            if text[j..].starts_with(":json") {
                json = true;
                j += 5;
            }
            if path_end > i + 2 && text[j..].starts_with("}}") {
                out.push(Placeholder {
                    start,
                    end: j + 2,
                    path: text[i + 2..path_end].to_string(),
                    json,
                });
                i = j + 2;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Whether `text` contains any placeholder.
pub fn has_placeholders(text: &str) -> bool {
    !placeholders(text).is_empty()
}

/// `text` with every placeholder replaced by `with`.
pub fn replace_placeholders(text: &str, with: &str) -> String {
    let mut out = String::new();
    let mut last = 0;
    for p in placeholders(text) {
        out.push_str(&text[last..p.start]);
        out.push_str(with);
        last = p.end;
    }
    out.push_str(&text[last..]);
    out
}

/// Fills in every placeholder that resolves.
pub fn render(text: &str, vars: &Variables) -> String {
    render_marking(text, vars, |_, _, s| s)
}

/// [`render`], passing the text of every variable that came from outside (see
/// [`Variables::external`]) through `mark` with its kind and source first.
pub fn render_marking(
    text: &str,
    vars: &Variables,
    mark: impl Fn(switchboard_chat::UntrustedKind, &str, String) -> String,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for p in placeholders(text) {
        out.push_str(&text[last..p.start]);
        match lookup(&p.path, vars) {
            Some(v) => {
                let mut s = value_text(&v);
                if let Some((kind, source)) = vars.external(p.root()) {
                    s = mark(kind, source, s);
                }
                if p.json {
                    out.push_str(&json_escape(&s));
                } else {
                    out.push_str(&s);
                }
            }
            None => out.push_str(&text[p.start..p.end]),
        }
        last = p.end;
    }
    out.push_str(&text[last..]);
    out
}

/// A string escaped for use inside a JSON string literal (no quotes added).
pub fn json_escape(s: &str) -> String {
    let quoted = Value::String(s.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// The JSON inside the first fenced code block (```` ```json … ``` ```` or
/// ```` ``` … ``` ````), when there is one.
pub fn fenced_json(text: &str) -> Option<&str> {
    let start = text.find("```")?;
    let mut rest = &text[start + 3..];
    rest = rest.strip_prefix("json").unwrap_or(rest);
    let end = rest.find("```")?;
    Some(rest[..end].trim())
}

/// A string as JSON: parsed directly, else the fenced block inside it.
pub fn parse_json_text(text: &str) -> Option<Value> {
    serde_json::from_str(text)
        .ok()
        .or_else(|| fenced_json(text).and_then(|inner| serde_json::from_str(inner).ok()))
}

/// Resolves a placeholder path.
pub fn lookup(path: &str, vars: &Variables) -> Option<Value> {
    if let Some(v) = vars.get(path) {
        return Some(v.clone());
    }
    let split = path.find(['.', '['])?;
    let root = &path[..split];
    let root_value = vars.get(root)?;
    let mut current = match root_value {
        Value::String(s) => parse_json_text(s)?,
        other => other.clone(),
    };
    let mut rest = &path[split..];
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let key = &after[..end];
            current = step_key(&current, key)?;
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let close = after.find(']')?;
            let index = &after[..close];
            current = step_index(&current, index, vars)?;
            rest = &after[close + 1..];
        } else {
            return None;
        }
    }
    Some(current)
}

fn step_key(current: &Value, key: &str) -> Option<Value> {
    match current {
        Value::Object(map) => map.get(key).cloned(),
        Value::Array(items) if key == "length" => Some(Value::from(items.len())),
        Value::Array(items) => key
            .parse::<usize>()
            .ok()
            .and_then(|i| items.get(i).cloned()),
        Value::String(s) if key == "length" => Some(Value::from(s.chars().count())),
        _ => None,
    }
}

fn step_index(current: &Value, index: &str, vars: &Variables) -> Option<Value> {
    let key = if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) {
        index.to_string()
    } else {
        let v = vars.get(index)?;
        match v {
            Value::Number(n) => n
                .as_f64()
                .map(|f| format_number(f.trunc()))
                .unwrap_or_else(|| n.to_string()),
            other => value_text(other).trim().to_string(),
        }
    };
    match current {
        Value::Array(items) => key
            .parse::<usize>()
            .ok()
            .and_then(|i| items.get(i).cloned()),
        Value::Object(map) => map.get(&key).cloned(),
        _ => None,
    }
}

/// A comparison operator of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Le,
    Ge,
    Lt,
    Gt,
    Contains,
}

impl Op {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Le => "<=",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Gt => ">",
            Op::Contains => "contains",
        }
    }
}

/// A condition split into its sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub left: String,
    pub op: Op,
    pub right: String,
}

/// Splits a condition at the first operator (in GemiHub's order) that occurs exactly
/// once.
pub fn parse_condition(text: &str) -> Option<Condition> {
    for op in [Op::Eq, Op::Ne, Op::Le, Op::Ge, Op::Lt, Op::Gt, Op::Contains] {
        let parts: Vec<&str> = text.split(op.as_str()).collect();
        if parts.len() == 2 {
            return Some(Condition {
                left: parts[0].trim().to_string(),
                op,
                right: parts[1].trim().to_string(),
            });
        }
    }
    None
}

fn unquote(s: &str) -> &str {
    let b = s.as_bytes();
    if b.len() >= 2 && matches!(b[0], b'"' | b'\'') && matches!(b[b.len() - 1], b'"' | b'\'') {
        &s[1..s.len() - 1]
    } else {
        s
    }
}

/// The resolved sides of a condition and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    pub left: String,
    pub right: String,
    pub result: bool,
}

/// Evaluates a condition against the variables.
pub fn evaluate(cond: &Condition, vars: &Variables) -> Evaluated {
    let left_raw = render(&cond.left, vars);
    let right_raw = render(&cond.right, vars);
    let left = unquote(&left_raw).to_string();
    let right = unquote(&right_raw).to_string();
    let nums = parse_number(&left).zip(parse_number(&right));
    let result = match (cond.op, nums) {
        (Op::Eq, Some((a, b))) => a == b,
        (Op::Ne, Some((a, b))) => a != b,
        (Op::Lt, Some((a, b))) => a < b,
        (Op::Gt, Some((a, b))) => a > b,
        (Op::Le, Some((a, b))) => a <= b,
        (Op::Ge, Some((a, b))) => a >= b,
        (Op::Eq, None) => left == right,
        (Op::Ne, None) => left != right,
        (Op::Lt, None) => left < right,
        (Op::Gt, None) => left > right,
        (Op::Le, None) => left <= right,
        (Op::Ge, None) => left >= right,
        (Op::Contains, _) => match serde_json::from_str::<Value>(&left) {
            Ok(Value::Array(items)) => items.iter().any(|item| match item {
                Value::String(s) => *s == right,
                Value::Number(_) | Value::Bool(_) => value_text(item) == right,
                _ => false,
            }),
            _ => left.contains(&right),
        },
    };
    Evaluated {
        left,
        right,
        result,
    }
}

/// Evaluates a `set` value: `a op b` on two numbers, else the rendered text (as a
/// number when it is one).
pub fn evaluate_expression(text: &str, vars: &Variables) -> Result<Value, String> {
    let rendered = render(text, vars);
    let t = rendered.trim();
    if let Some((a, op, b)) = split_arithmetic(t) {
        let value = match op {
            '+' => a + b,
            '-' => a - b,
            '*' => a * b,
            '/' => {
                if b == 0.0 {
                    return Err(format!("division by zero in `{t}`"));
                }
                a / b
            }
            _ => {
                if b == 0.0 {
                    return Err(format!("division by zero in `{t}`"));
                }
                a % b
            }
        };
        return Ok(number_value(value));
    }
    Ok(crate::vars::auto_number(&rendered))
}

fn is_simple_number(s: &str) -> bool {
    let body = s.strip_prefix('-').unwrap_or(s);
    let mut parts = body.splitn(2, '.');
    let int = parts.next().unwrap_or("");
    let frac = parts.next();
    !int.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
}

/// `number op number` with `+ - * / %` (numbers: `-?\d+(\.\d+)?`).
fn split_arithmetic(t: &str) -> Option<(f64, char, f64)> {
    // The operator is the first operator character after the first operand.
    let bytes = t.as_bytes();
    let mut i = usize::from(bytes.first() == Some(&b'-'));
    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
        i += 1;
    }
    let left = t[..i].trim();
    let rest = t[i..].trim_start();
    let op = rest.chars().next()?;
    if !matches!(op, '+' | '-' | '*' | '/' | '%') {
        return None;
    }
    let right = rest[1..].trim_start();
    if !is_simple_number(left) || !is_simple_number(right) {
        return None;
    }
    Some((left.parse().ok()?, op, right.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars() -> Variables {
        let mut v = Variables::new();
        v.set("name", json!("Ada \"L\""));
        v.set("n", json!(3));
        v.set("idx", json!(1));
        v.set("obj", json!(r#"{"a": {"b": [10, 20, {"c": "deep"}]}}"#));
        v.set("list", json!(r#"["x", "y", "z"]"#));
        v.set("fenced", json!("Here:\n```json\n{\"k\": 7}\n```\n"));
        v.set("auth.email", json!("literal@dotted"));
        v
    }

    #[test]
    fn placeholders_resolve() {
        let v = vars();
        assert_eq!(render("hi {{name}}", &v), "hi Ada \"L\"");
        assert_eq!(render("{{name:json}}", &v), "Ada \\\"L\\\"");
        assert_eq!(render("{{obj.a.b[1]}}", &v), "20");
        assert_eq!(render("{{obj.a.b[2].c}}", &v), "deep");
        assert_eq!(render("{{list[idx]}}", &v), "y");
        assert_eq!(render("{{list[0]}}", &v), "x");
        assert_eq!(render("{{list.length}}", &v), "3");
        assert_eq!(render("{{obj.a}}", &v), r#"{"b":[10,20,{"c":"deep"}]}"#);
        assert_eq!(render("{{fenced.k}}", &v), "7");
        assert_eq!(render("{{auth.email}}", &v), "literal@dotted");
        assert_eq!(render("{{missing}} {{n}}", &v), "{{missing}} 3");
        assert_eq!(render("{{{n}}}", &v), "{3}");
    }

    #[test]
    fn placeholder_parts() {
        let p = &placeholders("{{a.b[idx][0]:json}}")[0];
        assert_eq!(p.root(), "a");
        assert_eq!(p.index_vars(), vec!["idx"]);
        assert!(p.json);
    }

    #[test]
    fn conditions() {
        let v = vars();
        let eval = |s: &str| evaluate(&parse_condition(s).unwrap(), &v).result;
        assert!(eval("{{n}} == 3"));
        assert!(eval("{{n}} < 10"));
        assert!(!eval("{{n}} >= 4"));
        assert!(eval("{{list}} contains y"));
        assert!(!eval("{{list}} contains w"));
        assert!(eval("{{name}} contains Ada"));
        assert!(eval("\"abc\" == 'abc'"));
        assert!(eval("3.0 == 3"));
        assert!(parse_condition("no operator").is_none());
    }

    #[test]
    fn expressions() {
        let v = vars();
        assert_eq!(evaluate_expression("{{n}} + 1", &v).unwrap(), json!(4));
        assert_eq!(evaluate_expression("7 % 4", &v).unwrap(), json!(3));
        assert_eq!(evaluate_expression("-2 * 3", &v).unwrap(), json!(-6));
        assert_eq!(evaluate_expression("10 / 4", &v).unwrap(), json!(2.5));
        assert!(evaluate_expression("1 / 0", &v).is_err());
        assert_eq!(evaluate_expression("5", &v).unwrap(), json!(5));
        assert_eq!(
            evaluate_expression("{{n}} apples", &v).unwrap(),
            json!("3 apples")
        );
        assert_eq!(
            evaluate_expression("1 + 2 + 3", &v).unwrap(),
            json!("1 + 2 + 3")
        );
    }
}
