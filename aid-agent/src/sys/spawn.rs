//! Running the target once: start it held just before `execve` (so probes
//! can be attached to its pid first), release it, wait for it with a
//! timeout, and capture its output (how the run is judged:
//! [`crate::record::fail`]).
//!
//! The target's world stays its own: it runs in the agent's mount
//! namespace (the user's; the agent mounts nothing), without the agent's
//! ambient capabilities, and writes its stdout and stderr to unnamed files
//! in the session directory, not to pipes: what it leaves behind (a
//! daemon) goes on writing after the agent is gone (a pipe whose reader is
//! gone would kill it with SIGPIPE).
//!
//! The target itself ends with the agent, however the agent ends (SIGKILL
//! included): a hung run is never left behind with no parent to end it.
//! The kernel sends it SIGKILL (`PR_SET_PDEATHSIG`) when the thread that
//! forked it exits, not the process: each target is forked by the thread
//! that waits for it, which is the only thread allowed to (a traced child
//! can only be waited for by its tracer thread), so the run never outlives
//! that thread's interest in it. A process aid attaches to (`-p`) is not
//! its child and is never touched.

use std::{
    ffi::{CString, OsString},
    fs::File,
    io::Read as _,
    os::{
        fd::{AsRawFd as _, OwnedFd},
        unix::{ffi::OsStrExt as _, fs::FileExt as _},
    },
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use nix::{
    errno::Errno,
    fcntl::OFlag,
    sys::signal::{self, SigHandler, SigSet, SigmaskHow, Signal},
    unistd::{self, ForkResult, Pid},
};

use crate::{
    model::Outcome,
    sys::{
        hang::{HangCheck, Hung},
        poll,
    },
};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("`{0}` not found: give a path or a program on PATH")]
    NotFound(String),
    #[error("`{0}` is not executable: chmod +x it, or give the program that runs it")]
    NotExecutable(String),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("cannot start {}: {reason}", path.display())]
    Spawn { path: PathBuf, reason: String },
}

/// The program to run and its arguments.
#[derive(Clone, Debug)]
pub struct Target {
    /// Absolute path of the executable.
    pub program: PathBuf,
    /// argv, including `argv[0]` as the user typed it.
    pub argv: Vec<OsString>,
    /// Where the files holding the target's output are created (unnamed:
    /// they vanish when the last process holding them exits): the session
    /// directory, so nothing is written outside it. None: the system's
    /// temporary directory.
    pub output_dir: Option<PathBuf>,
}

impl Target {
    /// Resolves `argv[0]` like a shell would (a path, or a name on PATH).
    pub fn from_argv(argv: &[OsString]) -> Result<Target, RunError> {
        let first = argv.first().ok_or_else(|| RunError::NotFound(String::new()))?;
        let shown = first.to_string_lossy().into_owned();
        let Ok(program) = which::which(first) else {
            // `which` skips files it may not execute: say so rather than
            // "not found" when the path names one.
            let path = std::path::Path::new(first);
            if first.as_bytes().contains(&b'/') && path.is_file() {
                return Err(RunError::NotExecutable(shown));
            }
            return Err(RunError::NotFound(shown));
        };
        let program = program.canonicalize().unwrap_or(program);
        Ok(Target { program, argv: argv.to_vec(), output_dir: None })
    }

    pub fn display(&self) -> String {
        self.argv.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
    }
}

/// What a stream of the target printed: the last bytes for the report, and
/// (up to a cap) everything for the output rules.
#[derive(Clone, Debug, Default)]
pub struct Captured {
    pub text: String,
    pub truncated: bool,
}

impl Captured {
    const CAP: usize = 8 << 20;
    const TAIL: usize = 4096;

    pub fn tail(&self) -> &str {
        let start = self.text.len().saturating_sub(Self::TAIL);
        let start = (start..=self.text.len()).find(|i| self.text.is_char_boundary(*i)).unwrap_or(0);
        &self.text[start..]
    }
}

/// How the target ended.
#[derive(Clone, Debug, Default)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Ended by aid because every thread waited for another, with no
    /// progress, for longer than the bound (`--hang-after`).
    pub hung: Option<Hung>,
    pub wall_ns: u64,
    pub stdout: Captured,
    pub stderr: Captured,
}

impl Exit {
    pub fn outcome(&self, reason: String) -> Outcome {
        Outcome {
            exit_code: self.code,
            signal: self.signal,
            timed_out: self.timed_out,
            wall_ns: self.wall_ns,
            reason,
        }
    }
}

