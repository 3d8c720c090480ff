//! What the agent reads and writes in the programs' maps: the target and
//! its threads' roles, actions and the sites the kernel stamps, serialised
//! groups, replays, and the lost-event and error counters.

use aid_common::{
    Action, ActionKind, CallKey, CallStack, EntryRegs, GroupMember, GroupSlot, HELD_MARK, LostSlot,
    MAP_ACTIONS, MAP_CALLS, MAP_ENTRY_REGS, MAP_ERRORS, MAP_GROUPS, MAP_LIVE_UNIT, MAP_LOST,
    MAP_OPEN_MEMBERS, MAP_PENDING, MAP_REPLAY, MAP_ROLE_POOL, MAP_ROLES, MAP_RUNNING, MAP_SHADOW,
    MAP_STAMPS, MAP_SYNC_STEPS, MAP_TARGET, MAP_UNIT_STATE, OpenMember, Pending, ProbeErrorKind,
    Replay, RunningKey, ShadowStack, SiteKey, TargetFlags, TargetState, UNITS_IN_FLIGHT, UnitState,
};
use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, PerCpuArray, Queue},
};

use crate::{
    bpf::{MAX_ROLES, ProbeError, Probes},
    util::error_chain,
};

impl Probes {
    pub(super) fn set_target(&mut self, state: TargetState) -> Result<(), ProbeError> {
        let mut target: aya::maps::Array<_, TargetState> = map(&mut self.ebpf, MAP_TARGET)?;
        target.set(0, state, 0).map_err(|e| map_err(MAP_TARGET, e))
    }

    pub(super) fn target(&self) -> Result<TargetState, ProbeError> {
        let m = self
            .ebpf
            .map(MAP_TARGET)
            .ok_or(ProbeError::Map { name: MAP_TARGET, reason: "missing".into() })?;
        let target: aya::maps::Array<_, TargetState> = aya::maps::Array::try_from(m)
            .map_err(|e| ProbeError::Map { name: MAP_TARGET, reason: e.to_string() })?;
        target.get(&0, 0).map_err(|e| map_err(MAP_TARGET, e))
    }

    /// Turns interventions on or off for the live target.
    pub fn set_intervene(&mut self, intervene: bool) -> Result<(), ProbeError> {
        let mut state = self.target()?;
        state.flags = if intervene {
            state.flags.with(TargetFlags::INTERVENE)
        } else {
            state.flags.without(TargetFlags::INTERVENE)
        };
        self.set_target(state)
    }

    /// Registers a process that is already running (attach mode): `tids`
    /// are its threads in creation order, the main thread first; they take
    /// roles 0, 1, ... and threads it creates later continue the sequence.
    pub fn begin_running_target(
        &mut self,
        pid: u32,
        tids: &[u32],
        intervene: bool,
    ) -> Result<(), ProbeError> {
        self.clear_run_state()?;
        self.adopt_threads(tids)?;
        let mut flags = if intervene {
            TargetFlags::LIVE.with(TargetFlags::INTERVENE)
        } else {
            TargetFlags::LIVE
        };
        if self.repair_unwind {
            flags = flags.with(TargetFlags::REPAIR_UNWIND);
        }
        self.set_target(TargetState { tgid: pid, _pad: 0, flags })?;
        if let Some((owner, functions, programs)) = self.deferred.take() {
            if owner == pid {
                let attachment = self.attach_scoped(&functions, pid, programs)?;
                self.scoped = Some((pid, attachment));
            } else {
                self.deferred = Some((owner, functions, programs));
            }
        }
        Ok(())
    }

    fn adopt_threads(&mut self, tids: &[u32]) -> Result<(), ProbeError> {
        let mut pool: Queue<_, u32> = map(&mut self.ebpf, MAP_ROLE_POOL)?;
        while pool.pop(0).is_ok() {}
        let existing = tids.len() as u32;
        for role in existing..existing + MAX_ROLES {
            pool.push(role, 0).map_err(|e| map_err(MAP_ROLE_POOL, e))?;
        }
        let mut roles: BpfHashMap<_, u32, u32> = map(&mut self.ebpf, MAP_ROLES)?;
        for (role, tid) in tids.iter().enumerate() {
            roles.insert(*tid, role as u32, 0).map_err(|e| map_err(MAP_ROLES, e))?;
        }
        Ok(())
    }

