//! Numbers of fleet.toml that have a least value above 0, refused below
//! 0 in those words. serde refused `max_steps = -1` as "expected a whole
//! number from 0 to 4294967295", and the check that follows then refused
//! the `0` a person wrote next with "must be at least 1" (audit); so did
//! `context_entries = -1` ("0 or more"; it takes 4 or more). Here a
//! negative is told the range the key really takes; a value from 0 up to
//! its least passes, for the check in `config_limits.rs` or
//! `config_load.rs` to say what it would do. `daily_token_budget`
//! refuses its `0` here too, in the same words.

use serde::Deserializer;
use serde::de::Error;
use serde::de::Unexpected;
use serde::de::Visitor;

/// A whole number from `min` to `max`, as serde reads it: below `min`
/// (not below 0) let through unless `refuse_below`; `words`, when given,
/// say what is expected.
struct AtLeast {
    min: u64,
    max: u64,
    refuse_below: bool,
    words: Option<&'static str>,
}

impl AtLeast {
    const fn range(min: u64, max: u64) -> Self {
        Self {
            min,
            max,
            refuse_below: false,
            words: None,
        }
    }
}

impl Visitor<'_> for AtLeast {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self.words {
            Some(words) => f.write_str(words),
            None if self.max == u64::MAX => write!(f, "a whole number, {} or more", self.min),
            None => write!(f, "a whole number from {} to {}", self.min, self.max),
        }
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<u64, E> {
        if v > self.max || (v < self.min && self.refuse_below) {
            return Err(E::invalid_value(Unexpected::Unsigned(v), &self));
        }
        Ok(v)
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<u64, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
        }
    }
}

/// A `u64` key that must be `MIN` or more.
pub(crate) fn at_least_u64<'de, const MIN: u64, D: Deserializer<'de>>(
    d: D,
) -> Result<u64, D::Error> {
    d.deserialize_u64(AtLeast::range(MIN, u64::MAX))
}

/// An optional `u64` key that must be `MIN` or more when written.
pub(crate) fn at_least_u64_opt<'de, const MIN: u64, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<u64>, D::Error> {
    at_least_u64::<MIN, D>(d).map(Some)
}

/// A `u32` key that must be `MIN` or more.
pub(crate) fn at_least_u32<'de, const MIN: u64, D: Deserializer<'de>>(
    d: D,
) -> Result<u32, D::Error> {
    let v = d.deserialize_u64(AtLeast::range(MIN, u64::from(u32::MAX)))?;
    u32::try_from(v).map_err(|_| D::Error::invalid_value(Unexpected::Unsigned(v), &"a u32"))
}

/// A `usize` key that must be `MIN` or more.
pub(crate) fn at_least_usize<'de, const MIN: u64, D: Deserializer<'de>>(
    d: D,
) -> Result<usize, D::Error> {
    let v = at_least_u64::<MIN, D>(d)?;
    usize::try_from(v).map_err(|_| D::Error::invalid_value(Unexpected::Unsigned(v), &"a usize"))
}

/// A `u64` key that must be 1 or more.
pub(crate) fn positive_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    at_least_u64::<1, D>(d)
}

/// A `u32` key that must be 1 or more.
pub(crate) fn positive_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    at_least_u32::<1, D>(d)
}

/// An optional `u64` key that must be 1 or more when written.
pub(crate) fn positive_u64_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    at_least_u64_opt::<1, D>(d)
}

/// `daily_token_budget`: a whole number of tokens, 1 or more, refused in
/// those words, 0 too (audit: `-5` was told "expected a whole number, 0 or
/// more", and `0` then "must be at least 1").
pub(crate) fn token_budget<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_u64(AtLeast {
        min: 1,
        max: u64::MAX,
        refuse_below: true,
        words: Some("a whole number of tokens, 1 or more (leave the key out for no budget)"),
    })
    .map(Some)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Keys {
        #[serde(default, deserialize_with = "super::positive_u32")]
        small: u32,
        #[serde(default, deserialize_with = "super::positive_u64")]
        large: u64,
        #[serde(default, deserialize_with = "super::positive_u64_opt")]
        maybe: Option<u64>,
        #[serde(default, deserialize_with = "super::at_least_usize::<4, _>")]
        four: usize,
    }

    fn error(text: &str) -> String {
        match toml::from_str::<Keys>(text) {
            Ok(k) => panic!(
                "{text:?} was taken: {:?}",
                (k.small, k.large, k.maybe, k.four)
            ),
            Err(e) => e.message().to_owned(),
        }
    }

    #[test]
    fn a_negative_is_told_the_range_from_1() {
        assert_eq!(
            error("small = -1"),
            "invalid value: integer `-1`, expected a whole number from 1 to 4294967295"
        );
        assert_eq!(
            error("large = -5"),
            "invalid value: integer `-5`, expected a whole number, 1 or more"
        );
        assert_eq!(
            error("maybe = -5"),
            "invalid value: integer `-5`, expected a whole number, 1 or more"
        );
        assert_eq!(
            error("four = -1"),
            "invalid value: integer `-1`, expected a whole number, 4 or more"
        );
        assert_eq!(
            error("small = 4294967296"),
            "invalid value: integer `4294967296`, expected a whole number from 1 to 4294967295"
        );
    }

    #[test]
    fn values_under_the_least_and_the_others_pass_for_the_checks_that_follow()
    -> Result<(), toml::de::Error> {
        let k: Keys = toml::from_str("small = 0\nlarge = 7\nmaybe = 3\nfour = 3")?;
        assert_eq!((k.small, k.large, k.maybe, k.four), (0, 7, Some(3), 3));
        let k: Keys = toml::from_str("")?;
        assert_eq!((k.small, k.large, k.maybe, k.four), (0, 0, None, 0));
        Ok(())
    }
}