/// A target process forked and waiting, before `execve`, for
/// [`Spawned::release`].
pub struct Spawned {
    pub pid: u32,
    go: Option<OwnedFd>,
    exec_error: OwnedFd,
    stdout: Option<Reader>,
    stderr: Option<Reader>,
    started: Option<Instant>,
}

fn cstring(bytes: &[u8]) -> Result<CString, String> {
    CString::new(bytes).map_err(|_| "argument contains a NUL byte".to_owned())
}

/// Held by [`spawn_held`] from creating the child's pipes and files to
/// closing the parent's copies of the child's ends.
static FORKING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Forks the target. The child asks to be killed when the calling thread
/// exits, puts itself in its own process group, connects stdin to
/// /dev/null and stdout/stderr to files of their own, drops the agent's
/// ambient capabilities, and blocks until released; if the agent
/// disappears first it exits without running the target. The caller waits
/// for the target ([`Spawned::wait`], or the ptrace controller) on this
/// same thread.
pub fn spawn_held(target: &Target) -> Result<Spawned, RunError> {
    let spawn_err = |reason: String| RunError::Spawn { path: target.program.clone(), reason };
    // Everything the child needs is prepared before fork: after it, only
    // async-signal-safe calls are allowed.
    let program = cstring(target.program.as_os_str().as_bytes()).map_err(spawn_err)?;
    let argv: Vec<CString> = target
        .argv
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(spawn_err)?;
    let envp: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let io = |e: std::io::Error| spawn_err(e.to_string());
    // One fork at a time (parallel runs, `--jobs`): a child forked by
    // another thread between this one's `pipe2` and its parent closing the
    // child's ends would hold them until its own exec, and this run's
    // release would wait for that exec to see its exec succeed.
    let _forking = FORKING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let pipe = || unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| io(e.into()));
    let (go_r, go_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let output_file = || {
        let dir = target.output_dir.clone().unwrap_or_else(std::env::temp_dir);
        tempfile::tempfile_in(&dir).map_err(|e| RunError::Io { path: dir, source: e })
    };
    let (out_file, errout_file) = (output_file()?, output_file()?);
    let out_w = OwnedFd::from(out_file.try_clone().map_err(io)?);
    let errout_w = OwnedFd::from(errout_file.try_clone().map_err(io)?);
    let devnull = File::open("/dev/null").map_err(io)?;
    let parent = unistd::getpid();

    // The child is born with every signal blocked (they wait for
    // `exec_when_released`, which drops them): one meant for the agent
    // that lands before the child could block it would stop it, traced,
    // or end it. The forking thread's own mask is restored at once.
    let mut mask = SigSet::empty();
    signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::all()), Some(&mut mask))
        .map_err(|e| io(e.into()))?;
    // SAFETY: the child runs `exec_when_released` alone, which only makes
    // async-signal-safe calls (see there) and never returns.
    let forked = unsafe { unistd::fork() };
    if !matches!(forked, Ok(ForkResult::Child)) {
        let _ = signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&mask), None);
    }
    match forked.map_err(|e| io(e.into()))? {
        ForkResult::Child => {
            drop(go_w);
            let child =
                Child { go: go_r, exec_error: err_w, stdout: out_w, stderr: errout_w, parent };
            exec_when_released(&child, &devnull, &program, &argv, &envp)
        }
        ForkResult::Parent { child } => {
            drop((go_r, err_w, out_w, errout_w, devnull));
            Ok(Spawned {
                pid: child.as_raw() as u32,
                go: Some(go_w),
                exec_error: err_r,
                stdout: Some(Reader::spawn(out_file)),
                stderr: Some(Reader::spawn(errout_file)),
                started: None,
            })
        }
    }
}

/// The child's ends of the pipes to the agent, and its output files.
struct Child {
    go: OwnedFd,
    exec_error: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    /// The agent, as the child's parent process.
    parent: Pid,
}

