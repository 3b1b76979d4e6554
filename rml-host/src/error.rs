//! The crate's typed error: *what* went wrong and *where* (file, field, tensor).
//!
//! Every fallible function in rml-host returns [`Result`]. A malformed file yields
//! [`Error::Format`], whose `field` names the part of the file that is wrong in a
//! dotted path (`header_length`, `tensors."w".data_offsets`, `__metadata__."k"`,
//! `member "x.npy"`, …) so that a message and a test can both point at it. Errors from
//! `rml-core` convert with `?` ([`Error::Core`]), and so do the GGUF module's
//! `GgufError`s ([`Error::Gguf`]); callers add context with [`Error::in_file`].
#![forbid(unsafe_code)]

use std::fmt;
use std::path::{Path, PathBuf};

use rml_core::DType;

/// Result alias used throughout rml-host.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in rml-host.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Reading, writing or mapping a file failed.
    Io {
        /// The file involved.
        path: PathBuf,
        /// What rml was doing (`"open"`, `"map"`, `"write"`, …).
        op: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A file (or an in-memory image of one) is malformed or uses something rml does
    /// not support. Produced by every format reader, including GGUF.
    Format {
        /// The format being read (`"safetensors"`, `"npy"`, `"npz"`, `"gguf"`, …).
        format: &'static str,
        /// The file, when the bytes came from one.
        file: Option<PathBuf>,
        /// The part of the file that is wrong, as a dotted path (see the module docs).
        field: String,
        /// What is wrong with it.
        what: String,
    },
    /// An `rml-core` error, with a short description of the operation that hit it.
    Core {
        /// The operation (for example `"Tensor::reshape"`), or empty.
        context: String,
        /// The underlying error.
        source: rml_core::Error,
    },
    /// A tensor has a different dtype than the caller asked for.
    DTypeMismatch {
        /// The dtype the caller asked for.
        expected: DType,
        /// The tensor's dtype.
        got: DType,
    },
    /// A tensor's bytes are not aligned for its element type (for example an F32
    /// tensor at an odd offset of a mapped file). [`crate::Tensor::aligned`] makes an
    /// aligned (counted) copy.
    Unaligned {
        /// Alignment the element type needs.
        align: usize,
        /// The address modulo `align`.
        misalignment: usize,
    },
    /// A name (tensor, key, archive member) is not present.
    NotFound {
        /// What kind of thing was looked up (`"tensor"`, `"member"`, …).
        kind: &'static str,
        /// The name that was looked up.
        name: String,
    },
    /// An argument is invalid; the string says which and why.
    InvalidArgument(String),
    /// A GGUF file is malformed or unsupported, or a GGUF request failed; the wrapped
    /// error says what and where (key, tensor, byte offset, file).
    Gguf(crate::formats::gguf::GgufError),
}

impl Error {
    /// A [`Error::Format`] error without a file (readers of in-memory bytes use this;
    /// openers attach the path with [`Error::in_file`]).
    pub fn format(format: &'static str, field: impl Into<String>, what: impl Into<String>) -> Self {
        Error::Format {
            format,
            file: None,
            field: field.into(),
            what: what.into(),
        }
    }

    /// Wraps an `rml-core` error with the operation that produced it.
    pub fn core(context: impl Into<String>, source: rml_core::Error) -> Self {
        Error::Core {
            context: context.into(),
            source,
        }
    }

    /// An I/O error on `path` while doing `op`.
    pub fn io(path: &Path, op: &'static str, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    }

    /// Attaches `path` to a [`Error::Format`] error that has no file yet; other
    /// errors are returned unchanged.
    pub fn in_file(self, path: &Path) -> Self {
        match self {
            Error::Format {
                format,
                file: None,
                field,
                what,
            } => Error::Format {
                format,
                file: Some(path.to_path_buf()),
                field,
                what,
            },
            other => other,
        }
    }

    /// The `field` of a [`Error::Format`] error, if it is one.
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::Format { field, .. } => Some(field),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, op, source } => {
                write!(f, "{}: cannot {op}: {source}", path.display())
            }
            Error::Format {
                format,
                file,
                field,
                what,
            } => {
                if let Some(file) = file {
                    write!(f, "{}: ", file.display())?;
                }
                write!(f, "invalid {format} file: {field}: {what}")
            }
            Error::Core { context, source } if context.is_empty() => write!(f, "{source}"),
            Error::Core { context, source } => write!(f, "{context}: {source}"),
            Error::DTypeMismatch { expected, got } => {
                write!(f, "dtype mismatch: expected {expected}, tensor is {got}")
            }
            Error::Unaligned {
                align,
                misalignment,
            } => write!(
                f,
                "tensor data is not aligned to {align} bytes (address % {align} = {misalignment}); \
                 use Tensor::aligned() to copy it"
            ),
            Error::NotFound { kind, name } => write!(f, "no {kind} named {name:?}"),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::Gguf(e) => write!(f, "invalid gguf file: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Core { source, .. } => Some(source),
            Error::Gguf(e) => Some(e),
            _ => None,
        }
    }
}

impl From<crate::formats::gguf::GgufError> for Error {
    fn from(e: crate::formats::gguf::GgufError) -> Self {
        Error::Gguf(e)
    }
}

impl From<rml_core::Error> for Error {
    fn from(source: rml_core::Error) -> Self {
        Error::core("", source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_errors_name_file_and_field() {
        let e = Error::format("safetensors", "header_length", "too large")
            .in_file(Path::new("m.safetensors"));
        assert_eq!(e.field(), Some("header_length"));
        assert_eq!(
            e.to_string(),
            "m.safetensors: invalid safetensors file: header_length: too large"
        );
    }

    #[test]
    fn core_errors_convert() {
        let e: Error = rml_core::Error::Overflow.into();
        assert_eq!(e.to_string(), "size computation overflowed");
        let e = Error::core("reshape", rml_core::Error::NotContiguous);
        assert_eq!(
            e.to_string(),
            "reshape: operation requires a contiguous layout"
        );
    }
}
