//! What the routine suites share: a script whose routine input fails,
//! and a cron that fires once, a few seconds ahead.

use chrono::Duration as ChronoDuration;
use chrono::Timelike;
use chrono::Utc;

/// A routine's input fails the model; anything else is noted.
pub const FAILING: &str = r#"
[[rule]]
match = "FAILME"
steps = [ { fail = "boom model error" } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

/// A 6-field cron that fires once, `ahead` seconds from now (UTC), and
/// not again for a year.
pub fn once_in(ahead: i64) -> String {
    let at = Utc::now() + ChronoDuration::seconds(ahead);
    format!(
        "{} {} {} {} {} *",
        at.second(),
        at.minute(),
        at.hour(),
        chrono::Datelike::day(&at),
        chrono::Datelike::month(&at)
    )
}
