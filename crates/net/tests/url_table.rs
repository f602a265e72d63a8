//! The URL table: well over 80 URLs with the expected verdict under each policy,
//! judged by both stages (with a static resolver, so nothing touches the network)
//! and by `explain`. "ok" means allowed; anything else is the expected `rule()`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;

use switchboard_net::{
    Blocked, StaticResolver, UrlPolicy, check_url, explain_with, resolve_and_check_with,
};

fn resolver() -> StaticResolver {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    StaticResolver::new()
        .with("public.test", &[ip("93.184.216.34")])
        .with("good.com", &[ip("93.184.216.34")])
        .with("localhost.public.test", &[ip("93.184.216.34")])
        .with("v6public.test", &[ip("2606:4700:4700::1111")])
        .with("private.test", &[ip("10.0.0.5")])
        .with("loop.test", &[ip("127.0.0.1")])
        .with("meta.test", &[ip("169.254.169.254")])
        .with("mixed.test", &[ip("93.184.216.34"), ip("192.168.1.1")])
        .with("cgnat.test", &[ip("100.64.1.1")])
        .with("alibaba.test", &[ip("100.100.100.200")])
        .with("v6mapped.test", &[ip("::ffff:127.0.0.1")])
        .with("nat64meta.test", &[ip("64:ff9b::a9fe:a9fe")])
        .with("ula.test", &[ip("fd12::1")])
        .with("linklocal6.test", &[ip("fe80::1")])
        .with("zero.test", &[ip("0.0.0.0")])
        .with("127.0.0.1.nip.io", &[ip("127.0.0.1")])
        .with("metadata.google.internal", &[ip("169.254.169.254")])
        .with("metadata", &[ip("169.254.169.254")])
}

