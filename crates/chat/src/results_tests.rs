//! Unit tests for result mapping.

use super::*;
use serde_json::json;

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const FLASH: &str = "gemini-2.5-flash";
const G3: &str = "gemini-3-pro-preview";

fn map(v: Value) -> Mapped {
    map_result(&v, FLASH, None, DEFAULT_LIMIT_CHARS)
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn text_blocks_are_joined() {
    let m =
        map(json!({"content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}));
    assert_eq!(Value::from(m.response), json!({"output": "one\ntwo"}));
    assert_eq!(m.display, "one\ntwo");
    assert!(m.fr_parts.is_empty() && m.sibling_parts.is_empty());
    assert!(!m.is_error && !m.truncated);
}

#[test]
fn empty_results_say_so() {
    assert_eq!(
        Value::from(map(json!({"content": []})).response),
        json!({"output": "The tool returned no content."})
    );
    assert_eq!(
        Value::from(map(json!({})).response),
        json!({"output": "The tool returned no content."})
    );
}

#[test]
fn errors_use_the_error_key() {
    let m = map(json!({"content": [{"type": "text", "text": "boom"}], "isError": true}));
    assert_eq!(Value::from(m.response), json!({"error": "boom"}));
    assert!(m.is_error);
    assert_eq!(m.display, "boom");
    let m = map(json!({"content": [], "isError": true}));
    assert_eq!(
        Value::from(m.response),
        json!({"error": "The tool reported an error without details."})
    );
    let m = map(json!({"content": [{"type": "text", "text": "ok"}], "isError": false}));
    assert_eq!(Value::from(m.response), json!({"output": "ok"}));
}

#[test]
fn images_are_sibling_parts_on_older_models() {
    let m = map(json!({"content": [
        {"type": "text", "text": "here"},
        {"type": "image", "data": PNG, "mimeType": "image/png"}
    ]}));
    assert!(m.fr_parts.is_empty());
    assert_eq!(m.sibling_parts, [Part::inline_data("image/png", PNG)]);
    assert_eq!(
        Value::from(m.response),
        json!({"output": "here\n[Image (image/png) attached as inline data after this function response]"})
    );
    assert_eq!(m.display, "here\n[Image: image/png]");
}

#[test]
fn images_go_inside_the_function_response_on_gemini_3() {
    for model in [G3, "models/gemini-3-flash", "Gemini-3.1-pro"] {
        let m = map_result(
            &json!({"content": [{"type": "image", "data": PNG, "mimeType": "image/jpeg"}]}),
            model,
            None,
            1000,
        );
        assert_eq!(
            m.fr_parts,
            [FunctionResponsePart {
                inline_data: Some(Blob::new("image/jpeg", PNG)),
                ..FunctionResponsePart::default()
            }],
            "{model}"
        );
        assert!(m.sibling_parts.is_empty());
        assert_eq!(
            m.response["output"],
            "[Image (image/jpeg) attached to this function response]"
        );
        assert_eq!(m.display, "[Image: image/jpeg]");
    }
}

#[test]
fn multimodal_model_detection() {
    assert!(supports_multimodal_function_response(
        "gemini-3-pro-preview"
    ));
    assert!(supports_multimodal_function_response(
        "models/gemini-3-flash-preview"
    ));
    assert!(!supports_multimodal_function_response("gemini-2.5-flash"));
    assert!(!supports_multimodal_function_response("gemma-3-27b-it"));
    assert!(!supports_multimodal_function_response(""));
}

#[test]
fn audio_is_always_a_sibling_part() {
    for model in [FLASH, G3] {
        let m = map_result(
            &json!({"content": [{"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}]}),
            model,
            None,
            1000,
        );
        assert!(m.fr_parts.is_empty(), "{model}");
        assert_eq!(
            m.sibling_parts,
            [Part::inline_data("audio/wav", "UklGRg==")]
        );
        assert_eq!(m.display, "[Audio: audio/wav]");
        assert!(
            m.response["output"]
                .as_str()
                .unwrap()
                .starts_with("[Audio (audio/wav)")
        );
    }
}

#[test]
fn video_blobs_are_siblings_even_on_gemini_3() {
    let m = map_result(
        &json!({"content": [{"type": "resource", "resource": {"uri": "file:///v.mp4", "mimeType": "video/mp4", "blob": "AAAA"}}]}),
        G3,
        None,
        1000,
    );
    assert!(m.fr_parts.is_empty());
    assert_eq!(m.sibling_parts.len(), 1);
    assert_eq!(m.display, "[Embedded Resource: video/mp4]");
}

#[test]
fn unsupported_media_is_described_not_sent() {
    let m = map(json!({"content": [
        {"type": "image", "data": "R0lGOD", "mimeType": "image/gif"},
        {"type": "audio", "data": "AAAA", "mimeType": "audio/x-weird"}
    ]}));
    assert!(m.fr_parts.is_empty() && m.sibling_parts.is_empty());
    let out = m.response["output"].as_str().unwrap();
    assert!(
        out.contains(
            "[Image (image/gif, 6 bytes of base64) not sent: the model cannot take this media type]"
        ),
        "{out}"
    );
    assert!(out.contains("audio/x-weird"), "{out}");
    assert_eq!(m.display, "[Image: image/gif]\n[Audio: audio/x-weird]");
}

#[test]
fn svg_images_are_sent_as_text() {
    let svg = "<svg xmlns='http://www.w3.org/2000/svg'/>";
    let m =
        map(json!({"content": [{"type": "image", "data": b64(svg), "mimeType": "image/svg+xml"}]}));
    assert_eq!(m.response["output"], svg);
    assert!(m.sibling_parts.is_empty());
}

#[test]
fn media_without_data_is_noted() {
    let m = map(json!({"content": [{"type": "image", "mimeType": "image/png"}]}));
    assert_eq!(m.response["output"], "[Image (image/png) with no data]");
    assert_eq!(m.display, "[Image: image/png]");
    assert!(m.sibling_parts.is_empty());
}

#[test]
fn embedded_text_resources_are_their_text() {
    let m = map(
        json!({"content": [{"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"}}]}),
    );
    assert_eq!(Value::from(m.response), json!({"output": "hello"}));
    assert_eq!(m.display, "hello");
}

#[test]
fn embedded_blobs_are_notes_plus_inline_data() {
    let m = map(
        json!({"content": [{"type": "resource", "resource": {"uri": "file:///p.png", "mimeType": "image/png", "blob": PNG}}]}),
    );
    assert_eq!(m.sibling_parts, [Part::inline_data("image/png", PNG)]);
    assert_eq!(
        m.response["output"],
        "[Embedded resource file:///p.png (image/png) attached as inline data after this function response]"
    );
    assert_eq!(m.display, "[Embedded Resource: image/png]");

    let m = map_result(
        &json!({"content": [{"type": "resource", "resource": {"uri": "file:///d.pdf", "mimeType": "application/pdf", "blob": "JVBERi0="}}]}),
        G3,
        None,
        1000,
    );
    assert_eq!(m.fr_parts.len(), 1);

    // Text-like blobs are decoded.
    let m = map(
        json!({"content": [{"type": "resource", "resource": {"uri": "file:///c.json", "mimeType": "application/json", "blob": b64("{\"a\":1}")}}]}),
    );
    assert_eq!(m.response["output"], "{\"a\":1}");
    assert!(m.sibling_parts.is_empty());

    // Binary the model cannot take.
    let m = map(
        json!({"content": [{"type": "resource", "resource": {"uri": "file:///x.gz", "mimeType": "application/gzip", "blob": "H4sI"}}]}),
    );
    assert!(m.sibling_parts.is_empty());
    assert!(m.response["output"].as_str().unwrap().contains("not sent"));
    assert_eq!(m.display, "[Embedded Resource: application/gzip]");

    // No mime type at all.
    let m = map(
        json!({"content": [{"type": "resource", "resource": {"uri": "file:///x", "blob": "AAAA"}}]}),
    );
    assert_eq!(m.display, "[Embedded Resource: application/octet-stream]");

    // A text blob that is not valid UTF-8.
    let m = map(
        json!({"content": [{"type": "resource", "resource": {"uri": "file:///t", "mimeType": "text/plain", "blob": "//79"}}]}),
    );
    assert!(
        m.response["output"]
            .as_str()
            .unwrap()
            .contains("could not be decoded")
    );
}

#[test]
fn resource_links_name_title_or_name() {
    let m = map(json!({"content": [
        {"type": "resource_link", "uri": "file:///r1", "name": "r1", "title": "Report One"},
        {"type": "resource_link", "uri": "file:///r2", "name": "r2"},
        {"type": "resource_link", "uri": "file:///r3", "name": "r3", "title": ""}
    ]}));
    assert_eq!(
        m.response["output"],
        "Resource Link: Report One at file:///r1\nResource Link: r2 at file:///r2\nResource Link: r3 at file:///r3"
    );
    assert_eq!(
        m.display,
        "[Link to Report One: file:///r1]\n[Link to r2: file:///r2]\n[Link to r3: file:///r3]"
    );
}

#[test]
fn unknown_blocks_are_passed_as_json() {
    let m = map(json!({"content": [{"type": "hologram", "beam": 1}]}));
    let out = m.response["output"].as_str().unwrap();
    assert!(
        out.starts_with("[Content block of type hologram: {"),
        "{out}"
    );
    assert!(out.contains("\"beam\":1"));
    assert_eq!(m.display, "[hologram content]");
}

#[test]
fn structured_content_that_repeats_the_text_is_not_sent_twice() {
    let m = map(json!({
        "content": [{"type": "text", "text": "{\n  \"sum\": 3\n}"}],
        "structuredContent": {"sum": 3}
    }));
    assert_eq!(
        Value::from(m.response),
        json!({"output": "{\n  \"sum\": 3\n}"})
    );
}

#[test]
fn structured_content_that_adds_information_is_sent() {
    let m = map(json!({
        "content": [{"type": "text", "text": "It is sunny."}],
        "structuredContent": {"temperature": 22.5, "conditions": "sunny"}
    }));
    assert_eq!(
        Value::from(m.response),
        json!({"output": "It is sunny.", "structuredContent": {"temperature": 22.5, "conditions": "sunny"}})
    );
    assert_eq!(m.display, "It is sunny.");
}

#[test]
fn structured_content_alone_is_the_output() {
    let m = map(json!({"content": [], "structuredContent": {"time": "12:00"}}));
    assert_eq!(
        Value::from(m.response),
        json!({"output": {"time": "12:00"}})
    );
    assert_eq!(m.display, "{\n  \"time\": \"12:00\"\n}");
    let m = map(json!({"content": [], "structuredContent": null}));
    assert_eq!(
        Value::from(m.response),
        json!({"output": "The tool returned no content."})
    );
}

#[test]
fn structured_content_is_checked_against_the_output_schema() {
    let schema =
        json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]});
    let ok = map_result(
        &json!({"content": [], "structuredContent": {"sum": 3}}),
        FLASH,
        Some(&schema),
        1000,
    );
    assert_eq!(Value::from(ok.response), json!({"output": {"sum": 3}}));

    let bad = map_result(
        &json!({"content": [], "structuredContent": {"sum": "three"}}),
        FLASH,
        Some(&schema),
        1000,
    );
    let notes = bad.response["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1);
    let n = notes[0].as_str().unwrap();
    assert!(
        n.starts_with("structuredContent does not match the tool's outputSchema: at /sum:"),
        "{n}"
    );
    assert!(
        bad.display
            .contains("[Note: structuredContent does not match")
    );
    // The content still goes to the model.
    assert_eq!(bad.response["output"], json!({"sum": "three"}));

    let missing = map_result(
        &json!({"content": [{"type": "text", "text": "3"}]}),
        FLASH,
        Some(&schema),
        1000,
    );
    assert_eq!(
        missing.response["notes"],
        json!(["The tool declares an outputSchema but returned no structuredContent."])
    );
    // Errors need no structured content.
    let err = map_result(
        &json!({"content": [{"type": "text", "text": "x"}], "isError": true}),
        FLASH,
        Some(&schema),
        1000,
    );
    assert!(err.response.get("notes").is_none());
    // An output schema that does not compile is not held against the tool.
    let broken = json!({"type": 12});
    let m = map_result(
        &json!({"content": [], "structuredContent": {"a": 1}}),
        FLASH,
        Some(&broken),
        1000,
    );
    assert!(m.response.get("notes").is_none());
}

#[test]
fn long_text_is_truncated_with_a_note() {
    let long = "a".repeat(250);
    let m = map_result(
        &json!({"content": [{"type": "text", "text": long}]}),
        FLASH,
        None,
        100,
    );
    assert!(m.truncated);
    let out = m.response["output"].as_str().unwrap();
    assert!(out.starts_with(&"a".repeat(100)));
    assert!(!out.starts_with(&"a".repeat(101)));
    assert!(out.ends_with("[Truncated: the result has 250 characters; only the first 100 are shown, 150 left out.]"), "{out}");
    assert!(
        m.display
            .contains("[Truncated: the result has 250 characters")
    );
}

#[test]
fn text_at_the_limit_is_not_truncated() {
    let m = map_result(
        &json!({"content": [{"type": "text", "text": "b".repeat(100)}]}),
        FLASH,
        None,
        100,
    );
    assert!(!m.truncated);
    assert_eq!(m.response["output"], "b".repeat(100));
}

#[test]
fn truncation_respects_character_boundaries() {
    let text = "é日🎉".repeat(50);
    let m = map_result(
        &json!({"content": [{"type": "text", "text": text}]}),
        FLASH,
        None,
        10,
    );
    let out = m.response["output"].as_str().unwrap();
    assert!(out.starts_with("é日🎉é日🎉é日🎉é"));
    assert!(out.contains("150 characters"));
}

#[test]
fn zero_limit_means_no_limit() {
    let long = "z".repeat(500_000);
    let m = map_result(
        &json!({"content": [{"type": "text", "text": long}]}),
        FLASH,
        None,
        0,
    );
    assert!(!m.truncated);
    assert_eq!(m.response["output"].as_str().unwrap().len(), 500_000);
}

#[test]
fn structured_content_over_the_limit_is_left_out_with_a_note() {
    let big: Vec<u32> = (0..1000).collect();
    let m = map_result(
        &json!({"content": [{"type": "text", "text": "summary"}], "structuredContent": {"values": big}}),
        FLASH,
        None,
        200,
    );
    assert!(m.truncated);
    assert_eq!(m.response["output"], "summary");
    assert!(m.response.get("structuredContent").is_none());
    let note = m.response["notes"][0].as_str().unwrap();
    assert!(note.starts_with("structuredContent ("), "{note}");
    assert!(note.contains("exceeded the 200-character limit"), "{note}");
}

#[test]
fn structured_only_output_over_the_limit_is_cut_as_json_text() {
    let big: Vec<u32> = (0..1000).collect();
    let m = map_result(
        &json!({"content": [], "structuredContent": {"values": big}}),
        FLASH,
        None,
        50,
    );
    assert!(m.truncated);
    let out = m.response["output"].as_str().unwrap();
    assert!(out.starts_with("{\"values\":[0,1,2,"));
    assert!(out.contains("[Truncated: the result has"));
}

#[test]
fn images_are_not_counted_against_the_text_limit() {
    let m = map_result(
        &json!({"content": [{"type": "image", "data": "A".repeat(10_000), "mimeType": "image/png"}]}),
        FLASH,
        None,
        200,
    );
    assert!(!m.truncated);
    assert_eq!(m.sibling_parts.len(), 1);
}

#[test]
fn mixed_content_in_order() {
    let m = map_result(
        &json!({"content": [
            {"type": "text", "text": "Result:"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/mpeg"},
            {"type": "resource_link", "uri": "demo://r", "name": "r"},
            {"type": "resource", "resource": {"uri": "demo://t", "text": "inline text"}}
        ]}),
        G3,
        None,
        10_000,
    );
    assert_eq!(m.fr_parts.len(), 1);
    assert_eq!(m.sibling_parts.len(), 1);
    assert_eq!(
        m.display,
        "Result:\n[Image: image/png]\n[Audio: audio/mpeg]\n[Link to r: demo://r]\ninline text"
    );
}

#[test]
fn rmcp_results_map_the_same_way() {
    let v = json!({
        "content": [{"type": "text", "text": "hi"}, {"type": "image", "data": PNG, "mimeType": "image/png"}],
        "structuredContent": {"x": 1},
        "isError": false
    });
    let r: CallToolResult = serde_json::from_value(v.clone()).unwrap();
    let a = map_call_result(&r, FLASH, None, 1000);
    let b = map_result(&v, FLASH, None, 1000);
    assert_eq!(a, b);
    assert_eq!(a.response["structuredContent"], json!({"x": 1}));
    let err: CallToolResult = serde_json::from_value(
        json!({"content": [{"type": "text", "text": "bad"}], "isError": true}),
    )
    .unwrap();
    assert_eq!(
        Value::from(map_call_result(&err, FLASH, None, 1000).response),
        json!({"error": "bad"})
    );
}
