fn main() {
    let obj: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/aid"));
    let mut ebpf = aya::Ebpf::load(obj).unwrap();
    for (name, p) in ebpf.programs_mut() { println!("{name}: {:?}", p.prog_type()); }
}
