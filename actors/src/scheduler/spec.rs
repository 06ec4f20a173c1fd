//! A routine's definition ([`RoutineSpec`]) and its parsed schedule
//! ([`Schedule`]): a cron expression read on the wall clock of an IANA time
//! zone.
//!
//! Daylight-saving transitions (decided here, documented in
//! docs/operations.md). Fixed times of day are time fields (seconds,
//! minutes, hours) without `*` or a `/` step: single values, lists and
//! ranges (`30 2`, `30 2,14`, `0,30 2`, `30 1-2`).
//! - A fixed time of day that a spring-forward skips (02:30 in
//!   America/New_York on its transition day) fires once, at the first
//!   instant after the gap (03:00 local time). Several skipped times of
//!   one gap (02:00 and 02:30) share that instant and fire once together.
//! - A fixed time of day that a fall-back repeats (01:30 in
//!   America/New_York on its transition day) fires once, at its first
//!   occurrence (01:30 daylight time).
//! - Expressions with wildcards or steps in the time fields (`*/30 * * * *`,
//!   `0 * * * *`) follow real time: they fire in both passes of a repeated
//!   hour and not in the skipped one.

use std::str::FromStr;

use botfleet_memory::CatchUp;
use chrono::DateTime;
use chrono::NaiveDateTime;
use chrono::TimeDelta;
use chrono::TimeZone;
use chrono_tz::Tz;
use croner::Cron;

/// Which field of a cron expression is wrong, and how.
#[path = "spec_fields.rs"]
mod fields;
use croner::parser::CronParser;
use croner::parser::Seconds;
use croner::parser::Year;
use serde::Deserialize;
use serde::Serialize;

/// Longest routine (and hook) name.
pub const MAX_NAME_LEN: usize = 64;

/// Longest routine prompt, in characters.
pub const MAX_PROMPT_CHARS: usize = 16_000;

/// What a routine or hook name may be.
pub const NAME_RULE: &str =
    "use 1-64 characters: ASCII letters, digits, '-', '_' or '.', starting with a letter or digit";

/// Whether `name` is a valid routine or hook name (see [`NAME_RULE`]).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && name.as_bytes()[0].is_ascii_alphanumeric()
}

/// A routine as people define it (fleet.toml or the API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineSpec {
    /// Name, unique per bot.
    pub name: String,
    /// Cron expression: 5 fields, or 6 with seconds first.
    pub cron: String,
    /// IANA time zone name, e.g. `Asia/Shanghai`.
    pub timezone: String,
    /// What the bot is asked to do at each run.
    pub prompt: String,
    /// Whether a run may end without reporting (default true).
    pub silent_ok: bool,
    /// What to do about slots missed while the host was down.
    pub catch_up: CatchUp,
}

/// A routine definition that is not valid. Each variant says what is wrong
/// and what is expected; [`RoutineError::field`] names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoutineError {
    /// The name does not follow [`NAME_RULE`].
    #[error("routine name {name:?} is not valid: {NAME_RULE}")]
    Name {
        /// The name given.
        name: String,
    },
    /// The cron expression does not parse.
    #[error(
        "cron expression {cron:?} is not valid ({detail}); expected 5 fields \
         `minute hour day-of-month month day-of-week` (e.g. \"0 8 * * 1-5\": 08:00 on \
         weekdays) or 6 with seconds first (e.g. \"30 0 8 * * *\")"
    )]
    Cron {
        /// The expression given.
        cron: String,
        /// The parser's complaint.
        detail: String,
    },
    /// The cron expression parses but matches no time at all.
    #[error(
        "cron expression {cron:?} never fires (no date matches it); check the day-of-month \
         and month fields"
    )]
    Never {
        /// The expression given.
        cron: String,
    },
    /// The time zone is not an IANA name.
    #[error(
        "time zone {timezone:?} is not an IANA time zone name{hint}; expected e.g. \
         \"Asia/Shanghai\", \"America/New_York\", \"Europe/Berlin\" or \"UTC\""
    )]
    Timezone {
        /// The name given.
        timezone: String,
        /// ` (did you mean "X"?)` when a name differs only in case.
        hint: String,
    },
    /// The prompt is empty.
    #[error(
        "the prompt is empty (nothing but spaces or invisible characters such as U+200B or \
         U+FEFF); say what the bot should do when the routine runs"
    )]
    EmptyPrompt,
    /// The prompt is too long.
    #[error("the prompt has {chars} characters; the limit is {limit}")]
    PromptTooLong {
        /// Its length.
        chars: usize,
        /// The limit.
        limit: usize,
    },
}

