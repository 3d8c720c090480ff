//! Small data structures and formatting helpers that know nothing of aid's
//! domain.

pub mod bitset;
pub mod fxhash;
pub mod human;

/// An error and its causes in one line, "outer: inner: innermost": for
/// errors that end up as text inside another error.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
