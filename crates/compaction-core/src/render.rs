//! How an event reads as text: its body (text, tool calls, tool results cut at
//! [`MAX_TOOL_CONTENT_CHARS`]), as the summarizer's slice, the context preview and recall
//! show it. Pure.

use serde_json::Value;

use crate::event::Event;

/// Tool payloads are cut at this many characters in the summarizer prompt (spec 6.2), so
/// that syntheses and their `# Cited Sources` bibliographies arrive intact.
pub(crate) const MAX_TOOL_CONTENT_CHARS: usize = 30_000;

/// A tool result's text: a lone string field (`result`, `output`, …) is used as it is,
/// anything else as compact JSON.
pub(crate) fn tool_payload(response: Option<&Value>) -> String {
    match response {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(map)) if map.len() == 1 => match map.values().next() {
            Some(Value::String(s)) => s.clone(),
            _ => Value::Object(map.clone()).to_string(),
        },
        Some(other) => other.to_string(),
    }
}

/// Cuts tool content at [`MAX_TOOL_CONTENT_CHARS`] characters, marking the cut.
pub(crate) fn cut_tool_content(text: &str) -> String {
    match text.char_indices().nth(MAX_TOOL_CONTENT_CHARS) {
        None => text.to_owned(),
        Some((byte, _)) => format!(
            "{}\n[… truncated at {MAX_TOOL_CONTENT_CHARS} characters]",
            &text[..byte]
        ),
    }
}

/// Renders an event's body: its text, tool calls and (cut) tool results.
pub fn render_event_body(event: &Event) -> String {
    let Some(content) = &event.content else {
        return String::new();
    };
    let mut pieces = Vec::new();
    for part in &content.parts {
        // A model's thought parts are its reasoning, not the conversation.
        if let Some(text) = &part.text
            && !part.is_thought()
        {
            pieces.push(text.trim().to_owned());
        }
        if let Some(call) = &part.function_call {
            let args = call.args.as_ref().map(Value::to_string).unwrap_or_default();
            pieces.push(format!(
                "[tool call {}({})]",
                call.name,
                cut_tool_content(&args)
            ));
        }
        if let Some(resp) = &part.function_response {
            pieces.push(format!(
                "[tool result {}]\n{}",
                resp.name,
                cut_tool_content(&tool_payload(resp.response.as_ref()))
            ));
        }
    }
    pieces.join("\n")
}
