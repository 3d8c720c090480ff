//! Probes that exist only in one process: how they are made (uprobe_multi
//! links with a pid filter, or pid-scoped perf-event uprobes where the
//! kernel has no uprobe_multi), and how they are removed without making
//! the next run wait for the kernel's grace periods.

use std::{path::Path, sync::mpsc, thread::JoinHandle, time::Instant};

use aya::{
    Ebpf,
    programs::{
        UProbe,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeLink, UProbeScope},
    },
};

use crate::{
    bpf::uprobe_multi::{self, Links, MultiProgram},
    model::Function,
};

/// How probes are scoped to one process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Mechanism {
    /// uprobe_multi links where the kernel has them (≥ 6.6), else perf
    /// events.
    #[default]
    Auto,
    /// One uprobe_multi link per module and direction, with a pid filter.
    UprobeMulti,
    /// One perf-event uprobe per function and direction, opened for the
    /// pid (what aya does with `UProbeScope::OneProcess`).
    PerfEvents,
}

/// Probes attached to one process; dropping it detaches them (and waits
/// for the kernel to finish).
pub enum Attachment {
    Multi(Links),
    Perf(Vec<UProbeLink>),
}

impl Attachment {
    /// Attaches `enter`/`exit` (names of uprobe programs of `ebpf`) to every
    /// function, in `pid` only, with perf events, in [`super::attach_order`].
    pub fn perf_events(
        ebpf: &mut Ebpf,
        functions: &[Function],
        pid: u32,
        enter: &str,
        exit: &str,
    ) -> Result<Attachment, (String, aya::programs::ProgramError)> {
        let scope = UProbeScope::OneProcess(std::num::NonZeroU32::new(pid).expect("pid 0"));
        let mut links = Vec::with_capacity(2 * functions.len());
        for (f, ret) in super::attach_order(functions) {
            let name = if ret { exit } else { enter };
            let what = || format!("{name} probe to {} in {}", f.name, f.module.display());
            let prog: &mut UProbe = ebpf
                .program_mut(name)
                .and_then(|p| p.try_into().ok())
                .ok_or_else(|| (what(), aya::programs::ProgramError::NotLoaded))?;
            let point = UProbeAttachPoint {
                location: UProbeAttachLocation::AbsoluteOffset(f.offset),
                cookie: Some(super::cookie(f)),
            };
            let id = prog.attach(point, Path::new(&f.module), scope).map_err(|e| (what(), e))?;
            links.push(prog.take_link(id).map_err(|e| (what(), e))?);
        }
        Ok(Attachment::Perf(links))
    }

    /// Attaches `enter`/`exit` to every function, in `pid` only, with one
    /// uprobe_multi link per module and direction.
    pub fn multi(
        enter: &MultiProgram,
        exit: &MultiProgram,
        functions: &[Function],
        pid: u32,
    ) -> Result<Attachment, uprobe_multi::MultiError> {
        Links::attach(enter, exit, functions, pid).map(Attachment::Multi)
    }

    /// Detaches now; returns when the kernel is done.
    pub fn detach(self) {
        detach_all(vec![self]);
    }
}

/// Detaches every attachment, closing uprobe_multi links on parallel
/// threads so that their grace periods overlap instead of adding up.
/// (Perf-event uprobes are removed one after the other: aya's links share
/// the program, and each removal waits for its own grace period anyway.)
fn detach_all(attachments: Vec<Attachment>) {
    let mut links = Links::default();
    for attachment in attachments {
        match attachment {
            Attachment::Multi(l) => links.extend(l),
            Attachment::Perf(perf) => drop(perf),
        }
    }
    uprobe_multi::close_in_parallel(links);
}

/// Runs whose probes are removed together.
const BATCH: usize = 8;

/// Detaches attachments on a thread of its own: the kernel makes the
/// closing thread wait for a grace period, which the next run need not
/// wait for. A process that has exited has no breakpoints left to hit, so
/// nothing fires in the meantime.
///
/// Attachments are handed to the thread [`BATCH`] at a time, always just
/// after a run ended: a batch's links close in parallel and cost about one
/// grace period however many runs it holds, and every unregistration also
/// makes the kernel's uprobe registration and fork paths wait for RCU grace
/// periods, which the next runs would otherwise meet one at a time
/// (BENCHMARKS.md). Handing them over between runs keeps the unregistering
/// itself (which briefly takes the lock of every address space mapping the
/// file, the running target's included) out of the middle of a run. A
/// link whose target has exited matches no address space: it holds no
/// breakpoint while it waits.
pub struct Reaper {
    queue: Option<mpsc::Sender<Vec<Attachment>>>,
    pending: Vec<Attachment>,
    thread: Option<JoinHandle<()>>,
}

impl Default for Reaper {
    fn default() -> Self {
        Reaper::new()
    }
}

impl Reaper {
    pub fn new() -> Reaper {
        let (queue, rx) = mpsc::channel::<Vec<Attachment>>();
        let thread = std::thread::Builder::new()
            .name("aid-detach".into())
            .spawn(move || {
                // Everything handed over meanwhile goes in one batch, so
                // the backlog never grows beyond one batch.
                while let Ok(mut batch) = rx.recv() {
                    for more in rx.try_iter() {
                        batch.extend(more);
                    }
                    let (n, started) = (batch.len(), Instant::now());
                    detach_all(batch);
                    log::info!(
                        "background: closed {n} probe attachment(s) in {:.3} ms",
                        started.elapsed().as_secs_f64() * 1e3
                    );
                }
            })
            .expect("spawn the detach thread");
        Reaper { queue: Some(queue), pending: Vec::new(), thread: Some(thread) }
    }

    /// Detaches `attachment` in the background, with the next batch.
    pub fn detach(&mut self, attachment: Attachment) {
        self.pending.push(attachment);
        if self.pending.len() >= BATCH {
            self.hand_over();
        }
    }

    /// Detaches `attachment` in the background now (with whatever else is
    /// pending).
    pub fn detach_soon(&mut self, attachment: Attachment) {
        self.pending.push(attachment);
        self.hand_over();
    }

    fn hand_over(&mut self) {
        let batch = std::mem::take(&mut self.pending);
        if batch.is_empty() {
            return;
        }
        match &self.queue {
            Some(q) => {
                if let Err(mpsc::SendError(batch)) = q.send(batch) {
                    detach_all(batch);
                }
            }
            None => detach_all(batch),
        }
    }

    /// Detaches everything handed over so far, and waits until it is done.
    pub fn wait(&mut self) {
        self.stop();
        *self = Reaper::new();
    }

    fn stop(&mut self) {
        self.hand_over();
        drop(self.queue.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.stop();
    }
}
