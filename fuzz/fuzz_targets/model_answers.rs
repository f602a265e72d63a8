//! Model answers, as a model server could send them: JSON bytes read as a whole
//! chat-completions answer, as a series of streamed chunks (the elements of an array),
//! and as a Gemini response folded into a stream accumulator. Nothing may panic; every
//! failure must be an error the chat can report.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use switchboard_model::openai_api::{ChunkAssembler, from_chat_completion};
use switchboard_model::{GenerateResponse, StreamAccumulator};

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        let _ = from_chat_completion(&value);
        let chunks = match &value {
            Value::Array(items) => items.clone(),
            other => vec![other.clone()],
        };
        let mut assembler = ChunkAssembler::new();
        let mut failed = false;
        for chunk in &chunks {
            if assembler.push(chunk).is_err() {
                failed = true;
                break;
            }
        }
        if !failed {
            let _ = assembler.finish();
        }
        if let Ok(responses) = serde_json::from_value::<Vec<GenerateResponse>>(value) {
            let mut acc = StreamAccumulator::new();
            for r in &responses {
                acc.push(r);
            }
            let _ = acc.chunks();
        }
    }
});
