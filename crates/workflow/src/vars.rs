//! Workflow variables: names mapped to strings or numbers (GemiHub's model), kept in
//! the order they were first set, and the text form a value takes inside `{{…}}`.

use std::collections::HashMap;

use indexmap::IndexMap;
use serde_json::{Map, Value};
use switchboard_chat::UntrustedKind as Kind;

/// The variables of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Variables {
    map: IndexMap<String, Value>,
    /// Variables whose text came from outside (a tool result, an HTTP answer): what it
    /// is and where it came from. A `command` node's prompt wraps them as untrusted.
    external: HashMap<String, (Kind, String)>,
}

impl Variables {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.map.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    /// Sets a variable (a new name goes last; an existing one keeps its place).
    pub fn set(&mut self, name: impl Into<String>, value: Value) {
        let name = name.into();
        self.external.remove(&name);
        self.map.insert(name, value);
    }

    /// Sets a string variable whose text came from outside the workflow (`kind`, from
    /// `source`, e.g. "server `demo`, tool `echo`").
    pub fn set_external(
        &mut self,
        name: impl Into<String>,
        value: impl Into<String>,
        kind: Kind,
        source: impl Into<String>,
    ) {
        let name = name.into();
        self.map.insert(name.clone(), Value::String(value.into()));
        self.external.insert(name, (kind, source.into()));
    }

    /// Where a variable's text came from, when it came from outside.
    pub fn external(&self, name: &str) -> Option<(Kind, &str)> {
        self.external.get(name).map(|(k, s)| (*k, s.as_str()))
    }

    /// Sets a string variable.
    pub fn set_text(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.set(name, Value::String(value.into()));
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// All variables as one JSON object.
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.map
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Map<_, _>>(),
        )
    }

    /// Inputs from a JSON object (`--vars-file`): strings and numbers are kept,
    /// booleans become `"true"`/`"false"`, anything else its JSON text.
    pub fn from_json_object(value: &Value) -> Result<Self, String> {
        let Value::Object(obj) = value else {
            return Err(
                "the variables file must hold one JSON object, like {\"name\": \"value\"}".into(),
            );
        };
        let mut vars = Self::new();
        for (k, v) in obj {
            vars.set(k.clone(), input_value(v));
        }
        Ok(vars)
    }

    /// Adds `key=value` (`--var`); a value that is a number is stored as a number.
    pub fn set_assignment(&mut self, assignment: &str) -> Result<(), String> {
        let (k, v) = assignment
            .split_once('=')
            .ok_or_else(|| format!("`{assignment}` is not key=value"))?;
        let k = k.trim();
        if k.is_empty() {
            return Err(format!("`{assignment}` has no variable name before `=`"));
        }
        self.set(k.to_string(), auto_number(v));
        Ok(())
    }

    /// Adds every variable of `other`, replacing same-named ones.
    pub fn extend(&mut self, other: &Variables) {
        for (name, origin) in &other.external {
            self.external.insert(name.clone(), origin.clone());
        }
        for (k, v) in other.iter() {
            self.set(k.to_string(), v.clone());
        }
    }
}

/// A JSON value as a workflow variable.
pub fn input_value(v: &Value) -> Value {
    match v {
        Value::String(_) | Value::Number(_) => v.clone(),
        Value::Bool(b) => Value::String(b.to_string()),
        Value::Null => Value::String(String::new()),
        other => Value::String(other.to_string()),
    }
}

/// `text` as a number when it is exactly a number's text form (GemiHub's rule:
/// `String(parseFloat(v)) === v`), else as a string.
pub fn auto_number(text: &str) -> Value {
    if let Some(n) = parse_number(text)
        && format_number(n) == text
    {
        return number_value(n);
    }
    Value::String(text.to_string())
}

/// A number in the plain decimal syntax (`-12`, `3.5`, `1e3`), nothing else.
pub fn parse_number(text: &str) -> Option<f64> {
    let t = text.trim();
    let body = t.strip_prefix(['-', '+']).unwrap_or(t);
    let mut saw_digit = false;
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.peek() {
        if c.is_ascii_digit() {
            saw_digit = true;
            chars.next();
        } else {
            break;
        }
    }
    if chars.peek() == Some(&'.') {
        chars.next();
        while let Some(c) = chars.peek() {
            if c.is_ascii_digit() {
                saw_digit = true;
                chars.next();
            } else {
                break;
            }
        }
    }
    if !saw_digit {
        return None;
    }
    if matches!(chars.peek(), Some('e' | 'E')) {
        chars.next();
        if matches!(chars.peek(), Some('-' | '+')) {
            chars.next();
        }
        let mut exp_digit = false;
        while let Some(c) = chars.peek() {
            if c.is_ascii_digit() {
                exp_digit = true;
                chars.next();
            } else {
                break;
            }
        }
        if !exp_digit {
            return None;
        }
    }
    if chars.next().is_some() {
        return None;
    }
    t.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// A number as JavaScript's `String(n)` writes it for everyday values (`5`, `2.5`).
pub fn format_number(n: f64) -> String {
    if n.is_finite() && n.fract() == 0.0 && n.abs() < 1e21 {
        format!("{n:.0}")
    } else {
        format!("{n}")
    }
}

/// A JSON number: an integer when the value is whole, else a float.
pub fn number_value(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// The text a value takes inside `{{…}}`: strings as they are, numbers as
/// JavaScript writes them, anything else as compact JSON.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n
            .as_f64()
            .map(format_number)
            .unwrap_or_else(|| n.to_string()),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_are_detected_only_when_exact() {
        assert_eq!(auto_number("3"), json!(3));
        assert_eq!(auto_number("2.5"), json!(2.5));
        assert_eq!(auto_number("03"), json!("03"));
        assert_eq!(auto_number("3 apples"), json!("3 apples"));
        assert_eq!(auto_number("inf"), json!("inf"));
        assert_eq!(auto_number(""), json!(""));
    }

    #[test]
    fn text_forms() {
        assert_eq!(value_text(&json!(5)), "5");
        assert_eq!(value_text(&json!(5.0)), "5");
        assert_eq!(value_text(&json!(0.5)), "0.5");
        assert_eq!(value_text(&json!({"a": [1]})), r#"{"a":[1]}"#);
    }
}
