//! Bytes of a Server-Sent Events stream, in arbitrary chunks, through the bounded SSE
//! parser: it must never panic, never return an event over its limit, and find the same
//! events however the bytes are chunked (CR LF split across chunks included).
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_mcp::{SseFrame, SseParser};

fn normalized(frames: Vec<SseFrame>) -> Vec<SseFrame> {
    frames
        .into_iter()
        .map(|f| match f {
            SseFrame::Oversized { .. } => SseFrame::Oversized {
                envelope: Default::default(),
                bytes: 0,
            },
            other => other,
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let max = 16 + usize::from(head) * 8;
    let step = 1 + usize::from(head % 11);

    let mut whole = SseParser::new(max);
    let mut expected = Vec::new();
    whole.push(rest, &mut expected);

    let mut chunked = SseParser::new(max);
    let mut got = Vec::new();
    for chunk in rest.chunks(step) {
        chunked.push(chunk, &mut got);
    }

    for frame in &got {
        if let SseFrame::Event(event) = frame {
            assert!(event.data.len() <= max * 3, "an event of {} bytes over {max}", event.data.len());
        }
    }
    assert_eq!(normalized(expected), normalized(got));
});
