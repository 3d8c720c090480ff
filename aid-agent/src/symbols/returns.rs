//! Where a thread comes back from waiting for another: the instruction
//! after each call the executable's own code makes to `pthread_join` or
//! a condition wait. aid's probes on the C library are entry-only, so a
//! thread could be held before it waits but not at the moment it stops
//! waiting (a joined thread has ended, a signal woke the waiter with its
//! mutex taken again), which is where the check after a join runs. A
//! uprobe on the caller's next instruction is an ordinary entry-style
//! probe: it leaves the return address alone, so an unwind through the
//! wait (a cancellation, `pthread_exit` in a cleanup handler) is not
//! touched by it the way a return probe's trampoline would be.
//!
//! The executable's sections of code are decoded in one linear sweep
//! (iced-x86, as [`super::touches`] does); a call reaches the function
//! through its PLT stub (`call pthread_join@plt`) or, built without a
//! PLT, through its GOT slot (`call [rip+pthread_join@GOTPCREL]`). A C++
//! program's calls of `std::thread::join` and
//! `std::condition_variable::wait` count as the waits they make; calls
//! another library makes on its own are not found.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction};
use object::{Object as _, ObjectSection as _, SectionKind};

use super::touches::Callees;

/// The waits whose return is a point of its own, each with the name the
/// point shows: a thread waited for another's end, or was woken with its
/// mutex taken again. The C library's, and the C++ library's two that
/// call them (`std::thread::join` calls `pthread_join`;
/// `std::condition_variable::wait` jumps to `pthread_cond_wait`, so it
/// returns straight to its caller; its timed forms are inline templates
/// that call `pthread_cond_clockwait` from the program's own code).
pub const RETURNS_FROM: &[(&str, &str)] = &[
    ("pthread_join", "pthread_join"),
    ("pthread_timedjoin_np", "pthread_timedjoin_np"),
    ("pthread_clockjoin_np", "pthread_clockjoin_np"),
    ("pthread_cond_wait", "pthread_cond_wait"),
    ("pthread_cond_timedwait", "pthread_cond_timedwait"),
    ("pthread_cond_clockwait", "pthread_cond_clockwait"),
    ("_ZNSt6thread4joinEv", "std::thread::join"),
    ("_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE", "std::condition_variable::wait"),
];

/// One call of a [`RETURNS_FROM`] function by the executable's code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReturnSite {
    /// ELF address of the call instruction.
    pub call: u64,
    /// ELF address of the instruction after it: where the caller resumes.
    pub after: u64,
    /// The function called, as [`RETURNS_FROM`] shows it.
    pub callee: &'static str,
}