    /// Forgets everything about previous targets and interventions.
    pub fn clear_run_state(&mut self) -> Result<(), ProbeError> {
        self.set_target(TargetState::default())?;
        clear::<u32, u32>(&mut self.ebpf, MAP_ROLES)?;
        clear::<CallKey, CallStack>(&mut self.ebpf, MAP_CALLS)?;
        clear::<SiteKey, Action>(&mut self.ebpf, MAP_ACTIONS)?;
        clear::<SiteKey, u64>(&mut self.ebpf, MAP_STAMPS)?;
        clear::<u32, Pending>(&mut self.ebpf, MAP_PENDING)?;
        clear::<u32, UnitState>(&mut self.ebpf, MAP_UNIT_STATE)?;
        clear::<u32, Replay>(&mut self.ebpf, MAP_REPLAY)?;
        clear::<CallKey, EntryRegs>(&mut self.ebpf, MAP_ENTRY_REGS)?;
        clear::<GroupMember, GroupSlot>(&mut self.ebpf, MAP_GROUPS)?;
        clear::<RunningKey, u64>(&mut self.ebpf, MAP_RUNNING)?;
        clear::<OpenMember, RunningKey>(&mut self.ebpf, MAP_OPEN_MEMBERS)?;
        clear::<u32, u32>(&mut self.ebpf, MAP_SYNC_STEPS)?;
        clear::<u32, ShadowStack>(&mut self.ebpf, MAP_SHADOW)?;
        self.set_live_unit(None)
    }

    /// Synchronisation points each thread (by tid) of the last intervened
    /// run entered; read before the next run starts.
    pub fn sync_steps(&self) -> Vec<(u32, u32)> {
        let Some(m) = self.ebpf.map(MAP_SYNC_STEPS) else { return Vec::new() };
        let Ok(steps) = BpfHashMap::<_, u32, u32>::try_from(m) else { return Vec::new() };
        steps.iter().filter_map(Result::ok).collect()
    }

    /// Events dropped because the ring buffer was full, since the last call.
    pub fn take_lost(&mut self) -> Result<Lost, ProbeError> {
        Ok(Lost {
            calls: take_counter(&mut self.ebpf, MAP_LOST, LostSlot::Calls as u32)?,
            thread_records: take_counter(&mut self.ebpf, MAP_LOST, LostSlot::ThreadRecords as u32)?,
        })
    }

    /// Probe bodies that failed (a full map, ...), since the last call;
    /// each kind that occurred is logged as a warning.
    pub fn take_errors(&mut self) -> Result<u64, ProbeError> {
        let counts = self.take_error_counts()?;
        for (kind, n) in &counts {
            if *n > 0 {
                log::warn!("eBPF probes: {n} time(s) {}", kind.describe());
            }
        }
        Ok(counts.iter().map(|(_, n)| n).sum())
    }

    /// Probe failures since the last call, by kind.
    pub fn take_error_counts(&mut self) -> Result<Vec<(ProbeErrorKind, u64)>, ProbeError> {
        ProbeErrorKind::ALL
            .iter()
            .map(|kind| Ok((*kind, take_counter(&mut self.ebpf, MAP_ERRORS, *kind as u32)?)))
            .collect()
    }

    /// Live-unit mode: interventions act only inside invocations of `unit`,
    /// on the thread running it, with unit-relative instances.
    pub fn set_live_unit(&mut self, unit: Option<crate::model::FuncId>) -> Result<(), ProbeError> {
        let mut live: aya::maps::Array<_, u32> = map(&mut self.ebpf, MAP_LIVE_UNIT)?;
        live.set(0, unit.map_or(0, |u| u + 1), 0).map_err(|e| map_err(MAP_LIVE_UNIT, e))
    }

    /// Marks a thread as rewound to the first instruction of a function.
    pub fn set_replay(&mut self, tid: u32, replay: Replay) -> Result<(), ProbeError> {
        let mut m: BpfHashMap<_, u32, Replay> = map(&mut self.ebpf, MAP_REPLAY)?;
        m.insert(tid, replay, 0).map_err(|e| map_err(MAP_REPLAY, e))
    }

    /// Removes every action (the stamps stay).
    pub fn clear_actions(&mut self) -> Result<(), ProbeError> {
        clear::<SiteKey, Action>(&mut self.ebpf, MAP_ACTIONS)
    }

