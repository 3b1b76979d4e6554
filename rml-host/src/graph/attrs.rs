//! [`Attrs`]: typed reads of one node's JSON attributes, each with a default or
//! required, range-checked, and an error naming the node and attribute. Every key
//! read is remembered so [`Attrs::finish`] can reject the ones no reader asked for.

use serde_json::{Map, Value};

use super::error::{GraphError, NodeRef};

/// One node's attributes while its op is being parsed.
pub(crate) struct Attrs<'a> {
    node: &'a NodeRef,
    map: &'a Map<String, Value>,
    read: Vec<&'static str>,
}

/// A JSON value shown in an error: compact, with `", "` between list items.
pub(crate) fn show(value: &Value) -> String {
    match value {
        Value::Array(items) => format!("[{}]", super::error::join(items.iter().map(show))),
        other => other.to_string(),
    }
}

impl<'a> Attrs<'a> {
    /// A reader over `map`, the attributes of `node`.
    pub(crate) fn new(node: &'a NodeRef, map: &'a Map<String, Value>) -> Attrs<'a> {
        Attrs {
            node,
            map,
            read: Vec::new(),
        }
    }

    /// The error for attribute `attr` holding `found` where `expected` was wanted.
    pub(crate) fn bad(
        &self,
        attr: &'static str,
        expected: &str,
        found: Option<&Value>,
    ) -> GraphError {
        GraphError::BadAttribute {
            node: self.node.clone(),
            attr,
            expected: expected.to_string(),
            found: found.map_or_else(|| "missing".to_string(), show),
        }
    }

    /// The raw value of `attr`, marking it read.
    fn get(&mut self, attr: &'static str) -> Option<&'a Value> {
        self.read.push(attr);
        self.map.get(attr)
    }

    /// Reads `attr` with `parse`, or `default` when absent (`None` makes it required).
    fn read<T>(
        &mut self,
        attr: &'static str,
        expected: &str,
        default: Option<T>,
        parse: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<T, GraphError> {
        match self.get(attr) {
            None => default.ok_or_else(|| self.bad(attr, expected, None)),
            Some(value) => parse(value).ok_or_else(|| self.bad(attr, expected, Some(value))),
        }
    }

    /// An optional attribute: `None` when absent.
    fn optional<T>(
        &mut self,
        attr: &'static str,
        expected: &str,
        parse: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, GraphError> {
        self.read(attr, expected, Some(None), |v| parse(v).map(Some))
    }

    /// A boolean.
    pub(crate) fn bool(&mut self, attr: &'static str, default: bool) -> Result<bool, GraphError> {
        self.read(attr, "a boolean", Some(default), Value::as_bool)
    }

    /// A finite number read as f32.
    pub(crate) fn float(&mut self, attr: &'static str, default: f32) -> Result<f32, GraphError> {
        self.read(attr, "a finite number", Some(default), as_f32)
    }

    /// An optional finite number.
    pub(crate) fn float_opt(&mut self, attr: &'static str) -> Result<Option<f32>, GraphError> {
        self.optional(attr, "a finite number", as_f32)
    }

    /// A positive finite number (an epsilon).
    pub(crate) fn positive_float(
        &mut self,
        attr: &'static str,
        default: f32,
    ) -> Result<f32, GraphError> {
        self.read(attr, "a positive finite number", Some(default), |v| {
            as_f32(v).filter(|x| *x > 0.0)
        })
    }

    /// An integer axis (negative counts from the end).
    pub(crate) fn axis(
        &mut self,
        attr: &'static str,
        default: Option<isize>,
    ) -> Result<isize, GraphError> {
        self.read(attr, "an integer axis", default, as_isize)
    }

    /// A list of integer axes.
    pub(crate) fn axes(&mut self, attr: &'static str) -> Result<Option<Vec<isize>>, GraphError> {
        self.optional(attr, "a list of integer axes", |v| list(v, as_isize))
    }

    /// An integer at least `min`.
    pub(crate) fn count(
        &mut self,
        attr: &'static str,
        default: Option<usize>,
        min: usize,
    ) -> Result<usize, GraphError> {
        let expected = at_least(min, "an integer");
        self.read(attr, &expected, default, |v| {
            as_usize(v).filter(|n| *n >= min)
        })
    }

    /// Exactly `N` integers, each at least `min`.
    pub(crate) fn counts<const N: usize>(
        &mut self,
        attr: &'static str,
        default: Option<[usize; N]>,
        min: usize,
    ) -> Result<[usize; N], GraphError> {
        let expected = format!("{N} {}", at_least(min, "integers"));
        self.read(attr, &expected, default, |v| fixed_list(v, min))
    }

    /// Optionally, exactly `N` integers, each at least `min`.
    pub(crate) fn counts_opt<const N: usize>(
        &mut self,
        attr: &'static str,
        min: usize,
    ) -> Result<Option<[usize; N]>, GraphError> {
        let expected = format!("{N} {}", at_least(min, "integers"));
        self.optional(attr, &expected, |v| fixed_list(v, min))
    }

    /// A list of non-negative integers of any length.
    pub(crate) fn sizes(&mut self, attr: &'static str) -> Result<Option<Vec<usize>>, GraphError> {
        self.optional(attr, "a list of non-negative integers", |v| {
            list(v, as_usize)
        })
    }

    /// A list of integers (slice bounds and steps).
    pub(crate) fn ints(&mut self, attr: &'static str) -> Result<Option<Vec<i64>>, GraphError> {
        self.optional(attr, "a list of integers", |v| list(v, Value::as_i64))
    }

    /// A list of `[before, after]` pairs of non-negative integers; `axes` fixes the
    /// number of pairs when given.
    pub(crate) fn pairs(
        &mut self,
        attr: &'static str,
        axes: Option<usize>,
        default: Option<Vec<[usize; 2]>>,
    ) -> Result<Vec<[usize; 2]>, GraphError> {
        let expected = match axes {
            Some(n) => format!("{n} [before, after] pairs of non-negative integers"),
            None => "a list of [before, after] pairs of non-negative integers".to_string(),
        };
        self.read(attr, &expected, default, |v| {
            let pairs = list(v, |p| list(p, as_usize)?.try_into().ok())?;
            axes.is_none_or(|n| pairs.len() == n).then_some(pairs)
        })
    }

    /// One of `choices`, returned as its index.
    pub(crate) fn choice(
        &mut self,
        attr: &'static str,
        choices: &[&str],
        default: usize,
    ) -> Result<usize, GraphError> {
        let expected = format!("one of {}", choices.join(", "));
        self.read(attr, &expected, Some(default), |v| {
            choices.iter().position(|c| Some(*c) == v.as_str())
        })
    }

    /// A string (required).
    pub(crate) fn string(
        &mut self,
        attr: &'static str,
        expected: &str,
    ) -> Result<&'a str, GraphError> {
        self.read(attr, expected, None, Value::as_str)
    }

    /// A target shape: integers, `-1`, `0` (when `allow_copy`) and symbol names.
    pub(crate) fn shape_spec(
        &mut self,
        attr: &'static str,
        allow_copy: bool,
    ) -> Result<Vec<super::op::ShapeEntry>, GraphError> {
        use super::op::ShapeEntry;
        let expected = if allow_copy {
            "a list of sizes, symbols, 0 (copy) and at most one -1 (infer)"
        } else {
            "a list of positive sizes, symbols and -1 (keep)"
        };
        self.read(attr, expected, None, |v| {
            let entries = list(v, |e| match e {
                Value::String(_) => super::dim::Dim::parse(e, false)
                    .ok()?
                    .as_symbol()
                    .map(|s| ShapeEntry::Symbol(s.to_string())),
                _ => match e.as_i64()? {
                    -1 => Some(ShapeEntry::Infer),
                    0 if allow_copy => Some(ShapeEntry::Copy),
                    n if n > 0 => Some(ShapeEntry::Fixed(usize::try_from(n).ok()?)),
                    _ => None,
                },
            })?;
            let infers = entries.iter().filter(|e| **e == ShapeEntry::Infer).count();
            (!allow_copy || infers <= 1).then_some(entries)
        })
    }

    /// Fails on any attribute no reader asked for.
    pub(crate) fn finish(self) -> Result<(), GraphError> {
        match self.map.keys().find(|k| !self.read.contains(&k.as_str())) {
            None => Ok(()),
            Some(extra) => Err(GraphError::UnknownAttribute {
                node: self.node.clone(),
                attr: extra.clone(),
                allowed: self.read,
            }),
        }
    }
}

/// `"an integer at least 2"`, `"positive integers"`, `"non-negative integers"`.
fn at_least(min: usize, noun: &str) -> String {
    match min {
        0 => format!("non-negative {}", noun.trim_start_matches("an ")),
        1 => format!("positive {}", noun.trim_start_matches("an ")),
        n => format!("{noun} at least {n}"),
    }
}

/// A JSON array of exactly `N` integers, each at least `min`.
fn fixed_list<const N: usize>(value: &Value, min: usize) -> Option<[usize; N]> {
    list(value, |x| as_usize(x).filter(|n| *n >= min))?
        .try_into()
        .ok()
}

/// Each item of a JSON array parsed by `item`.
fn list<T>(value: &Value, item: impl Fn(&Value) -> Option<T>) -> Option<Vec<T>> {
    value.as_array()?.iter().map(item).collect()
}

/// A JSON number that fits a finite f32.
fn as_f32(value: &Value) -> Option<f32> {
    let x = value.as_f64()? as f32;
    x.is_finite().then_some(x)
}

/// A JSON integer as `usize`.
fn as_usize(value: &Value) -> Option<usize> {
    usize::try_from(value.as_u64()?).ok()
}

/// A JSON integer as `isize`.
fn as_isize(value: &Value) -> Option<isize> {
    isize::try_from(value.as_i64()?).ok()
}
