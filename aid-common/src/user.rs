//! User-space-only impls (the `user` feature): the agent reads and writes
//! these types through aya's typed maps.

// SAFETY: this and each type below is `repr(C)` (or `repr(transparent)`
// over an integer), `Copy`, made of integers with no padding (its size is
// asserted where it is defined), so any bit pattern is a valid value.
unsafe impl aya::Pod for crate::Event {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::TargetState {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::CallKey {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::CallStack {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::SiteKey {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::Action {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::Pending {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::UnitState {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::Replay {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::WatchHit {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::WatchConfig {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::EntryRegs {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::GroupMember {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::GroupSlot {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::RunningKey {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::OpenMember {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::PointeeSpec {}
// SAFETY: as above.
unsafe impl aya::Pod for crate::ShadowStack {}