    /// Removes every serialised group and its running counts (the count
    /// of units in flight stays: the kernel keeps it across rounds).
    pub fn clear_groups(&mut self) -> Result<(), ProbeError> {
        clear::<GroupMember, GroupSlot>(&mut self.ebpf, MAP_GROUPS)?;
        clear::<OpenMember, RunningKey>(&mut self.ebpf, MAP_OPEN_MEMBERS)?;
        let mut m: BpfHashMap<_, RunningKey, u64> = map(&mut self.ebpf, MAP_RUNNING)?;
        let keys: Vec<RunningKey> =
            m.keys().filter_map(Result::ok).filter(|k| *k != UNITS_IN_FLIGHT).collect();
        for k in keys {
            let _ = m.remove(&k);
        }
        Ok(())
    }

    /// Installs an action at a site.
    pub fn set_action(&mut self, site: SiteKey, action: Action) -> Result<(), ProbeError> {
        let mut actions: BpfHashMap<_, SiteKey, Action> = map(&mut self.ebpf, MAP_ACTIONS)?;
        actions.insert(site, action, 0).map_err(|e| map_err(MAP_ACTIONS, e))
    }

    /// Takes the action at a site out (none there is not an error).
    pub fn remove_action(&mut self, site: SiteKey) -> Result<(), ProbeError> {
        let mut actions: BpfHashMap<_, SiteKey, Action> = map(&mut self.ebpf, MAP_ACTIONS)?;
        match actions.remove(&site) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(map_err(MAP_ACTIONS, e)),
        }
    }

    /// Nothing waits for `site` any more: the stop the probe of the held
    /// thread put there ([`ActionKind::RELEASE_WAITERS`]), if any, is
    /// taken out.
    pub fn forget_event(&mut self, site: SiteKey) {
        let Ok(mut actions) = map::<BpfHashMap<_, SiteKey, Action>>(&mut self.ebpf, MAP_ACTIONS)
        else {
            return;
        };
        if actions.get(&site, 0).is_ok_and(|a| a.kind == ActionKind::RELEASE_WAITERS) {
            let _ = actions.remove(&site);
        }
    }

    /// Asks the kernel to record when `site` happens.
    pub fn stamp(&mut self, site: SiteKey) -> Result<(), ProbeError> {
        let mut stamps: BpfHashMap<_, SiteKey, u64> = map(&mut self.ebpf, MAP_STAMPS)?;
        if stamps.get(&site, 0).is_err() {
            stamps.insert(site, 0, 0).map_err(|e| map_err(MAP_STAMPS, e))?;
        }
        Ok(())
    }

    /// Marks a stamped `site` as happened at `ns` (monotonic) if a thread
    /// is held there ([`HELD_MARK`]): the agent lets it go now. A site
    /// nothing waits for is not in the map.
    pub fn let_go(&mut self, site: &SiteKey, ns: u64) {
        let Ok(mut stamps) = map::<BpfHashMap<_, SiteKey, u64>>(&mut self.ebpf, MAP_STAMPS) else {
            return;
        };
        if stamps.get(site, 0).is_ok_and(|t| t & HELD_MARK != 0) {
            let _ = stamps.insert(site, ns, 0);
        }
    }

    /// Marks a stamped `site` as happened at `ns` (monotonic), whatever
    /// it was: for an event no probe reaches, which the agent itself
    /// brings about (a watched object armed).
    pub fn set_happened(&mut self, site: &SiteKey, ns: u64) {
        let Ok(mut stamps) = map::<BpfHashMap<_, SiteKey, u64>>(&mut self.ebpf, MAP_STAMPS) else {
            return;
        };
        if stamps.get(site, 0).is_ok() {
            let _ = stamps.insert(site, ns & !HELD_MARK, 0);
        }
    }

    /// When `site` happened (monotonic ns), if it has: a thread reached it
    /// and, if the agent held it there, was let go.
    pub fn happened(&self, site: &SiteKey) -> Option<u64> {
        self.stamped(site).filter(|t| *t != 0 && t & HELD_MARK == 0)
    }

    /// When a thread reached `site` (monotonic ns), let go or not.
    pub fn reached(&self, site: &SiteKey) -> Option<u64> {
        self.stamped(site).filter(|t| *t != 0).map(|t| t & !HELD_MARK)
    }

    fn stamped(&self, site: &SiteKey) -> Option<u64> {
        let stamps: BpfHashMap<_, SiteKey, u64> =
            BpfHashMap::try_from(self.ebpf.map(MAP_STAMPS)?).ok()?;
        stamps.get(site, 0).ok()
    }

    /// Counts the calls of `member` while they run, as `slot` says (group
    /// serialisation).
    pub fn set_group(&mut self, member: GroupMember, slot: GroupSlot) -> Result<(), ProbeError> {
        let mut m: BpfHashMap<_, GroupMember, GroupSlot> = map(&mut self.ebpf, MAP_GROUPS)?;
        m.insert(member, slot, 0).map_err(|e| map_err(MAP_GROUPS, e))
    }

    /// Calls of a serialised group running now on `key`'s object.
    pub fn running(&self, key: &RunningKey) -> u64 {
        let Some(m) = self.ebpf.map(MAP_RUNNING) else { return 0 };
        let Ok(m) = BpfHashMap::<_, RunningKey, u64>::try_from(m) else { return 0 };
        m.get(key, 0).unwrap_or(0)
    }

    /// Where the running call of `func` on thread `tid` is counted, if it
    /// belongs to a serialised group.
    pub fn open_member(&self, tid: u32, func: u32) -> Option<RunningKey> {
        let m = BpfHashMap::<_, OpenMember, RunningKey>::try_from(self.ebpf.map(MAP_OPEN_MEMBERS)?)
            .ok()?;
        m.get(&OpenMember { tid, func }, 0).ok()
    }

    /// Every call counted in a serialised group right now: its thread and
    /// the key it is counted under.
    pub fn open_members(&self) -> Vec<(u32, RunningKey)> {
        let Some(m) = self.ebpf.map(MAP_OPEN_MEMBERS) else { return Vec::new() };
        let Ok(m) = BpfHashMap::<_, OpenMember, RunningKey>::try_from(m) else {
            return Vec::new();
        };
        m.iter().filter_map(Result::ok).map(|(member, key)| (member.tid, key)).collect()
    }

    /// The action a stopped thread asked for, removed from the map.
    /// The shadow stack of thread `tid` of a target that throws.
    pub fn shadow(&self, tid: u32) -> Option<ShadowStack> {
        let m = self.ebpf.map(MAP_SHADOW)?;
        let stacks = BpfHashMap::<_, u32, ShadowStack>::try_from(m).ok()?;
        stacks.get(&tid, 0).ok()
    }

    pub fn take_pending(&mut self, tid: u32) -> Option<Pending> {
        let mut pending: BpfHashMap<_, u32, Pending> = map(&mut self.ebpf, MAP_PENDING).ok()?;
        let value = pending.get(&tid, 0).ok()?;
        let _ = pending.remove(&tid);
        Some(value)
    }
}

