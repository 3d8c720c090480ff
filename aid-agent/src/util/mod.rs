//! Small data structures and formatting helpers that know nothing of aid's
//! domain.

pub mod bitset;
pub mod human;