impl RoutineError {
    /// The field of the definition that is wrong.
    pub fn field(&self) -> &'static str {
        match self {
            RoutineError::Name { .. } => "name",
            RoutineError::Cron { .. } | RoutineError::Never { .. } => "cron",
            RoutineError::Timezone { .. } => "timezone",
            RoutineError::EmptyPrompt | RoutineError::PromptTooLong { .. } => "prompt",
        }
    }
}

impl RoutineSpec {
    /// Checks every field and parses the schedule.
    pub fn validate(&self) -> Result<Schedule, RoutineError> {
        if !valid_name(&self.name) {
            return Err(RoutineError::Name {
                name: self.name.clone(),
            });
        }
        // spaces around the cron or the time zone are refused, as in a
        // name, rather than stored: `" UTC"` would be kept, shown and
        // compared as sent (replacing a routine keeps its slot only for the
        // same `cron` and `timezone`)
        if self.cron.trim() != self.cron {
            return Err(RoutineError::Cron {
                cron: self.cron.clone(),
                detail: "it has spaces around it".into(),
            });
        }
        if self.timezone.trim() != self.timezone {
            let hint = match known_name(self.timezone.trim()) {
                Some(name) => format!(" (it has spaces around it; did you mean {name:?}?)"),
                None => " (it has spaces around it)".into(),
            };
            return Err(RoutineError::Timezone {
                timezone: self.timezone.clone(),
                hint,
            });
        }
        refuse_last_weekday_in_list(&self.cron)?;
        let schedule = Schedule::parse(&self.cron, &self.timezone)?;
        // as a message is: invisible characters alone say nothing either
        if botfleet_memory::shows_nothing(&self.prompt) {
            return Err(RoutineError::EmptyPrompt);
        }
        let chars = self.prompt.chars().count();
        if chars > MAX_PROMPT_CHARS {
            return Err(RoutineError::PromptTooLong {
                chars,
                limit: MAX_PROMPT_CHARS,
            });
        }
        Ok(schedule)
    }
}

/// A parsed schedule: when a routine fires.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    tz: Tz,
    kind: TimeKind,
}

/// How a schedule meets a daylight-saving transition, decided by its time
/// fields (seconds, minutes, hours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimeKind {
    /// Fixed times of day only: single values, lists and ranges (`30 2`,
    /// `0,30 1-2`). Each wall-clock slot runs once: at its first pass when a
    /// fall-back repeats it, at the first instant after the gap when a
    /// spring-forward skips it.
    WallClock,
    /// A `*` or a `/` step in a time field (`*/30 *`, `0 *`): slots follow
    /// real time, in both passes of a repeated hour and none in a skipped
    /// one.
    RealTime,
}

impl TimeKind {
    /// Reads the time fields as croner keeps them (upper-cased, nicknames
    /// such as `@daily` expanded; 5 fields mean second 0, 6 have seconds
    /// first). The text, not croner's parsed fields: those forget a `/1`
    /// step, and croner's own `determine_job_type` counts only a single
    /// value as a fixed time.
    fn of(cron: &Cron) -> Self {
        let fields: Vec<&str> = cron.pattern.as_str().split_whitespace().collect();
        let time_fields = if fields.len() == 6 { 3 } else { 2 };
        if fields
            .iter()
            .take(time_fields)
            .any(|field| field.contains(['*', '/']))
        {
            TimeKind::RealTime
        } else {
            TimeKind::WallClock
        }
    }
}

/// The `@` nicknames a cron expression may be, as croner reads them, with
/// `@midnight` (cron's name for `@daily`, which croner lacks) added.
const NICKNAMES: &str = "@yearly (or @annually), @monthly, @weekly, @daily (or @midnight), @hourly";

