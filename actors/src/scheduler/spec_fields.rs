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

/// What croner would take but read otherwise than written, by field: an
/// empty item of a list (`1,,2`), a step of 0 or one past the field's
/// span (`*/61` fires at minute 0 only). `None` when there is none.
/// (QA: both were stored.)
pub(super) fn misread(pattern: &str) -> Option<String> {
    let parts: Vec<&str> = pattern.split_whitespace().collect();
    let fields: &[Field] = match parts.len() {
        5 => &[MINUTE, HOUR, DAY, MONTH, WEEKDAY],
        6 => &[SECOND, MINUTE, HOUR, DAY, MONTH, WEEKDAY],
        _ => return None,
    };
    fields.iter().zip(&parts).find_map(|(field, text)| {
        list_problem(field, text)
            .or_else(|| step_problem(field, text))
            .or_else(|| mark_problem(field, text))
    })
}

/// An empty item in `text`'s list.
fn list_problem(field: &Field, text: &str) -> Option<String> {
    text.split(',').any(str::is_empty).then(|| {
        format!(
            "the {} field `{text}` has an empty item in its list: remove the extra comma",
            field.name
        )
    })
}

/// A step (`/N`) of 0, past the field's span, not a number, or twice.
fn step_problem(field: &Field, text: &str) -> Option<String> {
    for item in text.split(',') {
        let mut parts = item.split('/');
        parts.next();
        let Some(step) = parts.next() else { continue };
        if parts.next().is_some() {
            return Some(format!(
                "the {} field has `{item}`, with two steps: write one (`*/10`)",
                field.name
            ));
        }
        let span = field.max - field.min;
        match step.parse::<u32>() {
            Ok(0) => {
                return Some(format!(
                    "the {} field has `{item}`, a step of 0: a step is at least 1",
                    field.name
                ));
            }
            Ok(n) if n > span => {
                return Some(format!(
                    "the {} field has `{item}`, a step of {n}, more than the {} field's span \
                     ({}-{}): it would fire at its start only; write that number instead",
                    field.name, field.name, field.min, field.max
                ));
            }
            Ok(_) => {}
            // digits past u32: a step past the span, not "no number" (QA)
            Err(_) if !step.is_empty() && step.bytes().all(|b| b.is_ascii_digit()) => {
                return Some(format!(
                    "the {} field has `{item}`, a step of {step}, more than the {} field's span \
                     ({}-{}): it would fire at its start only; write that number instead",
                    field.name, field.name, field.min, field.max
                ));
            }
            Err(_) => {
                return Some(format!(
                    "the {} field has `{item}`, whose step `{step}` is not a whole number",
                    field.name
                ));
            }
        }
    }
    None
}

/// A day mark (`L`, `W`) where `field` takes none, or twice: `W`
/// (nearest weekday) is of the day of the month, `L` (last) of a weekday
/// (or alone, of the day of the month), each once. croner's own words
/// came through for `5W` and `2L`, and `5LL` ran as `5L` (QA).
fn mark_problem(field: &Field, text: &str) -> Option<String> {
    for word in text.split([',', '-', '/', '#']) {
        let upper = word.to_ascii_uppercase();
        let bare = upper.trim_end_matches(['L', 'W']);
        let mark = &upper[bare.len()..];
        if bare.is_empty() || bare.parse::<u32>().is_err() || mark.is_empty() {
            continue;
        }
        let takes = match field.name {
            // (`15L` is told by `field_problem` that `L` stands alone there)
            "day-of-month" => mark == "W" || mark == "L",
            "day-of-week" => mark == "L",
            _ => false,
        };
        if !takes {
            let marks = match field.name {
                "day-of-month" => "only `W` after a day (`15W`: the weekday nearest the 15th)",
                "day-of-week" => "only `L` after a weekday (`5L`: the month's last Friday)",
                _ => "no `L` or `W`: those go in the day-of-month and day-of-week fields",
            };
            return Some(format!(
                "the {} field has `{word}`: it takes {marks}",
                field.name
            ));
        }
    }
    None
}

