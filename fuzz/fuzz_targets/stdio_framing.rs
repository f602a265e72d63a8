//! Bytes from a stdio server, in arbitrary chunks, through the bounded line framer: it
//! must never panic, never keep a line over its limit, and cut the same frames however
//! the bytes are chunked.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_mcp::{EnvelopeScan, Frame, LineFramer};

/// Frames with what an oversized message was seen to be cleared: how early it is
/// reported, and so what had been scanned by then, depends on the chunking.
fn normalized(frames: Vec<Frame>) -> Vec<Frame> {
    frames
        .into_iter()
        .map(|f| match f {
            Frame::Oversized { .. } => Frame::Oversized {
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
    let step = 1 + usize::from(head % 13);

    let mut whole = LineFramer::new(max);
    let mut expected = Vec::new();
    whole.push(rest, &mut expected);
    whole.finish(&mut expected);

    let mut chunked = LineFramer::new(max);
    let mut got = Vec::new();
    for chunk in rest.chunks(step) {
        chunked.push(chunk, &mut got);
    }
    chunked.finish(&mut got);

    for frame in &got {
        if let Frame::Message(line) = frame {
            assert!(line.len() <= max, "a line of {} bytes over {max}", line.len());
            let _ = EnvelopeScan::of(line);
        }
    }
    assert_eq!(normalized(expected), normalized(got));
});
