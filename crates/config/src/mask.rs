//! Masking of secret values for display (`mcp get`).

/// Masks a secret: values of 8 characters or more show their first 2 characters
/// followed by `****`; shorter values become `****`.
pub fn mask_secret(value: &str) -> String {
    if value.chars().count() >= 8 {
        let head: String = value.chars().take(2).collect();
        format!("{head}****")
    } else {
        "****".to_string()
    }
}

const SECRET_NAME_PARTS: &[&str] = &[
    "authorization",
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "cookie",
    "credential",
    "auth",
    "private",
    "session",
    "signature",
];

/// Whether a header or environment variable name suggests a secret value.
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_NAME_PARTS.iter().any(|p| lower.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert_eq!(mask_secret("abcdefgh"), "ab****");
        assert_eq!(mask_secret("Bearer xyz123456"), "Be****");
        assert_eq!(mask_secret("short"), "****");
        assert_eq!(mask_secret(""), "****");
        assert_eq!(mask_secret("éàüöäßçñ"), "éà****");
    }

    #[test]
    fn secret_names() {
        for n in [
            "Authorization",
            "X-API-Key",
            "GITHUB_TOKEN",
            "client_secret",
            "DB_PASSWORD",
            "Cookie",
            "Proxy-Authorization",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["Content-Type", "PATH", "X-Custom-Header", "HOME"] {
            assert!(!is_secret_name(n), "{n}");
        }
    }
}
