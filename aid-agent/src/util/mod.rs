//! Small data structures that know nothing of aid's domain.

pub mod bitset;