/// `cron` with `@midnight` read as `@daily`; an unknown `@` nickname is
/// refused with the list (croner took it for a pattern and complained
/// about its number of fields).
fn expand_nickname(cron: &str) -> Result<&str, RoutineError> {
    let name = cron.trim();
    if !name.starts_with('@') {
        return Ok(cron);
    }
    let known = [
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@hourly",
    ];
    if name.eq_ignore_ascii_case("@midnight") {
        Ok("@daily")
    } else if known.iter().any(|k| name.eq_ignore_ascii_case(k)) {
        Ok(cron)
    } else {
        Err(RoutineError::Cron {
            cron: cron.to_owned(),
            detail: format!(
                "{name:?} is not a nickname this host knows; the nicknames are {NICKNAMES}"
            ),
        })
    }
}

/// Refuses an `L` alone in the day-of-week field (the last of 5 or 6):
/// croner takes it and matches no day, so the expression was refused as
/// one that "never fires", told to check the day-of-month and month
/// fields, which were right. (Quartz reads it as Saturday; `5L` is the
/// month's last Friday, `L` in day-of-month its last day.)
fn refuse_bare_last_weekday(cron: &str, pattern: &str) -> Result<(), RoutineError> {
    // only the whole field: in a list (`1,L`) croner reads the other days,
    // and such a routine may be stored (a new one is refused,
    // `refuse_last_weekday_in_list`)
    if weekday_field(pattern).is_some_and(|w| w.eq_ignore_ascii_case("L")) {
        return Err(RoutineError::Cron {
            cron: cron.to_owned(),
            detail: format!(
                "an `L` alone in the day-of-week field names no weekday: {LAST_WEEKDAY_ADVICE}"
            ),
        });
    }
    Ok(())
}

/// Refuses an `L` alone as an item of a day-of-week list (`1,L`): croner
/// reads the other days and drops it, so the routine fired on Mondays
/// only, without a word (QA, 2026-12-05). Checked of a new routine only
/// (fleet.toml, the API): one stored before still loads and fires as it
/// did.
fn refuse_last_weekday_in_list(cron: &str) -> Result<(), RoutineError> {
    let Some(weekday) = expand_nickname(cron).ok().and_then(weekday_field) else {
        return Ok(());
    };
    let items: Vec<&str> = weekday.split(',').collect();
    if items.len() > 1 && items.iter().any(|i| i.eq_ignore_ascii_case("L")) {
        return Err(RoutineError::Cron {
            cron: cron.to_owned(),
            detail: format!(
                "the `L` in the day-of-week list `{weekday}` names no weekday (the other days \
                 would be read and the `L` dropped): {LAST_WEEKDAY_ADVICE}"
            ),
        });
    }
    Ok(())
}

/// What to write for an `L` that names no weekday.
const LAST_WEEKDAY_ADVICE: &str = "write `5L` for the month's last Friday (`0L` its last \
                                   Sunday), `SAT` for Saturdays, or `L` in the day-of-month \
                                   field for the month's last day";

/// The day-of-week field of a cron `pattern` of 5 or 6 fields.
fn weekday_field(pattern: &str) -> Option<&str> {
    let fields: Vec<&str> = pattern.split_whitespace().collect();
    fields
        .last()
        .filter(|_| matches!(fields.len(), 5 | 6))
        .copied()
}

impl Schedule {
    /// Parses a cron expression (5 fields, or 6 with seconds first) and an
    /// IANA time zone name, and checks that the expression ever fires.
    pub fn parse(cron: &str, timezone: &str) -> Result<Self, RoutineError> {
        let tz = Tz::from_str(timezone.trim()).map_err(|_| RoutineError::Timezone {
            timezone: timezone.to_owned(),
            hint: case_hint(timezone.trim()),
        })?;
        let pattern = expand_nickname(cron)?;
        refuse_bare_last_weekday(cron, pattern)?;
        if let Some(detail) = fields::misread(pattern) {
            return Err(RoutineError::Cron {
                cron: cron.to_owned(),
                detail,
            });
        }
        let parsed = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(pattern)
            .map_err(|e| RoutineError::Cron {
                cron: cron.to_owned(),
                // the field and value at fault when they can be told;
                // croner's own words ("Component error: Number out of
                // bounds.") name neither
                detail: fields::diagnose(pattern).unwrap_or_else(|| e.to_string()),
            })?;
        let schedule = Self {
            kind: TimeKind::of(&parsed),
            cron: parsed,
            tz,
        };
        // Any fixed instant does to ask "does it ever fire": a pattern that
        // matches some date matches one within a few years of any start
        // (29 February recurs within 8 years).
        if schedule.next_after(REFERENCE_MS).is_none() {
            return Err(RoutineError::Never {
                cron: cron.to_owned(),
            });
        }
        Ok(schedule)
    }

