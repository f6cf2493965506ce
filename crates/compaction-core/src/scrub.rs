//! Defence in depth for "an API key never appears in a log line or a span": every free-text
//! value the engine traces (failure texts) and the telemetry adapter records (inputs,
//! outputs, failure messages) passes through [`scrub`], which replaces anything shaped like
//! an API key with `__REDACTED__`. One owner: the telemetry crate uses this one.
//!
//! Adapters already promise that their errors never contain a key; this catches the case
//! where a host echoes one back in an error body, or a user pastes one into the chat.
//! Recognised shapes: a token that starts at a word boundary with a well-known key prefix
//! (`sk-`, `sk_`, `sk-or-v1-`, `AIza`, `xai-`, `gsk_`, `hf_`, `ghp_`, `pplx-`, …) followed by
//! at least 16 key characters, and the credential after `Bearer `.

use std::borrow::Cow;

/// What a key-shaped token is replaced with (OpenInference's `REDACTED_VALUE`).
pub const REDACTED: &str = "__REDACTED__";

/// Prefixes API keys of the common hosts start with.
const KEY_PREFIXES: &[&[u8]] = &[
    b"sk-",
    b"sk_",
    b"rk-",
    b"AIza",
    b"xai-",
    b"gsk_",
    b"hf_",
    b"ghp_",
    b"github_pat_",
    b"pplx-",
    b"tsk-",
];

/// A prefixed token is a key only with at least this many characters after the prefix, so
/// words such as `sk-learn` survive.
const MIN_KEY_BODY: usize = 16;

/// A bearer credential is at least this long.
const MIN_BEARER: usize = 8;

/// `text` with every key-shaped token replaced by `__REDACTED__`; borrowed when there was
/// nothing to replace.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        match secret_at(bytes, i) {
            Some((start, end)) => {
                let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
                // Every boundary here sits next to an ASCII byte, so slicing is safe.
                out.push_str(&text[copied..start]);
                out.push_str(REDACTED);
                copied = end;
                i = end;
            }
            // Nothing starts inside a word: skip to the next word boundary.
            None if is_key_byte(bytes[i]) => i = run_end(bytes, i, is_key_byte),
            None => i += 1,
        }
    }
    match out {
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(text),
    }
}

/// Characters a key is made of.
fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// Characters a bearer credential is made of (RFC 6750's b64token).
fn is_bearer_byte(b: u8) -> bool {
    is_key_byte(b) || matches!(b, b'.' | b'~' | b'+' | b'/' | b'=')
}

fn run_end(bytes: &[u8], from: usize, member: fn(u8) -> bool) -> usize {
    bytes[from..]
        .iter()
        .position(|b| !member(*b))
        .map_or(bytes.len(), |n| from + n)
}

/// The byte range of a secret starting at `i`, if one does.
fn secret_at(bytes: &[u8], i: usize) -> Option<(usize, usize)> {
    if i > 0 && is_key_byte(bytes[i - 1]) {
        return None;
    }
    let rest = &bytes[i..];
    for prefix in KEY_PREFIXES {
        if rest.starts_with(prefix) {
            let body = i + prefix.len();
            let end = run_end(bytes, body, is_key_byte);
            if end - body >= MIN_KEY_BODY {
                return Some((i, end));
            }
        }
    }
    // `Bearer TOKEN` and `Authorization: TOKEN` (a summary or an error may quote the header);
    // a credential has letters and digits, so prose ("Bearer instruments") is kept.
    for (word, min_gap) in [(&b"bearer"[..], 1), (&b"authorization:"[..], 0)] {
        if rest.len() > word.len() && rest[..word.len()].eq_ignore_ascii_case(word) {
            let spaces = run_end(bytes, i + word.len(), |b| b == b' ');
            if spaces >= i + word.len() + min_gap {
                let end = run_end(bytes, spaces, is_bearer_byte);
                let token = &bytes[spaces..end];
                let credential = token.len() >= MIN_BEARER
                    && token.iter().any(u8::is_ascii_digit)
                    && token.iter().any(u8::is_ascii_alphabetic);
                if credential {
                    return Some((spaces, end));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn replaces_openrouter_and_openai_keys_and_bearer_credentials() {
        let text = "401 from host: invalid key sk-or-v1-0123456789abcdef0123456789abcdef \
                    (header Authorization: Bearer abc.DEF-123_xyz=)";
        assert_eq!(
            scrub(text),
            "401 from host: invalid key __REDACTED__ (header Authorization: Bearer __REDACTED__)"
        );
        assert_eq!(
            scrub("key=sk-proj-AAAAAAAAAAAAAAAAAAAAAAAA;"),
            "key=__REDACTED__;"
        );
    }

    #[test]
    fn leaves_ordinary_research_prose_alone() {
        for text in [
            "risk-averse agents use sk-learn and ask-tell loops",
            "a bearer of bad news",
            "Bearer short",
            "Überblick: sk-短い",
            "",
        ] {
            assert!(matches!(scrub(text), Cow::Borrowed(_)), "{text}");
        }
    }

    fn key_body() -> impl Strategy<Value = String> {
        proptest::string::string_regex("[A-Za-z0-9_-]{16,64}").unwrap()
    }

    fn prose() -> impl Strategy<Value = String> {
        // Any text, including multi-byte characters; keys are then placed at word boundaries.
        proptest::string::string_regex("[ a-zA-Z0-9.,:;()\\-éü漢]{0,40}").unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// No key survives scrubbing, whatever text surrounds it.
        #[test]
        fn no_key_survives(
            before in prose(),
            after in prose(),
            prefix in proptest::sample::select(KEY_PREFIXES),
            body in key_body(),
        ) {
            let key = format!("{}{body}", std::str::from_utf8(prefix).unwrap());
            let text = format!("{before} {key} {after}");
            let scrubbed = scrub(&text);
            prop_assert!(!scrubbed.contains(&key), "{scrubbed}");
            prop_assert!(scrubbed.contains(REDACTED));
        }

        /// Text without any key prefix or `bearer` is returned unchanged.
        #[test]
        fn text_without_key_shapes_is_unchanged(text in prose()) {
            let lower = text.to_ascii_lowercase();
            prop_assume!(!lower.contains("bearer"));
            prop_assume!(!KEY_PREFIXES.iter().any(|p| {
                text.as_bytes().windows(p.len()).any(|w| w == *p)
            }));
            prop_assert_eq!(scrub(&text), text.as_str());
        }

        /// Scrubbing twice changes nothing more.
        #[test]
        fn scrubbing_is_idempotent(before in prose(), body in key_body()) {
            let text = format!("{before} sk-{body} Bearer {body}");
            let once = scrub(&text).into_owned();
            prop_assert_eq!(scrub(&once), once.as_str());
        }
    }
}
