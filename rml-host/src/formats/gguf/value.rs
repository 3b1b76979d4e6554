//! Metadata values: the 13 GGUF [`ValueType`]s, borrowed [`Value`]s decoded from a
//! file (arrays stay undecoded bytes until iterated), and [`OwnedValue`]s to write.

#![forbid(unsafe_code)]

use std::fmt;

use super::MAX_ARRAY_DEPTH;
use super::cursor::Cursor;
use super::error::{GgufError, Result};

/// A GGUF metadata value type id (`gguf_metadata_value_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// 0: `u8`.
    U8,
    /// 1: `i8`.
    I8,
    /// 2: `u16`.
    U16,
    /// 3: `i16`.
    I16,
    /// 4: `u32`.
    U32,
    /// 5: `i32`.
    I32,
    /// 6: `f32`.
    F32,
    /// 7: bool, one byte.
    Bool,
    /// 8: string (u64 length + UTF-8).
    String,
    /// 9: array (element type u32, count u64, elements).
    Array,
    /// 10: `u64`.
    U64,
    /// 11: `i64`.
    I64,
    /// 12: `f64`.
    F64,
}

impl ValueType {
    /// Looks up a type id; `None` when GGUF does not define it.
    pub const fn from_id(id: u32) -> Option<ValueType> {
        Some(match id {
            0 => ValueType::U8,
            1 => ValueType::I8,
            2 => ValueType::U16,
            3 => ValueType::I16,
            4 => ValueType::U32,
            5 => ValueType::I32,
            6 => ValueType::F32,
            7 => ValueType::Bool,
            8 => ValueType::String,
            9 => ValueType::Array,
            10 => ValueType::U64,
            11 => ValueType::I64,
            12 => ValueType::F64,
            _ => return None,
        })
    }

    /// The type id stored in files.
    pub const fn id(self) -> u32 {
        match self {
            ValueType::U8 => 0,
            ValueType::I8 => 1,
            ValueType::U16 => 2,
            ValueType::I16 => 3,
            ValueType::U32 => 4,
            ValueType::I32 => 5,
            ValueType::F32 => 6,
            ValueType::Bool => 7,
            ValueType::String => 8,
            ValueType::Array => 9,
            ValueType::U64 => 10,
            ValueType::I64 => 11,
            ValueType::F64 => 12,
        }
    }