/// In the forked child: set up its descriptors, process group and signal
/// state, wait for the agent's go, and exec the target. If the exec fails,
/// its errno goes back to the agent through `exec_error`.
///
/// Only async-signal-safe calls, with one exception: nix's `execve` builds
/// its argument and environment pointer arrays with one allocation each.
/// glibc resets its allocator's locks in the child of a fork, so that
/// allocation cannot deadlock on a lock another agent thread held.
fn exec_when_released(
    child: &Child,
    devnull: &File,
    program: &CString,
    argv: &[CString],
    envp: &[CString],
) -> ! {
    let quit = || -> ! {
        // SAFETY: `_exit` is async-signal-safe and skips the parent's
        // atexit handlers and buffered output, which this copy must not run.
        unsafe { libc::_exit(127) }
    };
    // Killed when the forking thread exits (see the module's doc). The
    // agent may have died between the fork and this call, leaving nobody
    // to send the signal: then the parent is no longer the agent.
    // `prctl` and `getppid` are plain system calls, async-signal-safe.
    let orphaned = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err()
        || unistd::getppid() != child.parent;
    if orphaned {
        quit();
    }
    let setup = unistd::dup2_stdin(devnull)
        .and_then(|()| unistd::dup2_stdout(&child.stdout))
        .and_then(|()| unistd::dup2_stderr(&child.stderr))
        .and_then(|()| unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0)));
    // Every signal is blocked since the fork (`spawn_held`): until the
    // exec this copy still bears the agent's name, and signals meant for
    // the agent reach it too (`pkill -f`, `killall aid-agent`); they wait
    // and are dropped below. Traced, the copy would otherwise stop for its
    // tracer at such a signal while the agent waits for the exec: both
    // would wait for ever.
    if setup.is_err() {
        quit();
    }
    // Only the two pipes stay open while the child waits: a copy of the
    // agent's other descriptors (probe links, maps, another run's output
    // files) would keep what they refer to alive until the exec — a probe
    // link the agent closed meanwhile would keep its breakpoints.
    let (go, err) = (child.go.as_raw_fd(), child.exec_error.as_raw_fd());
    let (a, b) = (go.min(err) as u32, go.max(err) as u32);
    if a >= 3 {
        // Inclusive ranges around the two kept descriptors.
        for (first, last) in [(3, a - 1), (a + 1, b - 1), (b + 1, u32::MAX)] {
            if first <= last {
                // SAFETY: close_range is a plain system call,
                // async-signal-safe; it closes none of the two kept.
                unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
            }
        }
    }
    // The target does not inherit privileges the agent was given to trace
    // (ambient capabilities survive exec). Fails only on kernels without
    // ambient capabilities, which have none to drop.
    // SAFETY: prctl is a plain system call, async-signal-safe.
    unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) };
    // SAFETY: restoring the default action installs no handler.
    if unsafe { signal::signal(Signal::SIGPIPE, SigHandler::SigDfl) }.is_err() {
        quit();
    }
    let mut byte = [0u8; 1];
    loop {
        match unistd::read(&child.go, &mut byte) {
            Ok(1) => break,
            Err(Errno::EINTR) => {}
            _ => quit(),
        }
    }
    if drop_pending_signals().is_err() {
        quit();
    }
    let errno = match unistd::execve(program, argv, envp) {
        Err(e) => e as i32,
        Ok(never) => match never {},
    };
    let _ = unistd::write(&child.exec_error, &errno.to_ne_bytes());
    quit()
}

