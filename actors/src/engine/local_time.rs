//! Times as a bot reads them: an entry's time in its owner's time zone.
//!
//! Every time shown comes from a stored `created_at` (the store's clock),
//! never from the wall clock at the moment a request is built: a turn that
//! resumes after a crash sends the same text as its first attempt, and the
//! context's messages stay the same from request to request (what provider
//! prompt caches reuse).

use chrono::DateTime;
use chrono::Offset;
use chrono_tz::Tz;

use crate::prompts::prompts;

/// `ms` (since the epoch) in `tz`; `None` out of chrono's range.
fn local(ms: i64, tz: Tz) -> Option<DateTime<Tz>> {
    DateTime::from_timestamp_millis(ms).map(|t| t.with_timezone(&tz))
}

/// An offset from UTC as people write it: `UTC+8`, `UTC-3:30`, `UTC+0`.
fn utc_offset(seconds: i32) -> String {
    let sign = if seconds < 0 { '-' } else { '+' };
    let minutes = seconds.unsigned_abs() / 60;
    match minutes % 60 {
        0 => format!("UTC{sign}{}", minutes / 60),
        m => format!("UTC{sign}{}:{m:02}", minutes / 60),
    }
}

/// `Wednesday 2026-12-02 23:08 (Asia/Shanghai, UTC+8)`; the zone is only
/// `(UTC)` for UTC itself. Empty for a time out of range.
pub(crate) fn when(ms: i64, tz: Tz) -> String {
    let Some(t) = local(ms, tz) else {
        return String::new();
    };
    let zone = match tz {
        Tz::UTC => "UTC".to_owned(),
        _ => format!(
            "{}, {}",
            tz.name(),
            utc_offset(t.offset().fix().local_minus_utc())
        ),
    };
    format!("{} ({zone})", t.format("%A %Y-%m-%d %H:%M"))
}

/// `2026-12-02 23:08`, the local time of a compaction's transcript line.
/// Empty for a time out of range.
pub(crate) fn stamp(ms: i64, tz: Tz) -> String {
    local(ms, tz)
        .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

/// The note put before an input saying when it arrived
/// (prompts/time_note.md); `None` for a time out of range.
pub(crate) fn note(ms: i64, tz: Tz) -> Option<String> {
    let when = when(ms, tz);
    if when.is_empty() {
        return None;
    }
    prompts().time_note.render(&[("when", &when)]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-02 15:08:30 UTC.
    const AT: i64 = 1_796_224_110_000;

    #[test]
    fn a_time_reads_in_the_zone_with_its_offset() {
        assert_eq!(
            when(AT, Tz::Asia__Shanghai),
            "Wednesday 2026-12-02 23:08 (Asia/Shanghai, UTC+8)"
        );
        assert_eq!(when(AT, Tz::UTC), "Wednesday 2026-12-02 15:08 (UTC)");
        assert_eq!(
            when(AT, Tz::America__St_Johns),
            "Wednesday 2026-12-02 11:38 (America/St_Johns, UTC-3:30)"
        );
        assert_eq!(stamp(AT, Tz::Asia__Kolkata), "2026-12-02 20:38");
    }

    #[test]
    fn the_note_names_the_time() {
        let note = note(AT, Tz::Europe__Berlin).unwrap_or_default();
        assert!(note.contains("Wednesday 2026-12-02 16:08 (Europe/Berlin, UTC+1)"));
        assert!(prompts().time_note.rendered_in(&note));
    }
}
