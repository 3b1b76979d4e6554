//! Status codes, the thread-local last-error message, and the guard every entry
//! point runs its body in (errors become codes, panics are caught).

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// What an rml call returns: `RML_STATUS_OK` (0) or the kind of failure. On failure
/// [`rml_last_error`] holds a message naming what was wrong.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmlStatus {
    /// Success.
    Ok = 0,
    /// A required pointer argument was null.
    NullPointer = 1,
    /// A handle is 0, freed, forged, or of the other kind (an LLM passed as a graph).
    InvalidHandle = 2,
    /// A string argument is not valid UTF-8.
    InvalidUtf8 = 3,
    /// An argument is out of range or inconsistent (unknown input name, bad flag,
    /// misaligned pointer, sampler setting out of range, ...).
    InvalidArgument = 4,
    /// A tensor's dtype is unknown or not the one the graph declares.
    Dtype = 5,
    /// A tensor's shape does not fit the graph, or its byte length does not match
    /// its shape.
    Shape = 6,
    /// A caller buffer is too small; the call reports the size it needs.
    BufferTooSmall = 7,
    /// A file could not be read or is not a valid graph or model.
    Load = 8,
    /// Running the graph or the model failed.
    Run = 9,
    /// The handle is in use by another call (another thread, or a callback of the
    /// same call).
    Busy = 10,
    /// A bug in rml: a panic was caught at the boundary. The handle involved should
    /// be freed.
    Panic = 11,
}

impl RmlStatus {
    /// The code's name as in the header, e.g. `RML_STATUS_SHAPE`.
    pub fn name(self) -> &'static std::ffi::CStr {
        match self {
            RmlStatus::Ok => c"RML_STATUS_OK",
            RmlStatus::NullPointer => c"RML_STATUS_NULL_POINTER",
            RmlStatus::InvalidHandle => c"RML_STATUS_INVALID_HANDLE",
            RmlStatus::InvalidUtf8 => c"RML_STATUS_INVALID_UTF8",
            RmlStatus::InvalidArgument => c"RML_STATUS_INVALID_ARGUMENT",
            RmlStatus::Dtype => c"RML_STATUS_DTYPE",
            RmlStatus::Shape => c"RML_STATUS_SHAPE",
            RmlStatus::BufferTooSmall => c"RML_STATUS_BUFFER_TOO_SMALL",
            RmlStatus::Load => c"RML_STATUS_LOAD",
            RmlStatus::Run => c"RML_STATUS_RUN",
            RmlStatus::Busy => c"RML_STATUS_BUSY",
            RmlStatus::Panic => c"RML_STATUS_PANIC",
        }
    }
}

/// Every code, in numeric order.
const STATUSES: [RmlStatus; 12] = [
    RmlStatus::Ok,
    RmlStatus::NullPointer,
    RmlStatus::InvalidHandle,
    RmlStatus::InvalidUtf8,
    RmlStatus::InvalidArgument,
    RmlStatus::Dtype,
    RmlStatus::Shape,
    RmlStatus::BufferTooSmall,
    RmlStatus::Load,
    RmlStatus::Run,
    RmlStatus::Busy,
    RmlStatus::Panic,
];

/// A failed call: its status and the message [`rml_last_error`] will return.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: RmlStatus,
    pub(crate) message: String,
}

/// A failure of kind `status` described by `message`.
pub(crate) fn fail(status: RmlStatus, message: impl Into<String>) -> Failure {
    Failure {
        status,
        message: message.into(),
    }
}

/// The result of an entry point's body.
pub(crate) type Outcome<T = ()> = Result<T, Failure>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Stores `failure`'s message as this thread's last error and returns its status.
fn record(failure: Failure) -> RmlStatus {
    let text = CString::new(failure.message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
    failure.status
}

/// Runs an entry point's body: `Ok` becomes [`RmlStatus::Ok`], a failure is
/// recorded as the last error, and a panic is caught and reported as
/// [`RmlStatus::Panic`] instead of unwinding into C.
pub(crate) fn guard(body: impl FnOnce() -> Outcome) -> RmlStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => RmlStatus::Ok,
        Ok(Err(failure)) => record(failure),
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            record(fail(
                RmlStatus::Panic,
                format!("internal error (a bug in rml): {what}"),
            ))
        }
    }
}

/// The message of the most recent failed rml call on this thread (an empty string
/// when none failed yet). Successful calls leave it unchanged. The pointer is owned
/// by the library and stays valid until the next failing call on this thread; copy
/// the text to keep it.
#[unsafe(no_mangle)]
pub extern "C" fn rml_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// The name of a status code (`"RML_STATUS_SHAPE"`), or `"RML_STATUS_UNKNOWN"` for
/// a value that is not one; a static string the caller must not free.
#[unsafe(no_mangle)]
pub extern "C" fn rml_status_name(status: i32) -> *const c_char {
    STATUSES
        .iter()
        .find(|s| **s as i32 == status)
        .map_or(c"RML_STATUS_UNKNOWN", |s| s.name())
        .as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last() -> String {
        // SAFETY: rml_last_error returns a valid NUL-terminated string.
        let text = unsafe { std::ffi::CStr::from_ptr(rml_last_error()) };
        text.to_string_lossy().into_owned()
    }

    #[test]
    fn a_panic_becomes_a_status() {
        let status = guard(|| panic!("boom {}", 42));
        assert_eq!(status, RmlStatus::Panic);
        assert!(last().contains("boom 42"), "{}", last());
        assert_eq!(guard(|| Ok(())), RmlStatus::Ok);
        assert!(last().contains("boom 42"), "success leaves the last error");
    }

    #[test]
    fn messages_with_nul_bytes_survive() {
        let status = guard(|| Err(fail(RmlStatus::Run, "a\0b")));
        assert_eq!(status, RmlStatus::Run);
        assert_eq!(last(), "a\\0b");
    }
}