/// In the forked child, before the exec: drops the signals that arrived
/// while it waited (they were meant for the agent, whose name it bore),
/// and undoes the agent's and the Rust runtime's signal mask. Setting a
/// pending signal's action to "ignore" discards it; its action is then
/// the default, as the exec makes it for every signal the agent caught
/// (the runtime's ignored SIGPIPE is reset before the wait).
/// `sigpending`, `sigaction` and `sigprocmask` are async-signal-safe.
fn drop_pending_signals() -> nix::Result<()> {
    let mut pending = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigpending fills the set it is given.
    if unsafe { libc::sigpending(pending.as_mut_ptr()) } != 0 {
        return Err(Errno::last());
    }
    // SAFETY: filled above.
    let pending = unsafe { pending.assume_init() };
    // Every signal number Linux has (SIGRTMAX is 64).
    for sig in 1..=64 {
        // SAFETY: reads the set filled above.
        let is_pending = unsafe { libc::sigismember(&pending, sig) } == 1;
        if !is_pending || sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: "ignore", then the default action: no handler runs.
        unsafe {
            libc::signal(sig, libc::SIG_IGN);
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
}

/// Reads one output file of the target while it runs: the bytes added
/// since the last look (at the reader's own offset: the target's writes
/// move the offset the two descriptors share), keeping the last
/// [`Captured::CAP`] bytes, and freeing the file's blocks behind it so a
/// chatty target does not fill the disk.
struct Reader {
    done: Arc<AtomicBool>,
    thread: JoinHandle<Captured>,
}

impl Reader {
    fn spawn(file: File) -> Reader {
        let done = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&done);
        let thread = std::thread::spawn(move || {
            let mut out = Captured::default();
            let mut bytes: Vec<u8> = Vec::new();
            let mut offset = 0u64;
            let mut freed = 0u64;
            let mut buf = vec![0u8; 64 << 10];
            loop {
                // Decided before reading: everything written before the
                // target was reaped is read after `done` is set, and no
                // more (a daemon it left behind may write on for ever).
                let last = stop.load(Ordering::Acquire);
                let end = if last { file.metadata().map_or(0, |m| m.len()) } else { u64::MAX };
                while offset < end {
                    let want = buf.len().min(usize::try_from(end - offset).unwrap_or(usize::MAX));
                    match file.read_at(&mut buf[..want], offset) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            bytes.extend_from_slice(&buf[..n]);
                            offset += n as u64;
                            // Trimmed in large steps: a chatty target
                            // costs a copy per CAP bytes, not per read.
                            if bytes.len() > 2 * Captured::CAP {
                                let cut = bytes.len() - Captured::CAP;
                                bytes.drain(..cut);
                                out.truncated = true;
                            }
                        }
                    }
                }
                let behind = offset & !0xfff;
                if behind >= freed + (1 << 20) {
                    free_blocks(&file, behind);
                    freed = behind;
                }
                if last {
                    break;
                }
                // `finish` wakes it at once.
                std::thread::park_timeout(poll::OUTPUT_READ);
            }
            if bytes.len() > Captured::CAP {
                let cut = bytes.len() - Captured::CAP;
                bytes.drain(..cut);
                out.truncated = true;
            }
            out.text = String::from_utf8_lossy(&bytes).into_owned();
            out
        });
        Reader { done, thread }
    }

    /// Everything the target wrote, once it has been reaped.
    fn finish(self) -> Captured {
        self.done.store(true, Ordering::Release);
        self.thread.thread().unpark();
        self.thread.join().unwrap_or_default()
    }
}

/// Gives the blocks of `file` before `end` back to the file system (the
/// file keeps its size; reading there gives zeros). File systems that
/// cannot punch holes keep them.
fn free_blocks(file: &File, end: u64) {
    use nix::fcntl::{FallocateFlags, fallocate};
    let flags = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
    let _ = fallocate(file, flags, 0, end as libc::off_t);
}

impl Spawned {
    /// Lets the child exec the target. Returns once the exec has happened
    /// (or failed).
    pub fn release(&mut self) -> Result<(), RunError> {
        let go = self.go.take().expect("released twice");
        let spawn_err = |reason: String| RunError::Spawn {
            path: PathBuf::from(format!("pid {}", self.pid)),
            reason,
        };
        // The clock starts before the child may exec: the run's wall time
        // then covers everything the kernel dates from the exec on, even
        // when the agent is preempted between the write and its next step.
        self.started = Some(Instant::now());
        let mut file = File::from(go);
        std::io::Write::write_all(&mut file, &[1]).map_err(|e| spawn_err(e.to_string()))?;
        drop(file);
        let mut errno = [0u8; 4];
        let mut reader =
            File::from(self.exec_error.try_clone().map_err(|e| spawn_err(e.to_string()))?);
        match reader.read(&mut errno) {
            Ok(4) => Err(spawn_err(
                std::io::Error::from_raw_os_error(i32::from_ne_bytes(errno)).to_string(),
            )),
            _ => Ok(()),
        }
    }

    /// When the clock of the run started: just before the child was let
    /// exec (now, for a child not yet released).
    pub fn started(&self) -> Instant {
        self.started.unwrap_or_else(Instant::now)
    }