/// The calls of [`RETURNS_FROM`] functions in `file`'s code, in address
/// order; none on an architecture other than x86-64.
pub fn return_sites(file: &object::File<'_>) -> Vec<ReturnSite> {
    let mut out = Vec::new();
    if file.architecture() != object::Architecture::X86_64 {
        return out;
    }
    let calls = Callees::new(file);
    for section in file.sections() {
        let name = section.name().unwrap_or("");
        if section.kind() != SectionKind::Text || name.starts_with(".plt") {
            continue;
        }
        let Ok(bytes) = section.data() else { continue };
        let mut decoder = Decoder::with_ip(64, bytes, section.address(), DecoderOptions::NONE);
        let mut ins = Instruction::default();
        while decoder.can_decode() {
            decoder.decode_out(&mut ins);
            let callee = match ins.flow_control() {
                FlowControl::Call => calls.name(ins.near_branch_target()),
                FlowControl::IndirectCall if ins.is_ip_rel_memory_operand() => {
                    calls.slot(ins.ip_rel_memory_address())
                }
                _ => None,
            };
            let Some(callee) = callee.map(|n| n.split('@').next().unwrap_or(n)) else { continue };
            if let Some(&(_, shown)) = RETURNS_FROM.iter().find(|(name, _)| *name == callee) {
                out.push(ReturnSite { call: ins.ip(), after: ins.next_ip(), callee: shown });
            }
        }
    }
    out.sort_by_key(|s| s.call);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "#include <pthread.h>\n\
        pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;\n\
        pthread_cond_t c = PTHREAD_COND_INITIALIZER;\n\
        int ready;\n\
        void *worker(void *a) {\n\
          pthread_mutex_lock(&m);\n\
          while (!ready)\n\
            pthread_cond_wait(&c, &m);\n\
          pthread_mutex_unlock(&m);\n\
          return a;\n\
        }\n\
        int main(void) {\n\
          pthread_t t;\n\
          pthread_create(&t, 0, worker, 0);\n\
          pthread_mutex_lock(&m);\n\
          ready = 1;\n\
          pthread_cond_signal(&c);\n\
          pthread_mutex_unlock(&m);\n\
          pthread_join(t, 0);\n\
          return 0;\n\
        }\n";

    /// The callees found in `source` compiled by `compiler`, each with the
    /// bytes of its call instruction.
    fn found_in(
        compiler: &str,
        file: &str,
        source: &str,
        flags: &[&str],
    ) -> Vec<(String, Vec<u8>)> {
        let (_dir, exe) = crate::symbols::compiled(compiler, file, source, flags).expect(
            "the C and C++ compilers (cc, c++) are needed: `cargo xtask setup` installs them",
        );
        let data = std::fs::read(&exe).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let text = file.section_by_name(".text").unwrap();
        let bytes = text.data().unwrap();
        return_sites(&file)
            .into_iter()
            .map(|s| {
                let at = (s.call - text.address()) as usize;
                (s.callee.to_owned(), bytes[at..at + (s.after - s.call) as usize].to_vec())
            })
            .collect()
    }

    /// Through the PLT (`call rel32`, five bytes) and, built without one,
    /// through the GOT slot (`call [rip+disp32]`, six bytes): the wait in
    /// the worker and the join in main, nothing else (not the lock, the
    /// signal or the thread's creation).
    fn found(flags: &[&str]) -> Vec<(String, Vec<u8>)> {
        found_in("cc", "w.c", SOURCE, flags)
    }

    #[test]
    fn the_calls_of_a_join_and_a_condition_wait_are_found_with_or_without_a_plt() {
        let plt = found(&["-O0", "-pthread"]);
        let names: Vec<&str> = plt.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["pthread_cond_wait", "pthread_join"]);
        assert!(plt.iter().all(|(_, b)| b.len() == 5 && b[0] == 0xe8), "{plt:x?}");
        let got = found(&["-O0", "-pthread", "-fno-plt"]);
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["pthread_cond_wait", "pthread_join"]);
        assert!(got.iter().all(|(_, b)| b[..2] == [0xff, 0x15]), "{got:x?}");
    }

    /// C++: `std::thread::join` and `std::condition_variable::wait` (called
    /// by the predicate form's inline loop) are the waits.
    #[test]
    fn a_cxx_join_and_condition_wait_are_found_by_their_library_calls() {
        let source = "#include <condition_variable>\n\
            #include <mutex>\n\
            #include <thread>\n\
            std::mutex m;\n\
            std::condition_variable cv;\n\
            bool ready;\n\
            int main() {\n\
              std::thread t([] { std::unique_lock<std::mutex> l(m); cv.wait(l, [] { return ready; }); });\n\
              { std::lock_guard<std::mutex> g(m); ready = true; }\n\
              cv.notify_one();\n\
              t.join();\n\
            }\n";
        let mut names: Vec<String> = found_in("c++", "w.cpp", source, &["-O0", "-pthread"])
            .into_iter()
            .map(|f| f.0)
            .collect();
        names.sort();
        assert_eq!(names, ["std::condition_variable::wait", "std::thread::join"]);
    }
}
