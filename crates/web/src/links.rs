//! Which URLs from a server become clickable links (URL-mode elicitation).
//!
//! A link is offered only for `https:` (any host), or `http:` to this machine
//! (`localhost`, `127.0.0.0/8`, `[::1]`), with no user name or password in it (they
//! hide where a link goes: `https://bank.example@evil.example`). Anything else —
//! `javascript:`, `data:`, `file:`, plain `http:` to another host, unparsable text,
//! control characters — is refused, and the page shows it as inert text with the reason.
//! The page checks again before it builds the link (`SB.safeLinkHref` in `app.js`).

use std::net::IpAddr;

use url::{Host, Url};

/// The longest URL offered as a link.
const MAX_LINK_LEN: usize = 4096;

/// Why a server's URL is not offered as a link.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkRefusal {
    #[error("it is empty")]
    Empty,
    #[error("it is longer than {MAX_LINK_LEN} characters")]
    TooLong,
    #[error("it contains spaces, control or invisible formatting characters")]
    Whitespace,
    #[error("it is not a valid URL ({0})")]
    Unparsable(String),
    #[error("`{0}:` links are not opened; only https (or http to this machine)")]
    Scheme(String),
    #[error(
        "plain http to another machine (`{0}`) is not opened: it could be read or changed on the way; the server should use https"
    )]
    InsecureRemote(String),
    #[error("it carries a user name or password, which hides where it goes")]
    Credentials,
    #[error("it has no host")]
    NoHost,
}

/// Zero-width and bidirectional formatting characters (they make a URL read as
/// another one).
fn invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

fn loopback_host(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(d) => {
            let d = d.trim_end_matches('.');
            d.eq_ignore_ascii_case("localhost")
        }
        Host::Ipv4(v4) => IpAddr::V4(*v4).is_loopback(),
        Host::Ipv6(v6) => IpAddr::V6(*v6).is_loopback(),
    }
}

/// What a page may do with a URL a server sent (an elicitation's): `{href}` to open, or
/// `{refused}` saying why not.
pub(crate) fn link_json(raw: &str) -> serde_json::Value {
    match link_target(raw) {
        Ok(url) => serde_json::json!({"href": url.as_str()}),
        Err(why) => {
            serde_json::json!({"refused": format!("Switchboard will not open this link: {why}.")})
        }
    }
}

/// The URL a server sent, as a link the person may open (normalised by the URL
/// parser), or why it is refused.
pub fn link_target(raw: &str) -> Result<Url, LinkRefusal> {
    if raw.is_empty() {
        return Err(LinkRefusal::Empty);
    }
    if raw.len() > MAX_LINK_LEN {
        return Err(LinkRefusal::TooLong);
    }
    if raw
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || invisible(c))
    {
        return Err(LinkRefusal::Whitespace);
    }
    let url = Url::parse(raw).map_err(|e| LinkRefusal::Unparsable(e.to_string()))?;
    let host = url.host().ok_or(LinkRefusal::NoHost)?;
    match url.scheme() {
        "https" => {}
        "http" if loopback_host(&host) => {}
        "http" => return Err(LinkRefusal::InsecureRemote(host.to_string())),
        other => return Err(LinkRefusal::Scheme(other.to_string())),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(LinkRefusal::Credentials);
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_and_loopback_http_are_links() {
        for (raw, href) in [
            (
                "https://example.com/auth?x=1#f",
                "https://example.com/auth?x=1#f",
            ),
            ("HTTPS://Example.COM", "https://example.com/"),
            ("http://localhost:3000/cb", "http://localhost:3000/cb"),
            ("http://LOCALHOST./cb", "http://localhost./cb"),
            ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/"),
            ("http://127.9.8.7/", "http://127.9.8.7/"),
            ("http://[::1]:9/x", "http://[::1]:9/x"),
            ("https://10.0.0.1/", "https://10.0.0.1/"),
        ] {
            assert_eq!(
                link_target(raw).map(|u| u.to_string()).as_deref(),
                Ok(href),
                "{raw}"
            );
        }
    }

    #[test]
    fn hostile_urls_are_refused() {
        for raw in [
            "",
            "javascript:alert(1)",
            "JavaScript:alert(document.cookie)",
            "javascript://example.com/%0Aalert(1)",
            "java\nscript:alert(1)",
            " javascript:alert(1)",
            "https://example.com/\u{202e}gpj.exe",
            "data:text/html,<script>alert(1)</script>",
            "file:///etc/passwd",
            "vbscript:msgbox(1)",
            "blob:https://example.com/uuid",
            "ftp://example.com/",
            "ws://localhost/",
            "mailto:a@example.com",
            "http://example.com/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://localhost.evil.example/",
            "http://127.0.0.1.evil.example/",
            "http://0.0.0.0/",
            "http://[::ffff:7f00:1]/",
            "https://bank.example@evil.example/",
            "https://user:pw@example.com/",
            "http://user@localhost/",
            "//example.com/path",
            "/relative/path",
            "example.com",
            "https://",
            "https://exa mple.com/",
            "https://exa\tmple.com/",
            "https://[::1/",
        ] {
            assert!(link_target(raw).is_err(), "accepted {raw:?}");
        }
        assert_eq!(
            link_target(&format!("https://example.com/{}", "a".repeat(5000))),
            Err(LinkRefusal::TooLong)
        );
        let why = link_target("http://example.com/").unwrap_err().to_string();
        assert!(why.contains("https"), "{why}");
    }
}
