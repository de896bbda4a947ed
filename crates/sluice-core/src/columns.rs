//! Named debug columns: the internal state a component publishes for the time series (GCC's
//! trend and threshold, ACE-N's bucket, Copa's window, ...), in the spirit of goog_cc's state
//! printer. A component writes its columns into a [`Columns`] under names that carry their
//! unit (`cc_link_capacity_bps`, `pacer_bucket_bytes`); samples, result files and plots pick
//! them up by name, so a new controller adds columns without editing any list elsewhere.

use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// One column value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(&'static str),
    Null,
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Value::Int(v) => s.serialize_i64(v),
            // NaN and infinities are not JSON: written as null.
            Value::Float(v) if v.is_finite() => s.serialize_f64(v),
            Value::Float(_) | Value::Null => s.serialize_none(),
            Value::Bool(v) => s.serialize_bool(v),
            Value::Text(v) => s.serialize_str(v),
        }
    }
}

/// Named values in the order they were written. Serialises as a JSON object (flattened into
/// a sample record).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Columns(Vec<(&'static str, Value)>);

impl Columns {
    pub fn push(&mut self, name: &'static str, value: Value) {
        self.0.push((name, value));
    }
    pub fn int(&mut self, name: &'static str, v: Option<i64>) {
        self.push(name, v.map_or(Value::Null, Value::Int));
    }
    pub fn float(&mut self, name: &'static str, v: Option<f64>) {
        self.push(name, v.map_or(Value::Null, Value::Float));
    }
    pub fn bool(&mut self, name: &'static str, v: bool) {
        self.push(name, Value::Bool(v));
    }
    pub fn text(&mut self, name: &'static str, v: Option<&'static str>) {
        self.push(name, v.map_or(Value::Null, Value::Text));
    }
    /// A rate in bits per second (name it `*_bps`).
    pub fn rate(&mut self, name: &'static str, v: Option<DataRate>) {
        self.int(name, v.filter(|r| r.is_finite()).map(|r| r.as_bps()));
    }
    /// A size in bytes (name it `*_bytes`).
    pub fn size(&mut self, name: &'static str, v: Option<DataSize>) {
        self.int(name, v.map(|s| s.as_bytes()));
    }
    /// A duration in microseconds (name it `*_us`).
    pub fn delta(&mut self, name: &'static str, v: Option<TimeDelta>) {
        self.int(name, v.filter(|d| d.is_finite()).map(|d| d.as_us()));
    }
    /// A point in time in microseconds from the session start (name it `*_us`).
    pub fn time(&mut self, name: &'static str, v: Option<Timestamp>) {
        self.int(name, v.filter(|t| t.is_finite()).map(|t| t.as_us()));
    }
    /// Sets `name` to `value`: in place if it is there, else at the end.
    pub fn set(&mut self, name: &'static str, value: Value) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => *v = value,
            None => self.push(name, value),
        }
    }
    pub fn get(&self, name: &str) -> Option<Value> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.iter().map(|(n, _)| *n)
    }
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
        assert_eq!(c.get("cc_rate_bps"), Some(Value::Int(300_000)));
        assert_eq!(c.names().count(), 5);
    }
}