/// (url, strict, local, off)
const TABLE: &[(&str, &str, &str, &str)] = &[
    // Schemes.
    ("https://public.test/", "ok", "ok", "ok"),
    ("http://public.test/", "scheme", "ok", "ok"),
    ("HTTPS://PUBLIC.TEST/mcp", "ok", "ok", "ok"),
    ("ftp://public.test/", "scheme", "scheme", "ok"),
    ("ws://public.test/", "scheme", "scheme", "ok"),
    ("file:///etc/passwd", "scheme", "scheme", "ok"),
    ("javascript:alert(1)", "scheme", "scheme", "ok"),
    ("data:text/plain,hi", "scheme", "scheme", "ok"),
    ("gopher://127.0.0.1:6379/_INFO", "scheme", "scheme", "ok"),
    // IPv4 literals, every special-purpose range.
    ("https://8.8.8.8/", "ok", "ok", "ok"),
    ("https://127.0.0.1/", "loopback", "ok", "ok"),
    ("http://127.0.0.1:8080/mcp", "scheme", "ok", "ok"),
    ("https://127.255.255.254/", "loopback", "ok", "ok"),
    ("https://0.0.0.0/", "unspecified", "unspecified", "ok"),
    ("https://0.1.2.3/", "this-network", "this-network", "ok"),
    ("https://10.0.0.5/", "private", "ok", "ok"),
    ("https://172.16.0.1/", "private", "ok", "ok"),
    ("https://172.31.255.255/", "private", "ok", "ok"),
    ("https://172.32.0.1/", "ok", "ok", "ok"),
    ("https://192.168.0.1/", "private", "ok", "ok"),
    ("https://100.64.0.1/", "shared-address", "ok", "ok"),
    ("https://100.100.100.200/", "metadata", "metadata", "ok"),
    (
        "https://169.254.169.254/latest/meta-data/",
        "metadata",
        "metadata",
        "ok",
    ),
    (
        "http://169.254.170.2/v2/credentials",
        "scheme",
        "metadata",
        "ok",
    ),
    ("https://168.63.129.16/", "metadata", "metadata", "ok"),
    ("https://169.254.1.1/", "link-local", "link-local", "ok"),
    (
        "https://192.0.0.1/",
        "protocol-assignment",
        "protocol-assignment",
        "ok",
    ),
    ("https://192.0.2.1/", "documentation", "documentation", "ok"),
    (
        "https://198.51.100.1/",
        "documentation",
        "documentation",
        "ok",
    ),
    (
        "https://203.0.113.1/",
        "documentation",
        "documentation",
        "ok",
    ),
    ("https://192.88.99.1/", "6to4-relay", "6to4-relay", "ok"),
    ("https://198.18.0.1/", "benchmarking", "benchmarking", "ok"),
    ("https://224.0.0.1/", "multicast", "multicast", "ok"),
    ("https://239.255.255.250/", "multicast", "multicast", "ok"),
    ("https://240.0.0.1/", "reserved", "reserved", "ok"),
    ("https://255.255.255.255/", "broadcast", "broadcast", "ok"),
    // Other spellings of IPv4 addresses.
    ("https://2130706433/", "loopback", "ok", "ok"),
    ("http://2130706433/", "scheme", "ok", "ok"),
    ("https://0x7f.1/", "loopback", "ok", "ok"),
    ("https://0177.0.0.1/", "loopback", "ok", "ok"),
    ("https://127.1/", "loopback", "ok", "ok"),
    ("https://0x7f000001/", "loopback", "ok", "ok"),
    ("https://017700000001/", "loopback", "ok", "ok"),
    ("https://0x7f.0x0.0x0.0x1:8443/", "loopback", "ok", "ok"),
    ("https://127.0.0.1./", "loopback", "ok", "ok"),
    ("https://%31%32%37.0.0.1/", "loopback", "ok", "ok"),
    (
        "https://\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}/",
        "loopback",
        "ok",
        "ok",
    ),
    ("https://0/", "unspecified", "unspecified", "ok"),
    ("https://169.254.43518/", "metadata", "metadata", "ok"),
    ("https://0xa9fea9fe/", "metadata", "metadata", "ok"),
    ("https://0251.0376.0251.0376/", "metadata", "metadata", "ok"),
    ("https://10.1/", "private", "ok", "ok"),
    (
        "https://1.2.3.4.5/",
        "invalid-url",
        "invalid-url",
        "invalid-url",
    ),
    (
        "https://256.1.1.1/",
        "invalid-url",
        "invalid-url",
        "invalid-url",
    ),
    // IPv6 literals and embedded IPv4.
    ("https://[::1]/", "loopback", "ok", "ok"),
    ("http://[::1]:3000/", "scheme", "ok", "ok"),
    ("https://[::]/", "unspecified", "unspecified", "ok"),
    ("https://[::ffff:127.0.0.1]/", "loopback", "ok", "ok"),
    ("https://[::ffff:7f00:1]/", "loopback", "ok", "ok"),
    (
        "https://[::ffff:169.254.169.254]/",
        "metadata",
        "metadata",
        "ok",
    ),
    (
        "https://[::ffff:a9fe:a9fe]:80/",
        "metadata",
        "metadata",
        "ok",
    ),
    ("https://[::ffff:10.0.0.1]/", "private", "ok", "ok"),
    ("https://[::ffff:8.8.8.8]/", "ok", "ok", "ok"),
    ("https://[::ffff:0:127.0.0.1]/", "loopback", "ok", "ok"),
    ("https://[::127.0.0.1]/", "reserved", "reserved", "ok"),
    (
        "https://[64:ff9b::169.254.169.254]/",
        "metadata",
        "metadata",
        "ok",
    ),
    ("https://[64:ff9b::8.8.8.8]/", "ok", "ok", "ok"),
    ("https://[64:ff9b:1::a00:1]/", "private", "ok", "ok"),
    ("https://[2002:7f00:1::1]/", "loopback", "ok", "ok"),
    ("https://[2002:a9fe:a9fe::1]/", "metadata", "metadata", "ok"),
    ("https://[fc00::1]/", "private", "ok", "ok"),
    ("https://[fd00:ec2::254]/", "metadata", "metadata", "ok"),
    ("https://[fe80::1]/", "link-local", "link-local", "ok"),
    (
        "https://[fe80::1%25eth0]/",
        "invalid-url",
        "invalid-url",
        "invalid-url",
    ),
    ("https://[fec0::1]/", "site-local", "site-local", "ok"),
    ("https://[ff02::1]/", "multicast", "multicast", "ok"),
    (
        "https://[2001:db8::1]/",
        "documentation",
        "documentation",
        "ok",
    ),
    (
        "https://[2001::1]/",
        "protocol-assignment",
        "protocol-assignment",
        "ok",
    ),
    ("https://[100::1]/", "discard", "discard", "ok"),
    ("https://[2606:4700:4700::1111]/", "ok", "ok", "ok"),
    // localhost and friends.
    ("https://localhost/", "localhost", "ok", "ok"),
    ("http://localhost:3000/mcp", "scheme", "ok", "ok"),
    ("https://localhost./", "localhost", "ok", "ok"),
    ("https://LOCALHOST/", "localhost", "ok", "ok"),
    ("https://api.localhost/", "localhost", "ok", "ok"),
    ("https://a.b.localhost./", "localhost", "ok", "ok"),
    ("https://localhost.public.test/", "ok", "ok", "ok"),
    (
        "https://localhost../",
        "invalid-host",
        "invalid-host",
        "invalid-host",
    ),
    (
        "https://a..b/",
        "invalid-host",
        "invalid-host",
        "invalid-host",
    ),
    // Metadata names.
    (
        "https://metadata.google.internal/",
        "metadata-host",
        "metadata-host",
        "ok",
    ),
    (
        "http://METADATA.GOOGLE.INTERNAL./computeMetadata/v1/",
        "scheme",
        "metadata-host",
        "ok",
    ),
    ("https://metadata/", "metadata-host", "metadata-host", "ok"),
    (
        "https://instance-data.ec2.internal/",
        "metadata-host",
        "metadata-host",
        "resolution",
    ),
    // Names judged on what they resolve to.
    ("https://v6public.test/", "ok", "ok", "ok"),
    ("https://private.test/", "private", "ok", "ok"),
    ("https://loop.test:8443/", "loopback", "ok", "ok"),
    ("https://meta.test/", "metadata", "metadata", "ok"),
    ("https://mixed.test/", "private", "ok", "ok"),
    ("https://cgnat.test/", "shared-address", "ok", "ok"),
    ("https://alibaba.test/", "metadata", "metadata", "ok"),
    ("https://v6mapped.test/", "loopback", "ok", "ok"),
    ("https://nat64meta.test/", "metadata", "metadata", "ok"),
    ("https://ula.test/", "private", "ok", "ok"),
    ("https://linklocal6.test/", "link-local", "link-local", "ok"),
    ("https://zero.test/", "unspecified", "unspecified", "ok"),
    ("https://127.0.0.1.nip.io/", "loopback", "ok", "ok"),
    (
        "https://unknown.test/",
        "resolution",
        "resolution",
        "resolution",
    ),
    // Userinfo tricks: judged on the real host; credentials refused.
    (
        "https://good.com@127.0.0.1/",
        "loopback",
        "credentials",
        "ok",
    ),
    (
        "https://good.com@public.test/",
        "credentials",
        "credentials",
        "ok",
    ),
    (
        "https://user:pass@public.test/",
        "credentials",
        "credentials",
        "ok",
    ),
    (
        "https://:pass@public.test/",
        "credentials",
        "credentials",
        "ok",
    ),
    (
        "https://127.0.0.1:443@public.test/",
        "credentials",
        "credentials",
        "ok",
    ),
    (
        "https://good.com@169.254.169.254/",
        "metadata",
        "metadata",
        "ok",
    ),
    ("https://127.0.0.1\\@good.com/", "loopback", "ok", "ok"),
    ("https://good.com#@127.0.0.1/", "ok", "ok", "ok"),
    ("https://good.com?@127.0.0.1/", "ok", "ok", "ok"),
    ("https://public.test:443/", "ok", "ok", "ok"),
    // Malformed.
    ("not a url", "invalid-url", "invalid-url", "invalid-url"),
    ("", "invalid-url", "invalid-url", "invalid-url"),
    ("https://", "invalid-url", "invalid-url", "invalid-url"),
    ("http:/127.0.0.1/", "scheme", "ok", "ok"),
    ("https:127.0.0.1", "loopback", "ok", "ok"),
    ("  https://10.0.0.1/  ", "private", "ok", "ok"),
];