    /// The time zone.
    pub fn timezone(&self) -> Tz {
        self.tz
    }

    /// The first slot strictly after `after_ms` (ms since epoch, UTC), in
    /// whole seconds; `None` if there is none.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let secs = after_ms.div_euclid(1000);
        let start = self.tz.timestamp_opt(secs, 0).single()?;
        let next = match self.kind {
            TimeKind::RealTime => self.cron.find_next_occurrence(&start, false).ok()?,
            TimeKind::WallClock => self.next_wall_clock_slot(&start)?,
        };
        Some(next.timestamp() * 1000)
    }

    /// The first run strictly after `start` of a [`TimeKind::WallClock`]
    /// schedule.
    ///
    /// croner walks the wall clock alone (naive times have no transitions),
    /// and each slot runs at the first instant whose wall clock reaches it
    /// ([`first_instant_reaching`]). That instant never decreases as the
    /// slot grows, so the answer is the first later slot whose instant is
    /// after `start`. Slots up to `start`'s wall clock were reached by
    /// `start` itself; a later one may still lie behind it, when `start`
    /// is in the second pass of a repeated hour and the slot ran in the
    /// first.
    fn next_wall_clock_slot(&self, start: &DateTime<Tz>) -> Option<DateTime<Tz>> {
        let mut wall = start.naive_local();
        loop {
            wall = self.cron.find_next_occurrence(&wall, false).ok()?;
            let at = first_instant_reaching(self.tz, wall)?;
            if at > *start {
                return Some(at);
            }
        }
    }
}

/// Longest daylight-saving gap looked across, in seconds (the longest in
/// the tz database is a day: Samoa skipped 2011-12-30).
const MAX_GAP_SECS: i64 = 2 * 86_400;

/// The first instant whose wall clock in `tz` reads `wall` or later: `wall`
/// itself, its first pass when a fall-back repeats it, or the first instant
/// after the gap when a spring-forward skips it. `None` past chrono's range
/// or after a gap longer than [`MAX_GAP_SECS`].
fn first_instant_reaching(tz: Tz, wall: NaiveDateTime) -> Option<DateTime<Tz>> {
    let resolve = |secs: i64| {
        wall.checked_add_signed(TimeDelta::seconds(secs))
            .and_then(|t| tz.from_local_datetime(&t).earliest())
    };
    if let Some(at) = resolve(0) {
        return Some(at);
    }
    // In a gap: its end is the first wall-clock second that exists. Gallop
    // forward to a second past the gap, then halve the distance back.
    let mut missing = 0;
    let mut step = 1;
    let mut exists = loop {
        if resolve(step).is_some() {
            break step;
        }
        if step >= MAX_GAP_SECS {
            return None;
        }
        missing = step;
        step = (step * 2).min(MAX_GAP_SECS);
    };
    while exists - missing > 1 {
        let mid = missing + (exists - missing) / 2;
        if resolve(mid).is_some() {
            exists = mid;
        } else {
            missing = mid;
        }
    }
    resolve(exists)
}

/// `ms` (since epoch) as an RFC 3339 time in the IANA zone `timezone`;
/// `None` if either is not valid.
pub fn local_rfc3339(timezone: &str, ms: i64) -> Option<String> {
    let tz = Tz::from_str(timezone.trim()).ok()?;
    let t = tz.timestamp_millis_opt(ms).single()?;
    Some(t.to_rfc3339())
}

/// 2026-01-01T00:00:00Z.
const REFERENCE_MS: i64 = 1_767_225_600_000;

fn case_hint(name: &str) -> String {
    known_name(name)
        .map(|known| format!(" (did you mean {known:?}?)"))
        .unwrap_or_default()
}

/// The IANA name that is `name` ignoring case, if any.
fn known_name(name: &str) -> Option<&'static str> {
    chrono_tz::TZ_VARIANTS
        .iter()
        .find(|tz| tz.name().eq_ignore_ascii_case(name))
        .map(|tz| tz.name())
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
