//! The page's link check (`SB.safeLinkHref` in `ui/app.js`) agrees with the server's
//! (`switchboard_web::links::link_target`) on safe and hostile URLs: run under Node.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use switchboard_web::links::link_target;

const CASES: &[&str] = &[
    "https://example.com/auth?x=1#f",
    "HTTPS://Example.COM",
    "http://localhost:3000/cb",
    "http://127.0.0.1:8080/",
    "http://127.9.8.7/",
    "http://[::1]:9/x",
    "https://10.0.0.1/",
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
    "https://bank.example@evil.example/",
    "https://user:pw@example.com/",
    "http://user@localhost/",
    "//example.com/path",
    "/relative/path",
    "example.com",
    "not a url",
    "https://",
    "https://exa mple.com/",
    "https://[::1/",
];

#[test]
fn the_page_and_the_server_refuse_the_same_links() {
    let app_js =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui/app.js"))
            .unwrap();
    let start = app_js
        .find("SB.safeLinkHref = function")
        .expect("app.js defines SB.safeLinkHref");
    let end = start + app_js[start..].find("\n};").unwrap() + 3;
    let func = &app_js[start..end];
    let script = format!(
        "var SB = {{}};\n{func}\nvar cases = JSON.parse(process.argv[1]);\nconsole.log(JSON.stringify(cases.map(function (c) {{ return SB.safeLinkHref(c); }})));"
    );
    let out = Command::new("node")
        .arg("-e")
        .arg(&script)
        .arg(serde_json::to_string(CASES).unwrap())
        .output()
        .expect("node runs (it is needed for the browser tests too)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page: Vec<Option<String>> = serde_json::from_slice(&out.stdout).unwrap();
    let mut linked = 0;
    for (case, js) in CASES.iter().zip(page) {
        let rust = link_target(case).ok().map(|u| u.to_string());
        assert_eq!(js, rust, "page vs server on {case:?}");
        linked += usize::from(rust.is_some());
    }
    assert_eq!(linked, 7, "the first seven cases are links");
}
