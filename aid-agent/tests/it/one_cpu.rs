//! Single-CPU noise (`record --noise one-cpu`, `debug --amplify
//! one-cpu`; issue 24): the target's threads run on one CPU, their
//! priorities drawn at random again and again, and no other process is
//! touched.

use std::{path::Path, process::Command};

use aid::{
    intervene::one_cpu::LOW_NICE,
    model::{NoiseAction, NoiseAt},
};

use crate::common::*;

/// What a run of fixtures/one_cpu.c printed: (cpus it may use, cpu it
/// ran on, nice), ten looks by each of its two threads.
fn looks(dir: &Path, run: u32) -> Vec<(u32, u32, i32)> {
    let text = std::fs::read_to_string(dir.join(format!("runs/{run:06}/stdout.txt"))).unwrap();
    let field = |line: &str, name: &str| -> i64 {
        let at = line.find(&format!(" {name}=")).unwrap_or_else(|| panic!("{line}"));
        let rest = &line[at + name.len() + 2..];
        rest.split_whitespace().next().unwrap().parse().unwrap()
    };
    let out: Vec<(u32, u32, i32)> = text
        .lines()
        .map(|l| (field(l, "cpus") as u32, field(l, "cpu") as u32, field(l, "nice") as i32))
        .collect();
    assert_eq!(out.len(), 20, "run {run}: {text}");
    out
}

/// The first run is made as it is (every CPU the agent may use, nice 0);
/// each later one on the CPU its record names, with nice 0 or 19 only, 19
/// among them (rule: some look of the 60 in the three noisy runs sees
/// it; the priorities are drawn again at most 50 ms apart and each look
/// is at least 20 ms of CPU after the last, so a miss needs every one of
/// some twenty independent draws to leave both threads high: below one
/// in a million). A copy of the program started beside the session is
/// never pinned nor made nice.
#[test]
#[ignore = "needs root and eBPF: `cargo xtask test` runs it"]
fn noise_on_one_cpu_pins_the_target_and_draws_its_priorities() {
    let _bpf = require_bpf();
    let exe = c_fixture("one_cpu.c", "one_cpu", &[]);
    let all = aid::sys::sched::allowed_cpus().len() as u32;
    let bystander =
        Command::new(&exe).arg("8").stdout(std::process::Stdio::piped()).spawn().unwrap();
    let (_tmp, out) = temp_session();
    let output = run_ok(
        agent().args(["record", "-n", "3", "--noise", "one-cpu", "--out"]).arg(&out).arg(&exe),
    );
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.starts_with(&format!(
            "recorded 4 run(s) of {}: run 1 without noise (pass), 3 with noise (one CPU, random thread priorities drawn again every 1-50 ms): 3 pass, 0 fail;",
            exe.display()
        )),
        "{said}"
    );
    let session = load(&out);
    assert_eq!(session.runs.len(), 4);
    assert!(session.runs[0].noise.is_empty());
    assert!(looks(&out, 1).iter().all(|&(cpus, _, nice)| cpus == all && nice == 0));
    let mut low = 0;
    for run in &session.runs[1..] {
        let [n] = &run.noise[..] else { panic!("run {}: {:?}", run.id, run.noise) };
        let NoiseAction::OneCpu { cpu, .. } = n.action else { panic!("{n:?}") };
        assert_eq!((n.at, n.held_ns), (NoiseAt::Process, 0));
        for (cpus, on, nice) in looks(&out, run.id) {
            assert_eq!((cpus, on), (1, cpu), "run {}", run.id);
            assert!(nice == 0 || nice == LOW_NICE, "run {}: nice {nice}", run.id);
            low += usize::from(nice == LOW_NICE);
        }
    }
    assert!(low > 0, "no look saw nice {LOW_NICE}");
    let by = bystander.wait_with_output().unwrap();
    let by = String::from_utf8_lossy(&by.stdout);
    assert_eq!(by.lines().count(), 20, "{by}");
    assert!(
        by.lines().all(|l| l.contains(&format!(" cpus={all} ")) && l.ends_with(" nice=0")),
        "the bystander was touched:\n{by}"
    );
}
