//! How the kinds name calls to each other: a call's site, every call of a
//! group as interventions name them, and the pointer two calls share.

use super::{
    base::Funcs,
    index::{GroupKey, pointers, share_pointer},
};
use crate::model::{Call, CallSet, Site};

pub(super) fn site_of(c: &Call) -> Site {
    Site { func: c.func, role: c.role, instance: c.instance }
}

/// Every call of the group, as interventions name them.
pub(super) fn call_set(funcs: &Funcs, g: &GroupKey) -> CallSet {
    CallSet { func: g.0, roles: funcs.classes.roles(g.1).to_vec(), instance: 0, within: g.2 }
}

/// The first pointer argument two calls share: (a's position, b's, value).
pub(super) fn shared_arg(a: &Call, ma: u8, b: &Call, mb: u8) -> Option<(u8, u8, i64)> {
    if !share_pointer(a, ma, b, mb) {
        return None;
    }
    let p = pointers(a, ma).find(|p| pointers(b, mb).any(|q| q == *p))?;
    let ai = (0..3).find(|&i| a.args[i] == p)? as u8;
    let bi = (0..3).find(|&i| b.args[i] == p)? as u8;
    Some((ai, bi, p))
}
