//! The event stream: the reader thread that drains the ring buffer (and
//! the programs' log ring) and hands events over in batches, with the
//! backlog cap of live sessions.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
        mpsc,
    },
    thread::JoinHandle,
    time::Duration,
};

use aid_common::Event;
use aya::maps::{MapData, RingBuf};
use tokio::io::{Interest, unix::AsyncFd};

use crate::{bpf::probe_log::Logger, sys::poll};

enum Control {
    /// Drain everything committed so far, then acknowledge.
    Flush(mpsc::SyncSender<()>),
    Stop,
}

/// Events the reader may hold that the consumer has not taken yet in a
/// live session ([`EventStream::set_backlog_cap`]): 262,144 events of 80
/// bytes, 20 MiB. A look takes them every 50 ms; at the 32,000 events a
/// second of BENCHMARKS.md's busy service that is 1,600 a look, so the cap
/// is only reached when the consumer stalls for seconds (a slow disk
/// under the session writer). Then the kernel's ring (64 MiB by default,
/// about 800,000 more events) fills behind it, and what it cannot hold
/// is counted lost by the kernel, never dropped here.
pub const LIVE_BACKLOG: usize = 1 << 18;

/// Events a program run may hold in memory ([`EventStream::set_backlog_cap`]):
/// 4,194,304 events of 80 bytes, 320 MiB. Its events are taken only when
/// it ends, so without a cap a run that makes millions of traced calls a
/// second holds all of them: qsort_mt of the corpus run with no arguments
/// (ten million elements, 1.4 s untraced) had the default set's counting
/// run (an entry probe on each of its functions, up to 60 s) take 24 GB
/// before the kernel's OOM killer ended the agent (2026-12-01). At the
/// cap the rest stays in the kernel's ring, and what the ring cannot hold
/// is counted lost: the run is incomplete (the census then leaves out the
/// functions already too hot and counts again without them).
pub const PROGRAM_BACKLOG: usize = 1 << 22;

/// The events drained but not yet taken, and the cap on them: the reader
/// drains at most [`Backlog::room`] events, and waits on `taken` while
/// there is none.
struct Backlog {
    queued: AtomicUsize,
    /// `usize::MAX`: no cap.
    cap: AtomicUsize,
    taken: tokio::sync::Notify,
}

impl Backlog {
    fn new() -> Backlog {
        Backlog {
            queued: AtomicUsize::new(0),
            cap: AtomicUsize::new(usize::MAX),
            taken: tokio::sync::Notify::new(),
        }
    }

    /// How many more events the reader may drain now.
    fn room(&self) -> usize {
        self.cap.load(Ordering::Acquire).saturating_sub(self.queued.load(Ordering::Acquire))
    }

    fn added(&self, n: usize) {
        self.queued.fetch_add(n, Ordering::AcqRel);
    }

    /// The consumer took `n` events: a reader waiting for room is woken
    /// (a permit is kept if it is not waiting yet, so no wake-up is lost).
    fn took(&self, n: usize) {
        if n > 0 {
            self.queued.fetch_sub(n, Ordering::AcqRel);
            self.taken.notify_one();
        }
    }

    fn set_cap(&self, cap: Option<usize>) {
        self.cap.store(cap.unwrap_or(usize::MAX), Ordering::Release);
        self.taken.notify_one();
    }
}

/// A thread ("aid-events") that drains the ring buffer continuously, so the
/// kernel side rarely finds it full, and hands events over in batches. It
/// runs a current-thread tokio runtime: one `select!` waits for the ring
/// and the programs' log ring (aya-log, a record only when a probe body
/// failed) to become readable (`AsyncFd`, epoll), for a request (flush,
/// stop), and — at the backlog cap — for the consumer to take events.
/// After each drain of the ring it rests [`poll::EVENT_STREAM`] so that
/// events come in batches and the kernel wakes it at most once per rest;
/// idle, it waits without a timer.
pub struct EventStream {
    batches: mpsc::Receiver<Vec<Event>>,
    control: tokio::sync::mpsc::UnboundedSender<Control>,
    backlog: Arc<Backlog>,
    thread: Option<JoinHandle<()>>,
}

