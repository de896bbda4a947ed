//! Named debug columns: the internal state a component publishes for the time series (GCC's
//! trend and threshold, ACE-N's bucket, Copa's window, ...), in the spirit of goog_cc's state
//! printer. A component writes its columns into a [`Columns`] under names that carry their
//! unit (`cc_link_capacity_bps`, `pacer_bucket_bytes`); samples, result files and plots pick
//! them up by name, so a new controller adds columns without editing any list elsewhere.
//!
//! Names and text values are `Cow<'static, str>`: components write static names without
//! allocating, and records read back from JSON (a live part, a browser run) own theirs. Both
//! serialise as one JSON object and deserialise from one.

use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use std::borrow::Cow;
use std::fmt;

/// The frame column an encoder controller sets to `true` on frames it adapted to the network
/// (MAE: encoded with the tight VBV); the summary's `adaptation_ratio` counts them.
pub const ADAPTED_COLUMN: &str = "encoder_adapted";

/// A column name or text value: static when written by a component, owned when read back.
pub type Name = Cow<'static, str>;

/// One column value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An integer: a count, or a quantity in the unit its name carries (`_bps`, `_bytes`, `_us`).
    Int(i64),
    /// A float; NaN and infinities serialise as null.
    Float(f64),
    /// A boolean flag (such as `cc_in_alr`).
    Bool(bool),
    /// A text value, such as a state name (`cc_usage`).
    Text(Name),
    /// No value (JSON null): the quantity is not known at this sample.
    Null,
}

impl Value {
    /// A text value from a static string (what components write).
    pub const fn text(v: &'static str) -> Value {
        Value::Text(Cow::Borrowed(v))
    }
    /// The text, if this is one.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(t) => Some(t),
            _ => None,
        }
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Int(v) => s.serialize_i64(*v),
            // NaN and infinities are not JSON: written as null.
            Value::Float(v) if v.is_finite() => s.serialize_f64(*v),
            Value::Float(_) | Value::Null => s.serialize_none(),
            Value::Bool(v) => s.serialize_bool(*v),
            Value::Text(v) => s.serialize_str(v),
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    /// A JSON scalar: an integer, a float, a boolean, a string or null (what
    /// [`Serialize`] writes; an integer-valued float written by a float column reads back as
    /// a float only if it has a fraction or an exponent, as serde_json keeps them apart).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number, a boolean, a string or null")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
                i64::try_from(v).map(Value::Int).map_err(|_| E::custom("integer out of range"))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
                Ok(Value::Float(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Bool(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Value, E> {
                Ok(Value::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Value, E> {
                Ok(Value::Text(Cow::Owned(v)))
            }
            fn visit_none<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_unit<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
                Value::deserialize(d)
            }
        }
        d.deserialize_any(V)
    }
}

/// Named values in the order they were written. Serialises as a JSON object (flattened into
/// a sample record).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Columns(Vec<(Name, Value)>);

impl Columns {
    /// Appends `name` with `value`, even if `name` is already there (see [`Self::set`]).
    pub fn push(&mut self, name: impl Into<Name>, value: Value) {
        self.0.push((name.into(), value));
    }
    /// Appends an integer column; `None` writes null.
    pub fn int(&mut self, name: impl Into<Name>, v: Option<i64>) {
        self.push(name, v.map_or(Value::Null, Value::Int));
    }
    /// Appends a float column; `None` writes null.
    pub fn float(&mut self, name: impl Into<Name>, v: Option<f64>) {
        self.push(name, v.map_or(Value::Null, Value::Float));
    }
    /// Appends a boolean column.
    pub fn bool(&mut self, name: impl Into<Name>, v: bool) {
        self.push(name, Value::Bool(v));
    }
    /// Appends a text column; `None` writes null.
    pub fn text(&mut self, name: impl Into<Name>, v: Option<impl Into<Name>>) {
        self.push(name, v.map_or(Value::Null, |t| Value::Text(t.into())));
    }
    /// A rate in bits per second (name it `*_bps`).
    pub fn rate(&mut self, name: impl Into<Name>, v: Option<DataRate>) {
        self.int(name, v.filter(|r| r.is_finite()).map(|r| r.as_bps()));
    }
    /// A size in bytes (name it `*_bytes`).
    pub fn size(&mut self, name: impl Into<Name>, v: Option<DataSize>) {
        self.int(name, v.map(|s| s.as_bytes()));
    }
    /// A duration in microseconds (name it `*_us`).
    pub fn delta(&mut self, name: impl Into<Name>, v: Option<TimeDelta>) {
        self.int(name, v.filter(|d| d.is_finite()).map(|d| d.as_us()));
    }
    /// A point in time in microseconds from the session start (name it `*_us`).
    pub fn time(&mut self, name: impl Into<Name>, v: Option<Timestamp>) {
        self.int(name, v.filter(|t| t.is_finite()).map(|t| t.as_us()));
    }
    /// Sets `name` to `value`: in place if it is there, else at the end.
    pub fn set(&mut self, name: impl Into<Name>, value: Value) {
        let name = name.into();
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => *v = value,
            None => self.0.push((name, value)),
        }
    }
    /// Sets every column of `other` here ([`Self::set`]), in `other`'s order.
    pub fn set_all(&mut self, other: &Columns) {
        for (n, v) in &other.0 {
            self.set(n.clone(), v.clone());
        }
    }
    /// The value of the first column called `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
    /// The column names, in write order.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.0.iter().map(|(n, _)| n.as_ref())
    }
    /// The (name, value) pairs, in write order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> + '_ {
        self.0.iter().map(|(n, v)| (n.as_ref(), v))
    }
    /// Whether no column has been written.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Columns {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Columns {
    /// A JSON object of scalars, in its order (the inverse of [`Serialize`]).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Columns;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of named values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Columns, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    out.push((Cow::Owned(k), v));
                }
                Ok(Columns(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Serde for an `f64` that may be NaN or infinite: written as null (not JSON otherwise),
/// read back as NaN (`#[serde(with = "crate::columns::float_or_null")]`).
pub mod float_or_null {
    use serde::{Deserialize, Deserializer, Serializer};
    /// Writes `v`, or null if it is NaN or infinite.
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }
    /// Reads a number, or NaN for null.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_in_write_order_with_units() {
        let mut c = Columns::default();
        c.float("cc_trend", Some(1.5));
        c.rate("cc_rate_bps", Some(DataRate::from_kbps(300)));
        c.rate("cc_none_bps", None);
        c.float("cc_nan", Some(f64::NAN));
        c.text("cc_state", Some("normal"));
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"cc_trend":1.5,"cc_rate_bps":300000,"cc_none_bps":null,"cc_nan":null,"cc_state":"normal"}"#
        );
        assert_eq!(c.get("cc_rate_bps"), Some(&Value::Int(300_000)));
        assert_eq!(c.names().count(), 5);
    }

    #[test]
    fn reads_back_what_it_writes() {
        let mut c = Columns::default();
        c.float("cc_trend", Some(1.5));
        c.int("cc_window_bytes", Some(-3));
        c.bool("mae_tight", true);
        c.text("cc_usage", Some("overusing"));
        c.int("cc_none", None);
        let json = serde_json::to_string(&c).unwrap();
        let back: Columns = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.get("cc_usage").and_then(Value::as_text), Some("overusing"));
        assert!(serde_json::from_str::<Columns>(r#"{"x": [1]}"#).is_err());
    }
}
