//! The error type of the decoder side of `rml-llm`: configuration, weights, and
//! run-time input problems, each naming the key, tensor or value at fault.

use std::fmt;

/// Everything that can go wrong while configuring, loading or running a decoder.
#[derive(Debug)]
pub enum Error {
    /// A configuration key is missing, has the wrong type, or an invalid value.
    Config {
        /// Where the configuration came from (`config.json`, `gguf metadata`, …).
        source: String,
        /// The key at fault.
        key: String,
        /// What is wrong with it.
        what: String,
    },
    /// A named feature (architecture, rope type, activation, …) is not supported.
    Unsupported {
        /// What kind of thing was named (`"architecture"`, `"rope type"`, …).
        what: &'static str,
        /// The name that was given.
        name: String,
        /// The names that are supported.
        supported: &'static [&'static str],
    },
    /// A tensor the model needs is not in the weight source.
    MissingTensor {
        /// The tensor's name in the source's convention.
        name: String,
    },
    /// A tensor has a shape other than the configuration implies.
    TensorShape {
        /// The tensor's name.
        name: String,
        /// The shape the configuration implies.
        expected: Vec<usize>,
        /// The shape in the file.
        got: Vec<usize>,
    },
    /// A call's arguments are wrong (token id past the vocabulary, cache full, …).
    Input(String),
    /// An `rml-host` error (file formats, tensors).
    Host(rml_host::Error),
    /// A GGUF reader error.
    Gguf(rml_host::formats::gguf::GgufError),
    /// An `rml-core` / `rml-kernels` error, with the operation that hit it.
    Core {
        /// The operation.
        context: &'static str,
        /// The underlying error.
        source: rml_core::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A [`Error::Config`] error.
    pub fn config(source: &str, key: &str, what: impl Into<String>) -> Error {
        Error::Config {
            source: source.to_owned(),
            key: key.to_owned(),
            what: what.into(),
        }
    }

    /// Wraps an `rml-core` error with the operation that hit it.
    pub fn core(context: &'static str) -> impl FnOnce(rml_core::Error) -> Error {
        move |source| Error::Core { context, source }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config { source, key, what } => write!(f, "{source}: key {key:?}: {what}"),
            Error::Unsupported {
                what,
                name,
                supported,
            } => write!(
                f,
                "unsupported {what} {name:?} (supported: {})",
                supported.join(", ")
            ),
            Error::MissingTensor { name } => write!(f, "tensor {name:?} is missing"),
            Error::TensorShape {
                name,
                expected,
                got,
            } => write!(
                f,
                "tensor {name:?} has shape {got:?}, expected {expected:?}"
            ),
            Error::Input(what) => write!(f, "invalid input: {what}"),
            Error::Host(e) => write!(f, "{e}"),
            Error::Gguf(e) => write!(f, "{e}"),
            Error::Core { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Host(e) => Some(e),
            Error::Gguf(e) => Some(e),
            _ => None,
        }
    }
}

impl From<rml_host::Error> for Error {
    fn from(e: rml_host::Error) -> Error {
        Error::Host(e)
    }
}