/// Month and weekday names croner reads.
const MONTHS: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// A word of `item` that is no number, no name of `field` and none of the
/// special characters (`L`, `W`, `LW`, `?`): croner said "illegal
/// character 'X' in part '1X'", in its own rewriting of the text (QA).
fn word_problem(field: &Field, item: &str) -> Option<String> {
    let names: &[&str] = match field.name {
        "month" => MONTHS,
        "day-of-week" => WEEKDAYS,
        _ => &[],
    };
    for word in item.split(['-', '/', '#']) {
        let upper = word.to_ascii_uppercase();
        let bare = upper.trim_end_matches(['L', 'W']);
        // digits past u32: out of the field's range, not "no number" (QA)
        if !bare.is_empty()
            && bare.bytes().all(|b| b.is_ascii_digit())
            && bare.parse::<u32>().is_err()
        {
            return Some(format!(
                "the {} field has `{word}`, out of its range {}-{}",
                field.name, field.min, field.max
            ));
        }
        let fine = word.is_empty()
            || matches!(word, "*" | "?")
            || matches!(upper.as_str(), "L" | "W" | "LW")
            || bare.parse::<u32>().is_ok()
            || names.contains(&upper.as_str());
        if !fine {
            let takes = match field.name {
                "month" => "1-12 or JAN-DEC",
                "day-of-week" => "0-7 or SUN-SAT",
                _ => "numbers",
            };
            return Some(format!(
                "the {} field has `{word}`, which it does not read: it takes {takes}",
                field.name
            ));
        }
    }
    None
}

/// `word` as a number of `field`: a number, or a month's or weekday's
/// name (JAN is 1, SUN 0), as croner reads them.
fn name_or_number(field: &Field, word: &str) -> Option<u32> {
    if let Ok(n) = word.parse::<u32>() {
        return Some(n);
    }
    let upper = word.to_ascii_uppercase();
    let (names, first) = match field.name {
        "month" => (MONTHS, 1),
        "day-of-week" => (WEEKDAYS, 0),
        _ => return None,
    };
    let at = names.iter().position(|n| *n == upper)?;
    u32::try_from(at).ok().map(|at| at + first)
}

/// What is wrong with `text` as `field`: a number out of range, a range
/// whose start is after its end or that lacks an end, a bad step, an
/// `#N` past the fifth, a word the field does not read.
fn field_problem(field: &Field, text: &str) -> Option<String> {
    if let Some(problem) = list_problem(field, text)
        .or_else(|| step_problem(field, text))
        .or_else(|| mark_problem(field, text))
    {
        return Some(problem);
    }
    for item in text.split(',') {
        if let Some(problem) = word_problem(field, item) {
            return Some(problem);
        }
        if let Some((_, nth)) = item.split_once('#') {
            match nth.parse::<u32>() {
                Ok(1..=5) => {}
                _ => {
                    return Some(format!(
                        "the {} field has `{item}`: a month has at most 5 of a weekday, so \
                         `#` takes 1-5",
                        field.name
                    ));
                }
            }
        }
        if let Some((day, _)) = item.split_once('#')
            && field.name == "day-of-week"
            && name_or_number(field, day).is_none()
        {
            return Some(format!(
                "the day-of-week field has `{item}`: `#` follows one weekday, a number or a \
                 name (`MON#2`: the second Monday of the month; `FRI#L`: the last Friday)"
            ));
        }
        if field.name == "day-of-month" {
            let upper = item.to_ascii_uppercase();
            if upper.len() > 1 && upper.ends_with('L') && upper != "LW" {
                return Some(format!(
                    "the day-of-month field has `{item}`: `L` alone is the month's last day; a \
                     weekday before `L` goes in the day-of-week field (`5L`: the last Friday)"
                ));
            }
        }
        let range = item.split('/').next().unwrap_or(item);
        let range = range.split('#').next().unwrap_or(range);
        // `15W`, `5L`, `L`: a day mark, not a month's or weekday's name
        let marked = |x: &str| {
            let upper = x.to_ascii_uppercase();
            matches!(upper.as_str(), "L" | "W" | "LW")
                || (upper.ends_with(['L', 'W']) && upper[..upper.len() - 1].parse::<u32>().is_ok())
        };
        if let Some((a, b)) = range.split_once('-')
            && (marked(a) || marked(b))
        {
            return Some(format!(
                "the {} field has `{item}`: `W` and `L` go with a single day, not a range",
                field.name
            ));
        }
        if let Some((a, b)) = range.split_once('-')
            && (a.is_empty() || b.is_empty())
        {
            return Some(format!(
                "the {} field has `{item}`, a range without a {}: write both ends (`1-5`)",
                field.name,
                if a.is_empty() { "start" } else { "end" }
            ));
        }
        let mut ends = range.splitn(2, '-');
        // (`15W`, `5L`: the number before the letter; `FRI`: its number,
        // so that `FRI-MON` runs backwards as `5-1` does)
        let number = |n: &str| {
            n.trim_end_matches(['L', 'W', 'l', 'w'])
                .parse::<u32>()
                .ok()
                .or_else(|| name_or_number(field, n))
        };
        let start = ends.next().and_then(number);
        let end = ends.next().and_then(number);
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