    /// A short name used in messages (`u32`, `string`, `array`).
    pub const fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::String => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }

    /// Encoded size of a fixed-size value; `None` for strings and arrays.
    pub const fn fixed_size(self) -> Option<usize> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 | ValueType::F64 => Some(8),
            ValueType::String | ValueType::Array => None,
        }
    }

    /// The fewest bytes one value of this type can occupy (a string its length
    /// prefix, an array its element type and count).
    pub(crate) const fn min_size(self) -> usize {
        match self.fixed_size() {
            Some(n) => n,
            None => match self {
                ValueType::String => 8,
                _ => 12,
            },
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A metadata value borrowed from a parsed file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `f32`.
    F32(f32),
    /// bool (any non-zero byte reads as true, as in ggml).
    Bool(bool),
    /// A UTF-8 string.
    String(&'a str),
    /// An array, decoded lazily.
    Array(ArrayValue<'a>),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f64`.
    F64(f64),
}

impl<'a> Value<'a> {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// The type as messages spell it: `u32`, `string`, `array of string`.
    pub fn type_description(&self) -> String {
        match self {
            Value::Array(a) => format!("array of {}", a.element_type()),
            other => other.value_type().name().to_string(),
        }
    }

    /// The value as an integer when it is of any integer type.
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// An owned copy (arrays decoded in full) for writing elsewhere.
    pub fn to_owned_value(&self) -> OwnedValue {
        match *self {
            Value::U8(v) => OwnedValue::U8(v),
            Value::I8(v) => OwnedValue::I8(v),
            Value::U16(v) => OwnedValue::U16(v),
            Value::I16(v) => OwnedValue::I16(v),
            Value::U32(v) => OwnedValue::U32(v),
            Value::I32(v) => OwnedValue::I32(v),
            Value::F32(v) => OwnedValue::F32(v),
            Value::Bool(v) => OwnedValue::Bool(v),
            Value::String(s) => OwnedValue::String(s.to_string()),
            Value::Array(a) => OwnedValue::Array {
                element_type: a.element_type(),
                items: a.iter().map(|v| v.to_owned_value()).collect(),
            },
            Value::U64(v) => OwnedValue::U64(v),
            Value::I64(v) => OwnedValue::I64(v),
            Value::F64(v) => OwnedValue::F64(v),
        }
    }
}

/// How many elements of an array `Display` prints before eliding the rest.
const DISPLAY_ELEMENTS: usize = 8;

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U8(v) => write!(f, "{v}"),
            Value::I8(v) => write!(f, "{v}"),
            Value::U16(v) => write!(f, "{v}"),
            Value::I16(v) => write!(f, "{v}"),
            Value::U32(v) => write!(f, "{v}"),
            Value::I32(v) => write!(f, "{v}"),
            Value::F32(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::String(s) => write!(f, "{s:?}"),
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Array(a) => {
                write!(f, "[{}; {}] [", a.element_type(), a.len())?;
                for (i, v) in a.iter().take(DISPLAY_ELEMENTS).enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                if a.len() > DISPLAY_ELEMENTS as u64 {
                    f.write_str(", …")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// An array value: its element type, count and still-encoded elements. The bytes were
/// fully validated when the file was parsed; iterating decodes them again.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArrayValue<'a> {
    element_type: ValueType,
    len: u64,
    raw: &'a [u8],
    depth: usize,
}

impl<'a> ArrayValue<'a> {
    /// An array over already-validated element bytes; `depth` is the nesting depth of
    /// its elements.
    pub(crate) fn from_validated(
        element_type: ValueType,
        len: u64,
        raw: &'a [u8],
        depth: usize,
    ) -> Self {
        ArrayValue {
            element_type,
            len,
            raw,
            depth,
        }
    }

    /// The element type.
    pub fn element_type(&self) -> ValueType {
        self.element_type
    }

    /// The number of elements.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The encoded elements (without the element type and count).
    pub fn raw_bytes(&self) -> &'a [u8] {
        self.raw
    }

    /// Iterates the elements, decoding each.
    pub fn iter(&self) -> ArrayIter<'a> {
        ArrayIter {
            cursor: Cursor::new(self.raw, 0),
            element_type: self.element_type,
            left: self.len,
            depth: self.depth,
        }
    }

    /// The elements as strings, when the element type is string.
    pub fn strings(&self) -> Option<impl Iterator<Item = &'a str> + 'a> {
        (self.element_type == ValueType::String).then(|| {
            self.iter().map(|v| match v {
                Value::String(s) => s,
                _ => "",
            })
        })
    }
}

impl<'a> IntoIterator for ArrayValue<'a> {
    type Item = Value<'a>;
    type IntoIter = ArrayIter<'a>;
    fn into_iter(self) -> ArrayIter<'a> {
        self.iter()
    }
}

/// Iterator over the elements of an [`ArrayValue`].
#[derive(Clone, Debug)]
pub struct ArrayIter<'a> {
    cursor: Cursor<'a>,
    element_type: ValueType,
    left: u64,
    depth: usize,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The bytes were validated at parse time, so this cannot fail; if it somehow
        // did, the iteration simply ends.
        match read_value(
            &mut self.cursor,
            self.element_type,
            &|| String::new(),
            self.depth,
        ) {
            Ok(v) => Some(v),
            Err(_) => {
                self.left = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

/// Reads one value of type `ty`. `key` names the key for errors; `depth` is the array
/// nesting depth of this value (0 for a top-level value).
pub(crate) fn read_value<'a>(
    c: &mut Cursor<'a>,
    ty: ValueType,
    key: &dyn Fn() -> String,
    depth: usize,
) -> Result<Value<'a>> {
    let what = || format!("value of key {}", key());
    Ok(match ty {
        ValueType::U8 => Value::U8(c.array::<1>(what)?[0]),
        ValueType::I8 => Value::I8(i8::from_le_bytes(c.array::<1>(what)?)),
        ValueType::U16 => Value::U16(u16::from_le_bytes(c.array::<2>(what)?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(c.array::<2>(what)?)),
        ValueType::U32 => Value::U32(u32::from_le_bytes(c.array::<4>(what)?)),
        ValueType::I32 => Value::I32(i32::from_le_bytes(c.array::<4>(what)?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(c.array::<4>(what)?)),
        ValueType::Bool => Value::Bool(c.array::<1>(what)?[0] != 0),
        ValueType::String => Value::String(c.string(what)?),
        ValueType::U64 => Value::U64(u64::from_le_bytes(c.array::<8>(what)?)),
        ValueType::I64 => Value::I64(i64::from_le_bytes(c.array::<8>(what)?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(c.array::<8>(what)?)),
        ValueType::Array => {
            let start = c.pos() as u64;
            if depth >= MAX_ARRAY_DEPTH {
                return Err(GgufError::NestingTooDeep {
                    key: key(),
                    offset: start,
                });
            }
            let type_id = c.u32(|| format!("array element type of key {}", key()))?;
            let element_type =
                ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
                    key: key(),
                    offset: start,
                    type_id,
                })?;
            let count_at = c.pos() as u64;
            let len = c.u64(|| format!("array length of key {}", key()))?;
            let max = (c.remaining() / element_type.min_size()) as u64;
            if len > max {
                return Err(GgufError::CountTooLarge {
                    what: format!("array length of key {}", key()),
                    offset: count_at,
                    count: len,
                    max,
                });
            }
            let body = c.pos();
            match element_type.fixed_size() {
                // len * size <= remaining, checked above.
                Some(size) => {
                    c.take(len * size as u64, what)?;
                }
                None => {
                    for _ in 0..len {
                        read_value(c, element_type, key, depth + 1)?;
                    }
                }
            }
            Value::Array(ArrayValue {
                element_type,
                len,
                raw: &c.bytes()[body..c.pos()],
                depth: depth + 1,
            })
        }
    })
}

/// An owned metadata value, for the writer.
#[derive(Clone, Debug, PartialEq)]
pub enum OwnedValue {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `f32`.
    F32(f32),
    /// bool.
    Bool(bool),
    /// A string.
    String(String),
    /// An array; every item must have type `element_type`.
    Array {
        /// The element type.
        element_type: ValueType,
        /// The elements.
        items: Vec<OwnedValue>,
    },
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f64`.
    F64(f64),
}

impl OwnedValue {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            OwnedValue::U8(_) => ValueType::U8,
            OwnedValue::I8(_) => ValueType::I8,
            OwnedValue::U16(_) => ValueType::U16,
            OwnedValue::I16(_) => ValueType::I16,
            OwnedValue::U32(_) => ValueType::U32,
            OwnedValue::I32(_) => ValueType::I32,
            OwnedValue::F32(_) => ValueType::F32,
            OwnedValue::Bool(_) => ValueType::Bool,
            OwnedValue::String(_) => ValueType::String,
            OwnedValue::Array { .. } => ValueType::Array,
            OwnedValue::U64(_) => ValueType::U64,
            OwnedValue::I64(_) => ValueType::I64,
            OwnedValue::F64(_) => ValueType::F64,
        }
    }

    /// An array of strings.
    pub fn strings<S: Into<String>>(items: impl IntoIterator<Item = S>) -> OwnedValue {
        OwnedValue::Array {
            element_type: ValueType::String,
            items: items
                .into_iter()
                .map(|s| OwnedValue::String(s.into()))
                .collect(),
        }
    }

    /// An array of scalars of one type (the element type comes from `T`).
    pub fn array<T: Into<OwnedValue> + ArrayElement>(
        items: impl IntoIterator<Item = T>,
    ) -> OwnedValue {
        OwnedValue::Array {
            element_type: T::VALUE_TYPE,
            items: items.into_iter().map(Into::into).collect(),
        }
    }

    /// Appends the encoding (without the leading type id) to `out`, checking arrays
    /// are homogeneous and not nested too deep.
    pub(crate) fn encode(
        &self,
        out: &mut Vec<u8>,
        depth: usize,
    ) -> std::result::Result<(), String> {
        match self {
            OwnedValue::U8(v) => out.push(*v),
            OwnedValue::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
            OwnedValue::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
            OwnedValue::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
            OwnedValue::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
            OwnedValue::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
            OwnedValue::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
            OwnedValue::Bool(v) => out.push(u8::from(*v)),
            OwnedValue::String(s) => {
                out.extend_from_slice(&(s.len() as u64).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            OwnedValue::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
            OwnedValue::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
            OwnedValue::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
            OwnedValue::Array {
                element_type,
                items,
            } => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(format!("arrays nest deeper than {MAX_ARRAY_DEPTH} levels"));
                }
                out.extend_from_slice(&element_type.id().to_le_bytes());
                out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                for (i, item) in items.iter().enumerate() {
                    if item.value_type() != *element_type {
                        return Err(format!(
                            "array element {i} is {}, the array holds {element_type}",
                            item.value_type()
                        ));
                    }
                    item.encode(out, depth + 1)?;
                }
            }
        }
        Ok(())
    }
}

/// Scalar Rust types that can be elements of an [`OwnedValue::array`].
pub trait ArrayElement {
    /// The GGUF type of the element.
    const VALUE_TYPE: ValueType;
}

macro_rules! owned_from {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(
            impl From<$t> for OwnedValue {
                fn from(v: $t) -> OwnedValue { OwnedValue::$v(v) }
            }
            impl ArrayElement for $t {
                const VALUE_TYPE: ValueType = ValueType::$v;
            }
        )*
    };
}

owned_from! {
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, u64 => U64, i64 => I64, f64 => F64, String => String,
}

impl From<&str> for OwnedValue {
    fn from(v: &str) -> OwnedValue {
        OwnedValue::String(v.to_string())
    }
}
