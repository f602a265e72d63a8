//! What a model can do, judged from its id: whether it takes function declarations at
//! all, and whether it takes images inside a function response. The chat loop asks here
//! before it builds a request, so a model's limits are known in one place.

/// True for models with function calling; false for Gemma, whose API rejects function
/// declarations: MCP tools are off for it.
pub fn model_supports_tools(model: &str) -> bool {
    !model.to_ascii_lowercase().contains("gemma")
}

/// Whether `model` takes images inside `functionResponse.parts` (Gemini 3 models).
pub fn supports_multimodal_function_response(model: &str) -> bool {
    let m = model.trim().to_ascii_lowercase();
    let m = m.strip_prefix("models/").unwrap_or(&m);
    m.starts_with("gemini-3")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemma_has_no_tools() {
        assert!(!model_supports_tools("gemma-3-27b-it"));
        assert!(model_supports_tools("gemini-2.5-flash"));
    }
}
