//! Hardware watchpoints from the agent's side: opening the perf breakpoint
//! events (a write one and a read-or-write one per address and thread,
//! with aid's watch programs attached), the delay after an access, and
//! draining the hits. Which addresses, when, and what the hits mean is
//! `record::watchpoints`'s business.

use aid_common::{
    MAP_ROLES, MAP_WATCH_CONFIG, MAP_WATCH_HITS, MAP_WATCH_LOST, WatchConfig, WatchHit,
};
use aya::{
    maps::{Array, HashMap as BpfHashMap, RingBuf},
    programs::{
        PerfEvent,
        perf_event::{
            BreakpointConfig, PerfBreakpointLength, PerfBreakpointType, PerfEventConfig,
            PerfEventLink, PerfEventScope, SamplePolicy,
        },
    },
};

use super::{
    ProbeError, Probes,
    maps::{map, map_err, take_counter},
    program,
};
use crate::util::error_chain;

/// The two programs, by the breakpoint kind they serve.
const PROGRAMS: [(&str, PerfBreakpointType); 2] = [
    ("watch_write", PerfBreakpointType::Write),
    ("watch_read_write", PerfBreakpointType::ReadWrite),
];

/// Why an address could not be watched on a thread.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(
        "a hardware watchpoint covers 1, 2, 4 or 8 bytes aligned to its size: {len} bytes at {addr:#x} cannot be watched"
    )]
    Shape { addr: u64, len: u64 },
    #[error("thread {tid}: {reason}")]
    Open { tid: u32, reason: String },
    #[error(transparent)]
    Probe(#[from] ProbeError),
}

/// The breakpoints of one address on one thread (and on the threads it
/// creates afterwards, which inherit them). Dropping it removes them all.
pub struct Breakpoints {
    _links: Vec<PerfEventLink>,
}

impl Probes {
    /// Loads the watch programs (once): before a run, so that the first
    /// arming does not wait for the verifier while it holds a thread.
    pub fn load_watch_programs(&mut self) -> Result<(), ProbeError> {
        for (name, _) in PROGRAMS {
            let prog: &mut PerfEvent = program(&mut self.ebpf, name)?;
            if prog.fd().is_err() {
                prog.load().map_err(|source| ProbeError::Load { program: name, source })?;
            }
        }
        Ok(())
    }

    /// Watches `len` bytes at `addr` on thread `tid` and on every thread it
    /// creates from now on. Uses two of the thread's four debug registers.
    pub fn watch_address(
        &mut self,
        tid: u32,
        addr: u64,
        len: u64,
    ) -> Result<Breakpoints, WatchError> {
        let length = match len {
            1 => PerfBreakpointLength::Len1,
            2 => PerfBreakpointLength::Len2,
            4 => PerfBreakpointLength::Len4,
            8 => PerfBreakpointLength::Len8,
            _ => return Err(WatchError::Shape { addr, len }),
        };
        if !addr.is_multiple_of(len) {
            return Err(WatchError::Shape { addr, len });
        }
        self.load_watch_programs()?;
        let mut links = Vec::new();
        for (name, kind) in PROGRAMS {
            let prog: &mut PerfEvent = program(&mut self.ebpf, name)?;
            let config = PerfEventConfig::Breakpoint(BreakpointConfig::Data {
                r#type: kind,
                address: addr,
                length,
            });
            let scope = PerfEventScope::OneProcess { pid: tid, cpu: None };
            let id = prog
                .attach(config, scope, SamplePolicy::Period(1), true)
                .map_err(|e| WatchError::Open { tid, reason: error_chain(&e) })?;
            let link = prog
                .take_link(id)
                .map_err(|e| WatchError::Open { tid, reason: error_chain(&e) })?;
            links.push(link);
        }
        Ok(Breakpoints { _links: links })
    }

    /// Sets what the watch programs do besides recording: the delay after
    /// an access (for the run about to start).
    pub fn set_watch_config(&mut self, config: WatchConfig) -> Result<(), ProbeError> {
        let mut slot: Array<_, WatchConfig> = map(&mut self.ebpf, MAP_WATCH_CONFIG)?;
        slot.set(0, config, 0).map_err(|e| map_err(MAP_WATCH_CONFIG, e))
    }

    /// Every hit reported so far, and how many were dropped because the
    /// buffer was full.
    pub fn take_watch_hits(&mut self) -> Result<(Vec<WatchHit>, u64), ProbeError> {
        let mut hits = Vec::new();
        {
            let mut ring: RingBuf<_> = map(&mut self.ebpf, MAP_WATCH_HITS)?;
            while let Some(item) = ring.next() {
                if item.len() >= size_of::<WatchHit>() {
                    // SAFETY: the kernel wrote a whole `WatchHit`; read it
                    // unaligned.
                    hits.push(unsafe {
                        std::ptr::read_unaligned(item.as_ptr().cast::<WatchHit>())
                    });
                }
            }
        }
        let lost = take_counter(&mut self.ebpf, MAP_WATCH_LOST, 0)?;
        Ok((hits, lost))
    }

    /// The thread of the current target that has role `role`, if any.
    pub fn thread_of_role(&self, role: u32) -> Option<u32> {
        let roles: BpfHashMap<_, u32, u32> =
            BpfHashMap::try_from(self.ebpf.map(MAP_ROLES)?).ok()?;
        roles.iter().filter_map(Result::ok).find(|(_, r)| *r == role).map(|(tid, _)| tid)
    }
}
