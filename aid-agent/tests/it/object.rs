//! The eBPF object as the kernel loads it: every map aid-common names is
//! there under that name, and the loader's patched globals let it load.

use crate::common::*;
use aid::bpf::{LoadOptions, Probes};

#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn loaded_object_has_every_named_map() {
    let _bpf = require_bpf();
    aid::bpf::preflight(aid::bpf::Needs::Trace).unwrap();
    let probes = Probes::load(LoadOptions::default()).expect("the object loads");
    let names = probes.map_names();
    for name in aid_common::ALL_MAPS {
        assert!(names.iter().any(|n| n == name), "map {name} missing from {names:?}");
    }
    // Nothing else but the data sections of the globals.
    let others: Vec<&String> =
        names.iter().filter(|n| !aid_common::ALL_MAPS.contains(&n.as_str())).collect();
    assert!(others.iter().all(|n| n.starts_with('.')), "{others:?}");
}
