//! "Did you mean …?" suggestions: for unknown settings keys, and the one phrase every
//! command and the workflow validator add after an unknown name ([`did_you_mean`]).

/// The closest known key to `unknown`, if it is close enough to be a likely typo.
pub(crate) fn closest<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    let lower = unknown.to_lowercase();
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(&lower, &k.to_lowercase()), *k))
        .filter(|(d, k)| *d <= (k.len() / 3).clamp(1, 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// ` (did you mean `x`?)` when one of `candidates` is close to `word`, else nothing.
pub fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(word, c), *c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

/// A warning for an unknown key at `path` in `file`.
pub(crate) fn unknown_key_warning(
    file: &std::path::Path,
    path: &str,
    key: &str,
    known: &[&str],
) -> String {
    match closest(key, known) {
        Some(s) => format!(
            "{}: {path}.{key}: unknown key, ignored (did you mean `{s}`?)",
            file.display()
        ),
        None => format!(
            "{}: {path}.{key}: unknown key, ignored (known keys: {})",
            file.display(),
            known.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[&str] = &["command", "url", "httpUrl", "timeout", "cwd", "env", "args"];

    #[test]
    fn typos() {
        assert_eq!(closest("httpurl", KNOWN), Some("httpUrl"));
        assert_eq!(closest("comand", KNOWN), Some("command"));
        assert_eq!(closest("timout", KNOWN), Some("timeout"));
        assert_eq!(closest("HttpURL", KNOWN), Some("httpUrl"));
        assert_eq!(closest("arg", KNOWN), Some("args"));
        assert_eq!(closest("description2xyz", KNOWN), None);
        assert_eq!(closest("foo", KNOWN), None);
    }
}
