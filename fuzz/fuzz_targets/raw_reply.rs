//! A line from a stdio server read as a reply to a raw call (`switchboard_mcp`'s raw
//! lane): it must never panic, and a result it locates must lie inside the line and be
//! a JSON object on its own.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_mcp::read_raw_reply;

fuzz_target!(|data: &[u8]| {
    // Half the inputs get a real envelope around them, so the parser goes deep.
    let mut framed = Vec::new();
    let line = match data.split_first() {
        Some((&b, rest)) if b % 2 == 0 => {
            framed.extend_from_slice(br#"{"jsonrpc":"2.0","id":"sb.1","result":"#);
            framed.extend_from_slice(rest);
            framed.push(b'}');
            &framed[..]
        }
        _ => data,
    };
    if let Some(reply) = read_raw_reply(line)
        && let Ok(range) = reply.outcome
    {
        let result = &line[range];
        assert!(result.starts_with(b"{"));
        let value: serde_json::Value =
            serde_json::from_slice(result).expect("a located result parses on its own");
        assert!(value.is_object());
    }
});
