//! How each setting is read and written: in the unit its key names (`_s` seconds, `_days`,
//! `_mb` mebibytes), from the TOML file's own type or from the text of a variable or a flag,
//! with the message a wrong value gets. Used as `#[serde(with = "…")]` on [`super::Settings`].

use std::fmt;
use std::marker::PhantomData;
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::Serializer;

use super::FrontEnd;
use crate::auth::rate_limit::RateLimit;

/// The most days a retention may name: a hundred years.
pub const MAX_DAYS: u64 = 36_500;

/// A value given as TOML's own type or as text: what a visitor hands on.
enum Given {
    Number(i128),
    Text(String),
    Bool(bool),
    Nothing,
}

impl fmt::Display for Given {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Given::Number(n) => write!(f, "{n}"),
            Given::Text(t) => write!(f, "{t:?}"),
            Given::Bool(b) => write!(f, "{b}"),
            Given::Nothing => f.write_str("nothing"),
        }
    }
}

struct GivenVisitor;

impl<'de> Visitor<'de> for GivenVisitor {
    type Value = Given;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, a boolean or text")
    }
    fn visit_i64<E>(self, v: i64) -> Result<Given, E> {
        Ok(Given::Number(i128::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Given, E> {
        Ok(Given::Number(i128::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Given, E> {
        Ok(Given::Text(v.to_string()))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Given, E> {
        Ok(Given::Bool(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Given, E> {
        Ok(Given::Text(v.to_string()))
    }
    fn visit_unit<E>(self) -> Result<Given, E> {
        Ok(Given::Nothing)
    }
    fn visit_none<E>(self) -> Result<Given, E> {
        Ok(Given::Nothing)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Given, D::Error> {
        d.deserialize_any(GivenVisitor)
    }
}

fn given<'de, D: Deserializer<'de>>(d: D) -> Result<Given, D::Error> {
    d.deserialize_any(GivenVisitor)
}

/// A whole number within `range`, or `None` for nothing (and for blank text).
fn whole_in<E: de::Error>(
    given: &Given,
    range: std::ops::RangeInclusive<u64>,
    expected: &str,
) -> Result<Option<u64>, E> {
    let number = match given {
        Given::Nothing => return Ok(None),
        Given::Text(t) if t.trim().is_empty() => return Ok(None),
        Given::Number(n) => u64::try_from(*n).ok(),
        Given::Text(t) => t.trim().parse::<u64>().ok(),
        Given::Bool(_) => None,
    };
    match number.filter(|n| range.contains(n)) {
        Some(n) => Ok(Some(n)),
        None => Err(E::custom(format!("{given} is not {expected}"))),
    }
}

fn required<E: de::Error, T>(value: Option<T>, expected: &str) -> Result<T, E> {
    value.ok_or_else(|| E::custom(format!("a value is needed: {expected}")))
}

const WHOLE: &str = "a whole number";
const POSITIVE: &str = "a positive whole number";

/// A whole number (`u64`, `usize`, `u32`) of the unit the key names; zero allowed.
pub mod whole {
    use super::*;

    pub fn serialize<S: Serializer, T: Copy>(v: &T, s: S) -> Result<S::Ok, S::Error>
    where
        u64: TryFrom<T>,
    {
        s.serialize_u64(u64::try_from(*v).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: TryFrom<u64>>(d: D) -> Result<T, D::Error> {
        let n = required(whole_in(&given(d)?, 0..=u64::MAX, WHOLE)?, WHOLE)?;
        T::try_from(n).map_err(|_| de::Error::custom(format!("{n} is too large")))
    }
}

/// An integer type a count is read into, and the value a larger count is capped at.
pub trait Largest: TryFrom<u64> {
    const LARGEST: Self;
}

impl Largest for u32 {
    const LARGEST: u32 = u32::MAX;
}

impl Largest for u64 {
    const LARGEST: u64 = u64::MAX;
}

impl Largest for usize {
    const LARGEST: usize = usize::MAX;
}

/// A whole number above zero (`u64`, `usize`, `u32`).
pub mod positive {
    use super::*;

    pub use super::whole::serialize;

    pub fn deserialize<'de, D: Deserializer<'de>, T: Largest>(d: D) -> Result<T, D::Error> {
        let n = required(whole_in(&given(d)?, 1..=u64::MAX, POSITIVE)?, POSITIVE)?;
        // Beyond the type's bound a cap means nothing anyway.
        Ok(T::try_from(n).unwrap_or(T::LARGEST))
    }
}

/// A whole number above zero, or unset (`null`, or a blank variable).
pub mod positive_option {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<usize>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(n) => s.serialize_u64(*n as u64),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
        Ok(whole_in(&given(d)?, 1..=u64::MAX, POSITIVE)?.map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
    }
}

/// A connection count above zero, capped at what a semaphore can hold.
pub mod connections {
    use super::*;

    pub use super::whole::serialize;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        let n = required(whole_in(&given(d)?, 1..=u64::MAX, POSITIVE)?, POSITIVE)?;
        Ok(usize::try_from(n)
            .unwrap_or(usize::MAX)
            .min(tokio::sync::Semaphore::MAX_PERMITS))
    }
}

/// A duration in whole steps of `unit` seconds, at least `min` of them.
fn duration_in<'de, D: Deserializer<'de>>(d: D, unit: u64, min: u64, expected: &str) -> Result<Duration, D::Error> {
    let n = required(whole_in(&given(d)?, min..=u64::MAX, expected)?, expected)?;
    Ok(Duration::from_secs(n.saturating_mul(unit)))
}

fn serialize_in<S: Serializer>(v: &Duration, unit: u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(v.as_secs() / unit)
}

/// Declares the `with` module of a duration set in whole steps of `$unit` seconds, at least `$min`
/// of them.
macro_rules! duration_in_steps {
    ($(#[$doc:meta])* $name:ident, $unit:expr, $min:expr, $expected:expr) => {
        $(#[$doc])*
        pub mod $name {
            use super::*;

            pub fn serialize<S: Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
                serialize_in(v, $unit, s)
            }
            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
                duration_in(d, $unit, $min, $expected)
            }
        }
    };
}

duration_in_steps!(
    /// Whole seconds (`…_s`), zero allowed.
    seconds, 1, 0, "a whole number of seconds"
);
duration_in_steps!(
    /// Whole seconds above zero.
    positive_seconds, 1, 1, "a positive whole number of seconds"
);
duration_in_steps!(
    /// A node lease: whole seconds, at least 3 (it is renewed every third of it).
    lease, 1, 3, "a whole number of seconds of at least 3"
);
duration_in_steps!(
    /// Whole days (`…_days`), zero allowed.
    days, 86_400, 0, "a whole number of days"
);
duration_in_steps!(
    /// Whole days above zero.
    positive_days, 86_400, 1, "a positive whole number of days"
);

/// Bytes set in whole mebibytes (`…_mb`), above zero.
pub mod mebibytes {
    use super::*;

    pub fn serialize<S: Serializer>(v: &usize, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64((*v / (1024 * 1024)) as u64)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        let expected = "a positive whole number of mebibytes";
        let n = required(whole_in(&given(d)?, 1..=u64::MAX, expected)?, expected)?;
        Ok(usize::try_from(n.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX))
    }
}

/// Days a retention keeps: 1 to [`MAX_DAYS`], or unset (keep forever).
pub mod days_kept {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(n) => s.serialize_i64(*n),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        let expected = format!("a whole number of days from 1 to {MAX_DAYS} (unset keeps forever)");
        Ok(whole_in(&given(d)?, 1..=MAX_DAYS, &expected)?.map(|n| n as i64))
    }
}

/// A switch: `true`/`false`, `1`/`0`.
pub mod switch {
    use super::*;

    pub fn serialize<S: Serializer>(v: &bool, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(*v)
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        match given(d)? {
            Given::Bool(b) => Ok(b),
            Given::Number(1) => Ok(true),
            Given::Number(0) => Ok(false),
            Given::Text(t) if matches!(t.trim(), "1" | "true") => Ok(true),
            Given::Text(t) if matches!(t.trim(), "0" | "false") => Ok(false),
            other => Err(de::Error::custom(format!("{other} is not 0 or 1"))),
        }
    }
}

/// `N/S` (N requests per S seconds) or `off`.
pub mod rate_limit {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<RateLimit>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(limit) => s.serialize_str(&format!("{}/{}", limit.requests, limit.per.as_secs())),
            None => s.serialize_str("off"),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RateLimit>, D::Error> {
        match given(d)? {
            Given::Text(t) => RateLimit::parse(&t).map_err(de::Error::custom),
            other => Err(de::Error::custom(format!(
                "{other} is not N/S (N requests per S seconds, such as 6000/60) or off"
            ))),
        }
    }
}

/// The public URL, checked and without a trailing `/`; or unset.
pub mod public_url {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(url) => s.serialize_str(url),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        match given(d)? {
            Given::Nothing => Ok(None),
            Given::Text(t) if t.trim().is_empty() => Ok(None),
            Given::Text(t) => FrontEnd::public_url(&t).map(Some).map_err(de::Error::custom),
            other => Err(de::Error::custom(format!(
                "{other} is not a URL such as https://iot.example.com"
            ))),
        }
    }
}

/// Trusted proxies: a list, or comma-separated text, of CIDR ranges (`10.0.0.0/8`) or single
/// addresses; blanks skipped.
pub mod proxies {
    use super::*;

    pub fn serialize<S: Serializer>(v: &[IpNet], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(ToString::to_string))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpNet>, D::Error> {
        let items = d.deserialize_any(ListOrText(PhantomData))?;
        items
            .iter()
            .map(|item| item.trim())
            .filter(|item| !item.is_empty())
            .map(|item| {
                item.parse::<IpNet>()
                    .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
                    .map(|net| net.trunc())
                    .map_err(|_| {
                        de::Error::custom(format!("{item} is not an address or a CIDR range such as 10.0.0.0/8"))
                    })
            })
            .collect()
    }

    struct ListOrText(PhantomData<()>);

    impl<'de> Visitor<'de> for ListOrText {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of addresses or CIDR ranges, or comma-separated text")
        }
        fn visit_str<E>(self, v: &str) -> Result<Vec<String>, E> {
            Ok(v.split(',').map(str::to_string).collect())
        }
        fn visit_unit<E>(self) -> Result<Vec<String>, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element::<String>()? {
                items.push(item);
            }
            Ok(items)
        }
    }
}

/// A node id: 1 to 64 letters, digits, `.`, `_` or `-`; or unset.
pub mod node_id {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(id) => s.serialize_str(id),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let text = match given(d)? {
            Given::Nothing => return Ok(None),
            Given::Text(t) if t.trim().is_empty() => return Ok(None),
            Given::Text(t) => t,
            Given::Number(n) => n.to_string(),
            other => return Err(de::Error::custom(format!("{other} is not a node id"))),
        };
        let ok = (1..=64).contains(&text.len())
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !ok {
            return Err(de::Error::custom(format!(
                "{text:?} is not a node id: 1 to 64 letters, digits, '.', '_' or '-'"
            )));
        }
        Ok(Some(text))
    }
}