fn verdict<T>(r: Result<T, Blocked>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(b) => b.rule(),
    }
}

#[tokio::test]
async fn url_table() {
    assert!(TABLE.len() >= 80, "the table has {} rows", TABLE.len());
    let r = resolver();
    let mut failures = Vec::new();
    for &(url, strict, local, off) in TABLE {
        for (policy, want) in [
            (UrlPolicy::Strict, strict),
            (UrlPolicy::Local, local),
            (UrlPolicy::Off, off),
        ] {
            let got = verdict(resolve_and_check_with(url, policy, &r).await);
            let explained = explain_with(url, policy, &r).await;
            let explained_rule = explained.rule.unwrap_or("ok");
            if got != want || explained_rule != want || explained.allowed != (want == "ok") {
                failures.push(format!(
                    "{url:?} under {policy}: want {want}, resolve_and_check gave {got}, explain gave {explained_rule}"
                ));
            }
            // The syntax stage alone never allows what the whole guard blocks by
            // syntax, and never blocks what the whole guard allows.
            let syntax = verdict(check_url(url, policy));
            if syntax != "ok" && syntax != got {
                failures.push(format!(
                    "{url:?} under {policy}: check_url gave {syntax}, the guard {got}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn messages_name_the_rule() {
    let r = resolver();
    let err = resolve_and_check_with("https://10.0.0.5/", UrlPolicy::Strict, &r)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "blocked by URL policy `strict`: 10.0.0.5 is a private address (RFC 1918); use --url-policy local to allow private addresses"
    );
    let err = resolve_and_check_with("https://meta.test/", UrlPolicy::Local, &r)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "blocked by URL policy `local`: `meta.test` resolves to 169.254.169.254, a cloud metadata endpoint; only --url-policy off allows it"
    );
    let err = check_url("https://good.com@127.0.0.1/", UrlPolicy::Local).unwrap_err();
    assert!(err.to_string().contains("`127.0.0.1`"), "{err}");
    let err = check_url("https://[2002:a9fe:a9fe::1]/", UrlPolicy::Local).unwrap_err();
    assert!(
        err.to_string()
            .contains("a 6to4 address for 169.254.169.254"),
        "{err}"
    );
}