pub(super) fn map<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<T, ProbeError>
where
    T: TryFrom<&'a mut aya::maps::Map>,
    <T as TryFrom<&'a mut aya::maps::Map>>::Error: std::fmt::Display,
{
    let m = ebpf.map_mut(name).ok_or(ProbeError::Map { name, reason: "missing".into() })?;
    T::try_from(m).map_err(|e| ProbeError::Map { name, reason: e.to_string() })
}

pub(super) fn map_err(name: &'static str, e: aya::maps::MapError) -> ProbeError {
    ProbeError::Map { name, reason: error_chain(&e) }
}

pub(super) fn clear<K: aya::Pod, V: aya::Pod>(
    ebpf: &mut Ebpf,
    name: &'static str,
) -> Result<(), ProbeError> {
    let mut m: BpfHashMap<_, K, V> = map(ebpf, name)?;
    let keys: Vec<K> = m.keys().filter_map(Result::ok).collect();
    for k in keys {
        let _ = m.remove(&k);
    }
    Ok(())
}

pub(super) fn take_counter(
    ebpf: &mut Ebpf,
    name: &'static str,
    index: u32,
) -> Result<u64, ProbeError> {
    let mut counter: PerCpuArray<_, u64> = map(ebpf, name)?;
    let values = counter.get(&index, 0).map_err(|e| map_err(name, e))?;
    let total = values.iter().sum();
    let zeros = aya::maps::PerCpuValues::try_from(vec![0u64; values.len()])
        .map_err(|e| ProbeError::Map { name, reason: e.to_string() })?;
    counter.set(index, zeros, 0).map_err(|e| map_err(name, e))?;
    Ok(total)
}

/// Events the kernel dropped because the ring buffer was full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Function entries and exits.
    pub calls: u64,
    /// Thread creation, exit and exec records.
    pub thread_records: u64,
}

impl Lost {
    pub fn total(self) -> u64 {
        self.calls + self.thread_records
    }
}
