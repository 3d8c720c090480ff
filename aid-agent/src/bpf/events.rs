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

/// Events the reader may hold that the consumer has not recorded yet in a
/// live session ([`EventStream::set_backlog_cap`]): 262,144 events of 80
/// bytes, 20 MiB. The consumer takes them a step at a time
/// ([`EventStream::take_upto`]) and what it has not taken stays counted:
/// when a look took the whole backlog at once, the reader drained as much
/// again behind it, and an attach on the busy service with the consumer
/// behind reached 94.2 MiB of anonymous memory (40.8 MiB since, BENCHMARKS.md
/// "Live sessions"). A look takes them every 50 ms; at the 32,000 events a
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
        self.take_upto(usize::MAX)
    }

    /// Batches drained so far, oldest first, until at least `limit` events
    /// or none is left, without waiting: at most `limit - 1 +`
    /// `STREAM_BATCH` events. What is left stays counted in the backlog,
    /// so the reader drains no more while the consumer works through them.
    pub fn take_upto(&self, limit: usize) -> Vec<Event> {
        let mut out = Vec::with_capacity(self.queued().min(limit.saturating_add(STREAM_BATCH)));
        while out.len() < limit {
            let Ok(mut batch) = self.batches.try_recv() else { break };
            out.append(&mut batch);
        }
        self.backlog.took(out.len());
        out
    }

    /// Events drained and not yet taken.
    pub fn queued(&self) -> usize {
        self.backlog.queued.load(Ordering::Acquire)
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
                    let drained = drain(ready.get_inner_mut(), room);
                    let emptied = drained.count < room;
                    if !self.send(drained) {
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

    /// Hands a drain's batches over; false when the consumer is gone.
    fn send(&self, drained: Drained) -> bool {
        for batch in drained.batches {
            self.backlog.added(batch.len());
            if self.batches.send(batch).is_err() {
                return false;
            }
        }
        true
    }
}

/// Events a batch handed over holds at most: a consumer taking a step of
/// events ([`EventStream::take_upto`]) holds at most one batch more than
/// the step, whatever the backlog.
pub const STREAM_BATCH: usize = 4_096;

/// Events read from the ring in one drain, in batches of [`STREAM_BATCH`].
struct Drained {
    batches: Vec<Vec<Event>>,
    count: usize,
}

/// Up to `limit` events from the ring, oldest first.
fn drain(ring: &mut RingBuf<MapData>, limit: usize) -> Drained {
    let mut drained = Drained { batches: Vec::new(), count: 0 };
    let mut batch = Vec::new();
    while drained.count < limit {
        let Some(item) = ring.next() else { break };
        if item.len() >= size_of::<Event>() {
            if batch.len() == STREAM_BATCH {
                drained.batches.push(std::mem::take(&mut batch));
            }
            // SAFETY: the kernel wrote a whole `Event`; read it unaligned.
            batch.push(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<Event>()) });
            drained.count += 1;
        }
    }
    if !batch.is_empty() {
        drained.batches.push(batch);
    }
    drained
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

    /// A step takes whole batches until its limit, oldest first; what it
    /// leaves stays counted in the backlog (the reader drains no more
    /// for it) and comes in the next step; `try_take` takes the rest.
    #[test]
    fn a_step_takes_batches_up_to_its_limit_and_leaves_the_rest_counted() {
        let (tx, batches) = mpsc::channel();
        let (control, _control) = tokio::sync::mpsc::unbounded_channel();
        let backlog = Arc::new(Backlog::new());
        backlog.set_cap(Some(10_000));
        let reader = Reader { batches: tx, backlog: Arc::clone(&backlog) };
        let stream = EventStream { batches, control, backlog, thread: None };
        let batch = |from: u64, n: u64| -> Vec<Event> {
            (from..from + n).map(|ts_ns| Event { ts_ns, ..Event::default() }).collect()
        };
        let drained = Drained { batches: vec![batch(0, 3), batch(3, 3), batch(6, 4)], count: 10 };
        assert!(reader.send(drained));
        assert_eq!((stream.queued(), reader.backlog.room()), (10, 9_990));
        let ts = |events: Vec<Event>| events.iter().map(|e| e.ts_ns).collect::<Vec<_>>();
        assert_eq!(ts(stream.take_upto(4)), [0, 1, 2, 3, 4, 5]);
        assert_eq!((stream.queued(), reader.backlog.room()), (4, 9_996));
        assert_eq!(ts(stream.take_upto(1)), [6, 7, 8, 9]);
        assert!(stream.take_upto(1).is_empty());
        assert!(reader.send(Drained { batches: vec![batch(10, 2), batch(12, 1)], count: 3 }));
        assert_eq!(ts(stream.try_take()), [10, 11, 12]);
        assert_eq!(stream.queued(), 0);
    }
}