impl EventStream {
    pub(super) fn spawn(ring: RingBuf<MapData>, logger: Logger) -> EventStream {
        let (batch_tx, batches) = mpsc::channel();
        let (control, control_rx) = tokio::sync::mpsc::unbounded_channel();
        let backlog = Arc::new(Backlog::new());
        let reader = Reader { batches: batch_tx, backlog: Arc::clone(&backlog) };
        let thread = std::thread::Builder::new()
            .name("aid-events".into())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .enable_time()
                    .build()
                {
                    Ok(rt) => rt.block_on(reader.run(ring, logger, control_rx)),
                    Err(e) => log::error!(
                        "the event reader cannot wait on the ring ({e}): no event will be read"
                    ),
                }
            })
            .expect("spawn event reader");
        EventStream { batches, control, backlog, thread: Some(thread) }
    }

    /// Every event committed to the ring buffer before this call (the cap
    /// does not apply: everything committed is drained).
    pub fn flush(&self) -> Vec<Event> {
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        if self.control.send(Control::Flush(ack_tx)).is_ok() {
            let _ = ack_rx.recv_timeout(Duration::from_secs(10));
        }
        self.try_take()
    }

    /// Whatever has been drained so far, without waiting.
    pub fn try_take(&self) -> Vec<Event> {
        let mut out = Vec::new();
        while let Ok(mut batch) = self.batches.try_recv() {
            out.append(&mut batch);
        }
        self.backlog.took(out.len());
        out
    }

    /// Caps the events drained and not yet taken (`None`: no cap). Live
    /// sessions cap them ([`LIVE_BACKLOG`]): at the cap the reader leaves
    /// events in the kernel's ring until some are taken, so a consumer
    /// that falls behind costs events the kernel counts as lost, not
    /// memory. Program runs are taken only at their end: they are capped
    /// at [`PROGRAM_BACKLOG`], far beyond what a traced set within its
    /// budget makes.
    pub fn set_backlog_cap(&self, cap: Option<usize>) {
        self.backlog.set_cap(cap);
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        let _ = self.control.send(Control::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reader's side of an [`EventStream`].
struct Reader {
    batches: mpsc::Sender<Vec<Event>>,
    backlog: Arc<Backlog>,
}

impl Reader {
    async fn run(
        self,
        ring: RingBuf<MapData>,
        logger: Logger,
        mut control: tokio::sync::mpsc::UnboundedReceiver<Control>,
    ) {
        // SAFETY: the ring and the logger own their descriptors (aya's map
        // data and the log ring's buffer), and each is owned by its
        // `AsyncFd` until it is dropped: the descriptor stays open and the
        // same for the `AsyncFd`'s whole life.
        let registered = unsafe {
            (
                AsyncFd::register_with_interest(ring, Interest::READABLE),
                AsyncFd::register_with_interest(logger, Interest::READABLE),
            )
        };
        let (Ok(mut ring), Ok(mut logger)) = registered else {
            log::error!("the event reader cannot wait on the ring (epoll): no event will be read");
            return;
        };
        // After a drain the ring is left alone for EVENT_STREAM: events
        // gather, and the kernel sends no wake-up while the reader has not
        // caught up (the programs submit with adaptive wake-ups).
        let resting = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(resting);
        let mut rested = true;
        loop {
            let room = self.backlog.room();
            tokio::select! {
                biased;
                request = control.recv() => match request {
                    Some(Control::Flush(ack)) => {
                        logger.get_mut().flush();
                        if !self.send(drain(ring.get_mut(), usize::MAX)) {
                            return;
                        }
                        let _ = ack.send(());
                    }
                    Some(Control::Stop) | None => return,
                },
                ready = logger.readable_mut() => {
                    let Ok(mut ready) = ready else { return };
                    ready.clear_ready();
                    ready.get_inner_mut().flush();
                }
                () = &mut resting, if !rested => rested = true,
                ready = ring.readable_mut(), if room > 0 && rested => {
                    let Ok(mut ready) = ready else { return };
                    rested = false;
                    resting.as_mut().reset(tokio::time::Instant::now() + poll::EVENT_STREAM);
                    let batch = drain(ready.get_inner_mut(), room);
                    let emptied = batch.len() < room;
                    if !self.send(batch) {
                        return;
                    }
                    if emptied {
                        // Edge-triggered: readiness is cleared only once the
                        // ring was seen empty; an event committed since then
                        // raises a new edge, and the drain below takes any
                        // that came before the clear.
                        ready.clear_ready();
                        let room = self.backlog.room();
                        if !self.send(drain(ready.get_inner_mut(), room)) {
                            return;
                        }
                    }
                }
                () = self.backlog.taken.notified(), if room == 0 => {}
            }
        }
    }

    /// Hands a batch over; false when the consumer is gone.
    fn send(&self, batch: Vec<Event>) -> bool {
        if batch.is_empty() {
            return true;
        }
        self.backlog.added(batch.len());
        self.batches.send(batch).is_ok()
    }
}

/// Up to `limit` events from the ring, oldest first.
fn drain(ring: &mut RingBuf<MapData>, limit: usize) -> Vec<Event> {
    let mut out = Vec::new();
    while out.len() < limit {
        let Some(item) = ring.next() else { break };
        if item.len() >= size_of::<Event>() {
            // SAFETY: the kernel wrote a whole `Event`; read it unaligned.
            out.push(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<Event>()) });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a cap the reader drains everything; with one it drains
    /// only up to the cap, and again as the consumer takes.
    #[test]
    fn the_backlog_cap_bounds_events_not_yet_taken() {
        let b = Backlog::new();
        b.added(5_000_000);
        assert_eq!(b.room(), usize::MAX - 5_000_000);
        b.set_cap(Some(10));
        assert_eq!(b.room(), 0, "over the cap: nothing more is drained");
        b.took(4_999_995);
        assert_eq!(b.room(), 5);
        b.added(5);
        assert_eq!(b.room(), 0);
        b.took(3);
        assert_eq!(b.room(), 3);
        b.set_cap(None);
        assert_eq!(b.room(), usize::MAX - 7);
    }

    /// A reader at the cap is woken when the consumer takes, also when
    /// the take came before the reader began to wait; taking nothing
    /// wakes nobody.
    #[test]
    fn a_take_wakes_the_reader_waiting_at_the_cap() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let b = Arc::new(Backlog::new());
        b.set_cap(Some(2));
        b.added(2);
        // The permit set_cap left.
        rt.block_on(b.taken.notified());
        b.took(0);
        let woken = rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(50), b.taken.notified()).await
        });
        assert!(woken.is_err(), "an empty take woke the reader");
        b.took(1);
        rt.block_on(b.taken.notified());
        assert_eq!(b.room(), 1);
        b.added(1);
        let taker = {
            let b = Arc::clone(&b);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                b.took(2);
            })
        };
        let woken = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), b.taken.notified()).await
        });
        taker.join().unwrap();
        assert!(woken.is_ok());
        assert_eq!(b.room(), 2);
    }
}
