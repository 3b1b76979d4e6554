//! Checked reading of the raw arguments C passes: every pointer is tested for null
//! and alignment before use, and strings for UTF-8, so a caller mistake becomes a
//! status code naming the argument.
//!
//! What cannot be checked (that a non-null pointer points to memory of the stated
//! size) is the caller's promise, stated in each entry point's `# Safety` section.

use std::ffi::{CStr, c_char};

use crate::status::{Outcome, RmlStatus, fail};

/// Fails unless `ptr` is non-null and aligned for `T`.
fn check<T>(ptr: *const T, what: &str) -> Outcome {
    if ptr.is_null() {
        return Err(fail(
            RmlStatus::NullPointer,
            format!("{what} is a null pointer"),
        ));
    }
    if !ptr.is_aligned() {
        return Err(fail(
            RmlStatus::InvalidArgument,
            format!(
                "{what} is not aligned to {} bytes",
                std::mem::align_of::<T>()
            ),
        ));
    }
    Ok(())
}

/// The NUL-terminated UTF-8 string at `ptr`.
///
/// # Safety
/// `ptr` is null or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn string<'a>(ptr: *const c_char, what: &str) -> Outcome<&'a str> {
    check(ptr, what)?;
    // SAFETY: non-null, and the caller promises a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str().map_err(|e| {
        fail(
            RmlStatus::InvalidUtf8,
            format!("{what} is not valid UTF-8 ({e})"),
        )
    })
}

/// The `len` elements at `ptr` (any pointer, null included, when `len` is 0).
///
/// # Safety
/// When `len > 0`, `ptr` is null or points to `len` initialised `T`s that outlive
/// `'a` and are not written during it.
pub(crate) unsafe fn slice<'a, T>(ptr: *const T, len: usize, what: &str) -> Outcome<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    check(ptr, what)?;
    if len
        .checked_mul(std::mem::size_of::<T>())
        .is_none_or(|b| b > isize::MAX as usize)
    {
        return Err(fail(
            RmlStatus::InvalidArgument,
            format!("{what}: a length of {len} elements is too large"),
        ));
    }
    // SAFETY: non-null, aligned, the size fits an allocation, and the caller
    // promises `len` readable elements.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The `len` writable elements at `ptr` (any pointer when `len` is 0).
///
/// # Safety
/// When `len > 0`, `ptr` is null or points to `len` writable `T`s that outlive `'a`
/// and nothing else accesses during it.
pub(crate) unsafe fn slice_mut<'a, T>(ptr: *mut T, len: usize, what: &str) -> Outcome<&'a mut [T]> {
    if len == 0 {
        return Ok(&mut []);
    }
    // SAFETY: the same promise as `slice`, plus writability, which `slice` does not
    // use; the shared slice is only used for its checks.
    unsafe { slice(ptr.cast_const(), len, what)? };
    // SAFETY: checked above; the caller promises `len` writable elements.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// The `T` at `ptr`, or `None` for null (an optional argument).
///
/// # Safety
/// `ptr` is null or points to an initialised `T` that outlives `'a`.
pub(crate) unsafe fn optional<'a, T>(ptr: *const T, what: &str) -> Outcome<Option<&'a T>> {
    if ptr.is_null() {
        return Ok(None);
    }
    check(ptr, what)?;
    // SAFETY: non-null, aligned, and the caller promises a valid `T`.
    Ok(Some(unsafe { &*ptr }))
}

/// Writes `value` to the out-parameter `ptr`.
///
/// # Safety
/// `ptr` is null or points to writable memory for a `T`.
pub(crate) unsafe fn write<T>(ptr: *mut T, value: T, what: &str) -> Outcome {
    check(ptr.cast_const(), what)?;
    // SAFETY: non-null and aligned; the caller promises it is writable. `write`
    // does not read or drop the old (possibly uninitialised) value.
    unsafe { ptr.write(value) };
    Ok(())
}
