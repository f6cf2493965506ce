//! Google ADK's event shape and time encoding (google-adk 2.13.0), shared by the ADK stores on
//! SQLite ([`crate::blocking::AdkStore`]) and on PostgreSQL (`AdkPostgresStore`): which events
//! ADK would load, and `update_time` as SQLAlchemy stores a naive UTC `DateTime`
//! (`YYYY-MM-DD HH:MM:SS.ffffff`, the microsecond revision ADK's stale check compares).

use compaction_core::{Event, EventOutline, Timestamp};
use serde_json::{Map, Value};

/// The `actions` keys ADK 2.13's `EventActions` declares besides `compaction` and
/// `rewind_before_invocation_id` (which [`Event`] models). ADK refuses to load a session whose
/// events carry any other key (`extra='forbid'`), so an append with one is refused here.
const ADK_ACTION_KEYS: &[&str] = &[
    "agent_state",
    "artifact_delta",
    "end_of_agent",
    "escalate",
    "render_ui_widgets",
    "requested_auth_configs",
    "requested_tool_confirmations",
    "route",
    "set_model_response",
    "skip_summarization",
    "state_delta",
    "transfer_reason",
    "transfer_to_agent",
];

/// `snake_case` of an ADK camelCase alias (`stateDelta` → `state_delta`).
fn snake(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Why ADK would refuse to load `event`, or would apply an effect of it that the ADK stores do
/// not (a state delta); `None` when it can be appended.
pub(crate) fn refusal(event: &Event) -> Option<String> {
    if event.id.is_empty() || event.invocation_id.is_empty() {
        return Some("an ADK event needs a non-empty id and invocation_id".into());
    }
    if event.is_partial() {
        return Some("ADK never stores partial events".into());
    }
    if let Some(c) = &event.actions.compaction
        && c.start_timestamp > c.end_timestamp
    {
        return Some(format!(
            "a compaction that starts after it ends (start_timestamp {}, end_timestamp {})",
            c.start_timestamp, c.end_timestamp
        ));
    }
    for (k, v) in &event.actions.extra {
        let name = snake(k);
        if !ADK_ACTION_KEYS.contains(&name.as_str()) {
            return Some(format!(
                "actions.{k} is not an ADK 2.13 EventActions field; ADK would refuse to \
                 load the whole session (put engine data in custom_metadata)"
            ));
        }
        let empty = v.is_null() || v.as_object().is_some_and(Map::is_empty);
        if name == "state_delta" && !empty {
            return Some(
                "a non-empty actions.state_delta: this store does not apply state deltas".into(),
            );
        }
    }
    None
}

pub(crate) const MICROS_PER_SECOND: i64 = 1_000_000;
const SECONDS_PER_DAY: i64 = 86_400;

/// Epoch seconds to whole microseconds, as `datetime.fromtimestamp` rounds them
/// (truncate to the second, then round the fraction half to even). `None` when not finite or
/// out of range.
pub(crate) fn seconds_to_micros(seconds: f64) -> Option<i64> {
    if !seconds.is_finite() || seconds.abs() > 1e13 {
        return None;
    }
    let whole = seconds.trunc();
    let frac = ((seconds - whole) * 1e6).round_ties_even();
    // `whole` is within ±1e13, so the casts are exact.
    Some(whole as i64 * MICROS_PER_SECOND + frac as i64)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn number(s: &str, min: i64, max: i64) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i64 = s.parse().ok()?;
    (min..=max).contains(&n).then_some(n)
}

/// Parses SQLAlchemy's SQLite `DateTime` text (`YYYY-MM-DD HH:MM:SS[.ffffff]`, also with a `T`)
/// as UTC, to microseconds since the epoch.
pub(crate) fn parse_datetime_micros(text: &str) -> Option<i64> {
    let text = text.trim();
    let (date, time) = text.split_once([' ', 'T'])?;
    let mut d = date.splitn(3, '-');
    let year = number(d.next()?, 1, 9999)?;
    let month = number(d.next()?, 1, 12)?;
    let day = number(d.next()?, 1, 31)?;
    let (hms, frac) = match time.split_once('.') {
        Some((hms, frac)) => (hms, Some(frac)),
        None => (time, None),
    };
    let mut t = hms.splitn(3, ':');
    let hour = number(t.next()?, 0, 23)?;
    let minute = number(t.next()?, 0, 59)?;
    let second = number(t.next()?, 0, 59)?;
    let micros = match frac {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 6 => {
            number(f, 0, 999_999)? * 10_i64.pow(6 - f.len() as u32)
        }
        Some(_) => return None,
    };
    let days = days_from_civil(year, month, day);
    Some((days * SECONDS_PER_DAY + hour * 3600 + minute * 60 + second) * MICROS_PER_SECOND + micros)
}

/// Formats microseconds since the epoch the way SQLAlchemy stores a naive UTC `DateTime` on
/// SQLite: `YYYY-MM-DD HH:MM:SS.ffffff`.
pub(crate) fn format_datetime_micros(micros: i64) -> String {
    let secs = micros.div_euclid(MICROS_PER_SECOND);
    let frac = micros.rem_euclid(MICROS_PER_SECOND);
    let days = secs.div_euclid(SECONDS_PER_DAY);
    let sod = secs.rem_euclid(SECONDS_PER_DAY);
    let (y, m, d) = compaction_core::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{frac:06}",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_sqlalchemy_text() {
        // 2026-12-02 18:31:43.753972 UTC, as ADK 2.13 wrote it.
        let micros = parse_datetime_micros("2026-12-02 18:31:43.753972").unwrap();
        assert_eq!(micros, 1_796_236_303_753_972);
        assert_eq!(format_datetime_micros(micros), "2026-12-02 18:31:43.753972");
        assert_eq!(
            parse_datetime_micros("2026-12-02T18:31:43"),
            Some(1_796_236_303_000_000)
        );
        assert_eq!(
            parse_datetime_micros("2026-12-02 18:31:43.5"),
            Some(1_796_236_303_500_000)
        );
        assert_eq!(format_datetime_micros(0), "1970-01-01 00:00:00.000000");
        for bad in [
            "",
            "yesterday",
            "2026-13-01 00:00:00",
            "2026-01-01 00:00:00.1234567",
            "2026-01-01",
        ] {
            assert_eq!(parse_datetime_micros(bad), None, "{bad}");
        }
    }

    #[test]
    fn rounds_like_python_fromtimestamp() {
        assert_eq!(
            seconds_to_micros(1_796_236_303.753_972),
            Some(1_796_236_303_753_972)
        );
        assert_eq!(seconds_to_micros(0.000_000_5), Some(0));
        assert_eq!(seconds_to_micros(0.000_001_5), Some(2));
        assert_eq!(seconds_to_micros(f64::NAN), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn text_round_trips(micros in 0_i64..253_402_300_799_999_999) {
            proptest::prop_assert_eq!(parse_datetime_micros(&format_datetime_micros(micros)), Some(micros));
        }
    }
}

/// Why a stored ADK event row could not be rebuilt into an [`Event`].
#[derive(Debug)]
pub(crate) enum RowProblem {
    /// The JSON does not parse, or is not an event.
    Json(serde_json::Error),
    /// The JSON has no `timestamp` and the `timestamp` column (this text) is not a time.
    Time(String),
    /// A compaction whose range starts after it ends (these bounds, in epoch seconds).
    BackwardsCompaction {
        /// `start_timestamp`.
        start: f64,
        /// `end_timestamp`.
        end: f64,
    },
}

/// Rebuilds an event as ADK's `StorageEvent.to_event` does: the row's JSON (`data`), with
/// `id` and `invocation_id` from their columns and the JSON `timestamp` winning over the
/// column (`column_seconds` is read only when the JSON has none); a compaction event whose
/// range starts after it ends is refused (it would hide the history it claims to cover).
pub(crate) fn event_from_row(
    id: &str,
    invocation_id: String,
    data: Option<&str>,
    column_seconds: impl FnOnce() -> Result<f64, String>,
) -> Result<Event, RowProblem> {
    let mut map: Map<String, Value> = match data {
        None => Map::new(),
        Some(text) => serde_json::from_str(text).map_err(RowProblem::Json)?,
    };
    if !map.contains_key("timestamp") {
        map.insert(
            "timestamp".to_owned(),
            Value::from(column_seconds().map_err(RowProblem::Time)?),
        );
    }
    map.entry("author").or_insert_with(|| Value::from(""));
    map.remove("invocationId");
    map.insert("invocation_id".to_owned(), Value::from(invocation_id));
    map.insert("id".to_owned(), Value::from(id));
    let event: Event = serde_json::from_value(Value::Object(map)).map_err(RowProblem::Json)?;
    forward_compaction(event)
}

/// [`event_from_row`] for the gate's outline read: only what [`EventOutline`] keeps (no
/// content), with the same timestamp and compaction-range rules.
pub(crate) fn outline_from_row(
    id: String,
    invocation_id: String,
    data: Option<&str>,
    column_seconds: impl FnOnce() -> Result<f64, String>,
) -> Result<Event, RowProblem> {
    let outline: EventOutline = match data {
        None => EventOutline::default(),
        Some(text) => serde_json::from_str(text).map_err(RowProblem::Json)?,
    };
    let timestamp = match outline.timestamp {
        Some(ts) => ts,
        None => {
            let seconds = column_seconds().map_err(RowProblem::Time)?;
            Timestamp::new(seconds).map_err(|_| RowProblem::Time(seconds.to_string()))?
        }
    };
    forward_compaction(outline.into_event(id, invocation_id, timestamp))
}

/// Refuses a compaction event whose range starts after it ends.
fn forward_compaction(event: Event) -> Result<Event, RowProblem> {
    match &event.actions.compaction {
        Some(c) if c.start_timestamp > c.end_timestamp => Err(RowProblem::BackwardsCompaction {
            start: c.start_timestamp.seconds(),
            end: c.end_timestamp.seconds(),
        }),
        _ => Ok(event),
    }
}
