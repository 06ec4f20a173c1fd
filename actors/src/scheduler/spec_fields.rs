//! What is wrong with a cron expression croner refused, said by field and
//! value: "the hour field has 24, and hours are 0-23", where croner says
//! "Component error: Number out of bounds." (QA: the message named
//! neither the field nor the value, and a sixth field meant as a year
//! was refused without a word that six fields put seconds first).

/// A field's name and the numbers it takes.
struct Field {
    name: &'static str,
    plural: &'static str,
    min: u32,
    max: u32,
}

const SECOND: Field = Field {
    name: "second",
    plural: "seconds",
    min: 0,
    max: 59,
};
const MINUTE: Field = Field {
    name: "minute",
    plural: "minutes",
    min: 0,
    max: 59,
};
const HOUR: Field = Field {
    name: "hour",
    plural: "hours",
    min: 0,
    max: 23,
};
const DAY: Field = Field {
    name: "day-of-month",
    plural: "days of the month",
    min: 1,
    max: 31,
};
const MONTH: Field = Field {
    name: "month",
    plural: "months",
    min: 1,
    max: 12,
};
const WEEKDAY: Field = Field {
    name: "day-of-week",
    plural: "days of the week (0 and 7 are Sunday)",
    min: 0,
    max: 7,
};

/// What is wrong with `pattern` (a nickname already expanded), by field:
/// the number of fields, a number out of its field's range, or a range
/// that runs backwards. `None` when none of these is found (croner's own
/// words are given then).
pub(super) fn diagnose(pattern: &str) -> Option<String> {
    let parts: Vec<&str> = pattern.split_whitespace().collect();
    let fields: &[Field] = match parts.len() {
        5 => &[MINUTE, HOUR, DAY, MONTH, WEEKDAY],
        6 => &[SECOND, MINUTE, HOUR, DAY, MONTH, WEEKDAY],
        n => {
            return Some(format!(
                "it has {n} field{}, where 5 or 6 are read; years are not supported",
                if n == 1 { "" } else { "s" }
            ));
        }
    };
    for (field, text) in fields.iter().zip(&parts) {
        if let Some(problem) = field_problem(field, text) {
            let six = if parts.len() == 6 {
                " (with 6 fields the first is the second and the last the day of the week: \
                 years are not supported)"
            } else {
                ""
            };
            return Some(format!("{problem}{six}"));
        }
    }
    None
}

/// What is wrong with `text` as `field`: a number out of range, or a
/// range whose start is after its end. Steps (`*/15`), names (`MON`,
/// `JAN`) and the special characters (`L`, `W`, `#`, `?`) are left to
/// croner.
fn field_problem(field: &Field, text: &str) -> Option<String> {
    for item in text.split(',') {
        let range = item.split('/').next().unwrap_or(item);
        let mut ends = range.splitn(2, '-');
        let start = ends.next().and_then(|n| n.parse::<u32>().ok());
        let end = ends.next().and_then(|n| n.parse::<u32>().ok());
        for n in [start, end].into_iter().flatten() {
            if n < field.min || n > field.max {
                return Some(format!(
                    "the {} field has {n}, and {} are {}-{}",
                    field.name, field.plural, field.min, field.max
                ));
            }
        }
        if let (Some(a), Some(b)) = (start, end)
            && a > b
        {
            return Some(format!(
                "the {} field has the range {a}-{b}, which runs backwards: write it from the \
                 lower number to the higher (a list such as {a}-{},{}-{b} wraps around)",
                field.name, field.max, field.min
            ));
        }
    }
    None
}