    /// Waits for the target to exit, killing its process group when
    /// `timeout` passes, when it hangs (every thread waiting for another
    /// for longer than `hang_after`, when given: [`HangCheck`]) or when
    /// `cancel` is set.
    pub fn wait(
        mut self,
        timeout: Duration,
        hang_after: Option<Duration>,
        cancel: &AtomicBool,
    ) -> Result<Exit, RunError> {
        let started = self.started.unwrap_or_else(Instant::now);
        let pid = Pid::from_raw(self.pid as i32);
        let mut timed_out = false;
        let mut hangs = hang_after.map(HangCheck::new);
        let mut hung = None;
        let status = loop {
            match nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG)) {
                Ok(nix::sys::wait::WaitStatus::StillAlive) => {}
                Ok(status) => break status,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    return Err(RunError::Spawn {
                        path: PathBuf::from(format!("pid {pid}")),
                        reason: e.to_string(),
                    });
                }
            }
            let over = started.elapsed() >= timeout;
            if hung.is_none()
                && !timed_out
                && let Some(h) = hangs.as_mut().and_then(|w| w.look(self.pid))
            {
                hung = Some(h);
                kill_group(self.pid);
            }
            if over || cancel.load(Ordering::Relaxed) {
                timed_out |= over && hung.is_none();
                kill_group(self.pid);
            }
            std::thread::sleep(poll::RUN_EXIT);
        };
        let wall_ns = started.elapsed().as_nanos() as u64;
        let mut exit = self.finish(status);
        exit.timed_out = timed_out;
        exit.hung = hung;
        exit.wall_ns = wall_ns;
        Ok(exit)
    }

    /// Collects output once the process has been reaped elsewhere (the
    /// ptrace controller reaps intervened runs).
    pub fn finish(&mut self, status: nix::sys::wait::WaitStatus) -> Exit {
        use nix::sys::wait::WaitStatus;
        let (code, signal) = match status {
            WaitStatus::Exited(_, c) => (Some(c), None),
            WaitStatus::Signaled(_, s, _) => (None, Some(s as i32)),
            _ => (None, None),
        };
        // Read to the end of the files, whoever still holds them (a daemon
        // the target left behind writes on, unread).
        let read = |r: Option<Reader>| r.map(Reader::finish).unwrap_or_default();
        Exit {
            code,
            signal,
            timed_out: false,
            hung: None,
            wall_ns: self.started.map_or(0, |s| s.elapsed().as_nanos() as u64),
            stdout: read(self.stdout.take()),
            stderr: read(self.stderr.take()),
        }
    }
}

impl Drop for Spawned {
    /// A target that was never released is not left waiting; the output
    /// readers of one that was never finished stop.
    fn drop(&mut self) {
        if self.go.is_some() {
            kill_group(self.pid);
            let _ = nix::sys::wait::waitpid(Pid::from_raw(self.pid as i32), None);
        }
        for reader in [self.stdout.take(), self.stderr.take()].into_iter().flatten() {
            reader.finish();
        }
    }
}

/// Kills the target's process group (it made one of its own before
/// exec), and the target itself should it have left the group.
pub fn kill_group(pid: u32) {
    let pid = Pid::from_raw(pid as i32);
    // Either may already be gone; nothing to do then.
    let _ = signal::killpg(pid, Signal::SIGKILL);
    let _ = signal::kill(pid, Signal::SIGKILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `pid`'s signal mask blocks every signal a program may
    /// (all but SIGKILL, SIGSTOP and the two the C library keeps, 32, 33).
    fn blocks_all(pid: u32) -> bool {
        const ALL: u64 = 0xffff_fffe_7ffb_feff;
        let status = procfs::process::Process::new(pid as i32).and_then(|p| p.status());
        status.is_ok_and(|s| s.sigblk & ALL == ALL)
    }

    /// Signals sent to a held target before its exec (`pkill -f` and
    /// `killall aid-agent` match it: it still bears the agent's name)
    /// neither end it nor reach the program it becomes; the program runs
    /// and exits as it would have.
    #[test]
    fn signals_for_the_agent_sent_before_the_exec_are_dropped() {
        let argv: Vec<OsString> = ["sh", "-c", "sleep 0.1; exit 3"].map(OsString::from).to_vec();
        let target = Target { program: PathBuf::from("/bin/sh"), argv, output_dir: None };
        let mut child = spawn_held(&target).unwrap();
        let pid = Pid::from_raw(child.pid as i32);
        assert!(blocks_all(child.pid), "born with every signal blocked");
        for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGUSR1] {
            signal::kill(pid, sig).unwrap();
        }
        child.release().unwrap();
        let exit = child.wait(Duration::from_secs(10), None, &AtomicBool::new(false)).unwrap();
        assert_eq!((exit.code, exit.signal), (Some(3), None));
    }
}
