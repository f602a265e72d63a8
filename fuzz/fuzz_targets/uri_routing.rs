//! The gateway's URI routing (`switchboard_gateway::uris`): what several upstream servers
//! list, their templates and the URIs they returned are untrusted, and so is the URI a
//! client reads. Routing must never panic; a URI listed by exactly one server always
//! routes to it; a read routed to a server that neither listed nor returned it never
//! lands in an origin (scheme + authority) another server owns; a resource `belongs`
//! to a server only when no other server owns its origin or it lists it itself.
//!
//! Input: lines. Each line but the last is `<server digit 0-3><kind r|t|u><text>`:
//! a listed resource, a template, or a URI the server returned. The last line is the
//! URI a client reads.
#![no_main]

use std::collections::{BTreeSet, HashMap};

use libfuzzer_sys::fuzz_target;
use switchboard_gateway::uris::{
    Offered, PREFIX, Returned, UriTable, origin, template_origin,
};

const SERVERS: [&str; 4] = ["s0", "s1", "s/2", "s 3"];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines: Vec<&str> = text.split('\n').collect();
    let Some(read) = lines.pop() else {
        return;
    };
    let mut resources = Vec::new();
    let mut templates = Vec::new();
    let mut returned = Returned::default();
    let mut returned_by: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for line in lines.iter().take(64) {
        let mut chars = line.char_indices();
        let (Some((_, d)), Some((_, kind))) = (chars.next(), chars.next()) else {
            continue;
        };
        let Some(server) = d.to_digit(10).and_then(|i| SERVERS.get(i as usize)) else {
            continue;
        };
        let rest = chars.next().map_or("", |(i, _)| &line[i..]);
        match kind {
            'r' => resources.push(Offered { server, uri: rest }),
            't' => templates.push(Offered { server, uri: rest }),
            'u' => {
                returned.record(server, rest);
                returned_by.entry(rest).or_default().insert(server);
            }
            _ => {}
        }
    }
    let table = UriTable::build(&resources, &templates);

    // Who owns which origin, computed here on its own.
    let mut owners: HashMap<String, BTreeSet<&str>> = HashMap::new();
    let owned = resources
        .iter()
        .map(|r| (r.server, origin(r.uri)))
        .chain(templates.iter().map(|t| (t.server, template_origin(t.uri))));
    for (server, key) in owned {
        if let Some(key) = key {
            owners.entry(key).or_default().insert(server);
        }
    }
    let mut listers: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for r in &resources {
        listers.entry(r.uri).or_default().insert(r.server);
    }

    // A URI listed by exactly one server routes to it, as served and (unless it looks
    // qualified) as listed.
    for r in &resources {
        if listers[r.uri].len() != 1 {
            continue;
        }
        let want = Ok((r.server.to_string(), r.uri.to_string()));
        let served = table.resource_uri(r.server, r.uri).expect("a listed URI is served");
        assert_eq!(table.route_with(served, &returned), want, "{served}");
        if !r.uri.starts_with(PREFIX) {
            assert_eq!(table.route_with(r.uri, &returned), want, "{}", r.uri);
        }
    }

    // A read routed to a server that neither listed nor returned it is never in an
    // origin another server owns.
    let check = |uri: &str| {
        let Ok((server, upstream)) = table.route_with(uri, &returned) else {
            return;
        };
        if uri.starts_with(PREFIX) {
            return;
        }
        assert_eq!(upstream, uri);
        let listed = listers.get(uri).is_some_and(|s| s.contains(server.as_str()));
        let gave = returned_by.get(uri).is_some_and(|s| s.contains(server.as_str()));
        if listed || gave {
            return;
        }
        if let Some(set) = origin(uri).and_then(|o| owners.get(&o)) {
            assert!(
                set.iter().all(|s| *s == server),
                "{uri} routed to {server}, but {set:?} own its origin"
            );
        }
    };
    check(read);
    for uri in returned_by.keys() {
        check(uri);
    }

    // `belongs`: listed by the server, or no other server owns the origin.
    for server in SERVERS {
        if table.belongs(server, read) {
            let listed = listers.get(read).is_some_and(|s| s.contains(server));
            let foreign = origin(read)
                .and_then(|o| owners.get(&o))
                .is_some_and(|set| set.iter().any(|s| *s != server));
            assert!(listed || !foreign, "{read} belongs to {server}");
        }
    }
    let _ = table.route_template(read);
});
