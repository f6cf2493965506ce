//! Fuzz of the decision hosts' reply parsers (issue 20): any JSON body, including replies
//! of the right shape with any value in any place, never panics `decisions::parse_answer` or
//! `chat::parse_answer`; a refusal names the URL.
//!
//! Bounded for CI (256 cases); a longer run:
//! `PROPTEST_CASES=50000 cargo test -p adaptive-compaction-decision-client --test fuzz_replies`.

use proptest::prelude::*;
use serde_json::{Value, json};

const URL: &str = "http://127.0.0.1:9/v1/fuzz";

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(256)
}

/// Any JSON value, a few levels deep, with the keys the parsers look for among the
/// candidates.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("probability".to_owned()),
        Just("choices".to_owned()),
        Just("logprobs".to_owned()),
        Just("content".to_owned()),
        Just("top_logprobs".to_owned()),
        Just("token".to_owned()),
        Just("logprob".to_owned()),
        Just("message".to_owned()),
        Just("model".to_owned()),
        Just("usage".to_owned()),
        "[a-z_]{1,12}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![Just("yes".to_owned()), Just("no".to_owned()), ".{0,8}"].prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((key.clone(), inner), 0..5)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// A chat-completions reply with logprobs whose values are replaced by `filler`.
fn chat_shaped(filler: Value, at: usize) -> Value {
    let mut reply = json!({
        "model": "m",
        "choices": [{ "message": { "content": "yes" }, "logprobs": { "content": [
            { "token": "yes", "logprob": -0.1, "top_logprobs": [
                { "token": "yes", "logprob": -0.1 }, { "token": "no", "logprob": -2.3 } ] } ] } }],
        "usage": { "prompt_tokens": 10, "completion_tokens": 1 }
    });
    let pointers = [
        "/choices/0/logprobs/content/0/logprob",
        "/choices/0/logprobs/content/0/top_logprobs",
        "/choices/0/logprobs/content/0/top_logprobs/1/logprob",
        "/choices/0/logprobs/content/0/token",
        "/choices/0/logprobs",
        "/choices/0",
        "/usage",
        "/model",
    ];
    if let Some(slot) = reply.pointer_mut(pointers[at % pointers.len()]) {
        *slot = filler;
    }
    reply
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Any body: an answer, or an error naming the URL.
    #[test]
    fn fuzz_reply_parsers_never_panic(body in json_value(), filler in json_value(), at in any::<usize>()) {
        for body in [body, chat_shaped(filler.clone(), at), json!({ "probability": filler })] {
            if let Err(e) = decision_client::decisions::parse_answer(URL, &body) {
                prop_assert!(e.to_string().contains(URL), "{}", e);
            }
            if let Err(e) = decision_client::chat::parse_answer(URL, &body) {
                prop_assert!(e.to_string().contains(URL), "{}", e);
            }
        }
    }
}
