//! The device pool: one lease per device at a time, first come first served; with
//! [`DevicePool::lease_locked`], also across processes.

use crate::{Device, DeviceError, DeviceLock, DeviceLocks};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A fixed set of devices, each leased to at most one holder at a time. Cheap to clone (the
/// clones share the devices). Waiters are served in the order they asked (a ticket queue), so
/// a burst of requests cannot starve an early one.
#[derive(Debug, Clone)]
pub struct DevicePool {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    devices: Vec<Device>,
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Debug)]
struct State {
    busy: Vec<bool>,
    /// Tickets of the callers waiting, oldest first.
    queue: VecDeque<u64>,
    next_ticket: u64,
    /// The most devices ever leased at once.
    peak: usize,
}

/// A device held by one caller; dropping it (also during a panic) frees the device, and
/// releases its cross-process lock if it has one.
#[derive(Debug)]
pub struct Lease {
    pool: Arc<Inner>,
    slot: usize,
    lock: Option<DeviceLock>,
}

/// How often a caller waiting for a device held by another process looks again (a file lock
/// cannot be waited on together with this process's own devices, so it is polled).
const LOCK_POLL: Duration = Duration::from_millis(100);

/// How many polls a waiter gives the holder to write its record before it tells the user who
/// is waited for without naming it.
const RECORD_GRACE_POLLS: u32 = 5;

impl DevicePool {
    /// A pool over `devices` (at least one).
    pub fn new(devices: Vec<Device>) -> Result<DevicePool, DeviceError> {
        if devices.is_empty() {
            return Err(DeviceError::NoDevices {
                reason: "the pool was given an empty device list".into(),
            });
        }
        let n = devices.len();
        Ok(DevicePool {
            inner: Arc::new(Inner {
                devices,
                state: Mutex::new(State {
                    busy: vec![false; n],
                    queue: VecDeque::new(),
                    next_ticket: 0,
                    peak: 0,
                }),
                freed: Condvar::new(),
            }),
        })
    }

    /// The pool's devices, in the order they were given (the order leases prefer).
    pub fn devices(&self) -> &[Device] {
        &self.inner.devices
    }

    /// How many devices the pool has: how many evaluations can run at once.
    pub fn size(&self) -> usize {
        self.inner.devices.len()
    }

    /// Devices leased now.
    pub fn in_use(&self) -> usize {
        self.inner.lock().busy.iter().filter(|b| **b).count()
    }

    /// Callers waiting for a device now.
    pub fn waiting(&self) -> usize {
        self.inner.lock().queue.len()
    }

    /// The most devices that were leased at the same time so far.
    pub fn peak_in_use(&self) -> usize {
        self.inner.lock().peak
    }

    /// Waits until a device is free and it is this caller's turn, then leases it.
    pub fn lease(&self) -> Lease {
        match self.wait_for_slot(None) {
            Some(slot) => self.lease_of(slot),
            // Without a deadline the wait ends only with a slot.
            None => unreachable!("an unbounded wait returned without a device"),
        }
    }

    /// [`lease`](Self::lease), giving up after `timeout` (and leaving the queue).
    pub fn lease_timeout(&self, timeout: Duration) -> Result<Lease, DeviceError> {
        match self.wait_for_slot(Some(Instant::now() + timeout)) {
            Some(slot) => Ok(self.lease_of(slot)),
            None => Err(DeviceError::Timeout {
                waited: timeout,
                busy: self.in_use(),
                total: self.size(),
            }),
        }
    }

    /// A device now, if one is free and nobody is waiting for it.
    pub fn try_lease(&self) -> Option<Lease> {
        let mut state = self.inner.lock();
        if !state.queue.is_empty() {
            return None;
        }
        let slot = state.busy.iter().position(|b| !b)?;
        take(&mut state, slot);
        drop(state);
        Some(self.lease_of(slot))
    }

    /// [`lease`](Self::lease), and the device is also locked against other processes (see
    /// [`DeviceLocks`]): of this process's free devices, the first whose lock is free is taken.
    /// While every free device is held by another process, `notify` is told once what the
    /// caller waits for (the holders' pids and commands, as they recorded them), and the locks
    /// are tried again every 100 ms; a device this process frees meanwhile is taken at once.
    /// Waiters are still served first come first served within this process. An `Err` only when
    /// a lock file cannot be used at all (an unwritable lock directory): never a silent hang.
    pub fn lease_locked(&self, locks: &DeviceLocks, notify: &dyn Fn(&str)) -> Result<Lease, DeviceError> {
        let mut state = self.inner.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push_back(ticket);
        // Polls so far with every free device held elsewhere, and whether the user was told.
        let mut blocked_polls = 0u32;
        let mut told = false;
        loop {
            let mut held_elsewhere: Vec<usize> = Vec::new();
            if state.queue.front() == Some(&ticket) {
                let free: Vec<usize> = (0..state.busy.len()).filter(|s| !state.busy[*s]).collect();
                for slot in free {
                    match locks.try_lock(&self.inner.devices[slot]) {
                        Ok(Some(lock)) => {
                            state.queue.pop_front();
                            take(&mut state, slot);
                            self.inner.freed.notify_all();
                            return Ok(Lease {
                                pool: self.inner.clone(),
                                slot,
                                lock: Some(lock),
                            });
                        }
                        Ok(None) => held_elsewhere.push(slot),
                        Err(e) => {
                            state.queue.retain(|t| *t != ticket);
                            self.inner.freed.notify_all();
                            return Err(e);
                        }
                    }
                }
            }
            if held_elsewhere.is_empty() {
                // This process's own devices are all busy (or it is not this caller's turn):
                // their holders' drops wake us.
                state = self
                    .inner
                    .freed
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                continue;
            }
            blocked_polls += 1;
            if !told {
                let holders: Vec<(String, Option<String>)> = held_elsewhere
                    .iter()
                    .map(|s| {
                        let d = &self.inner.devices[*s];
                        (d.label(), locks.holder(d))
                    })
                    .collect();
                if holders.iter().all(|h| h.1.is_some()) || blocked_polls > RECORD_GRACE_POLLS {
                    told = true;
                    let message = waiting_message(&holders, locks);
                    // Not under the pool's lock: `notify` is the caller's code.
                    drop(state);
                    notify(&message);
                    state = self.inner.lock();
                    continue;
                }
            }
            state = self
                .inner
                .freed
                .wait_timeout(state, LOCK_POLL)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }

    fn lease_of(&self, slot: usize) -> Lease {
        Lease {
            pool: self.inner.clone(),
            slot,
            lock: None,
        }
    }

    /// Joins the queue and waits to be at its head with a free device; takes that device.
    /// `None` only when `deadline` passed first.
    fn wait_for_slot(&self, deadline: Option<Instant>) -> Option<usize> {
        let mut state = self.inner.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push_back(ticket);
        loop {
            if state.queue.front() == Some(&ticket) {
                if let Some(slot) = state.busy.iter().position(|b| !b) {
                    state.queue.pop_front();
                    take(&mut state, slot);
                    // The next in line may find another free device.
                    self.inner.freed.notify_all();
                    return Some(slot);
                }
            }
            state = match deadline {
                None => self
                    .inner
                    .freed
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        state.queue.retain(|t| *t != ticket);
                        // Whoever was behind this caller may be at the head now.
                        self.inner.freed.notify_all();
                        return None;
                    }
                    self.inner
                        .freed
                        .wait_timeout(state, deadline - now)
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .0
                }
            };
        }
    }
}

/// `cuda:0 is in use by another process (pid 4242: ksearch run ...); waiting for it (lock: ...)`,
/// or the same for several devices.
fn waiting_message(holders: &[(String, Option<String>)], locks: &DeviceLocks) -> String {
    let who = |h: &Option<String>| match h {
        Some(h) => format!("another process ({h})"),
        None => "another process".to_string(),
    };
    match holders {
        [(label, holder)] => format!(
            "{label} is in use by {}; waiting for it (lock files in {})",
            who(holder),
            locks.dir().display()
        ),
        many => format!(
            "every free device is in use by another process ({}); waiting for one (lock files in {})",
            many.iter()
                .map(|(label, holder)| format!("{label}: {}", holder.as_deref().unwrap_or("pid unknown")))
                .collect::<Vec<_>>()
                .join("; "),
            locks.dir().display()
        ),
    }
}

fn take(state: &mut State, slot: usize) {
    state.busy[slot] = true;
    let busy = state.busy.iter().filter(|b| **b).count();
    state.peak = state.peak.max(busy);
}

impl Inner {
    /// The state, even after a holder panicked: the state is only ever changed by a few
    /// assignments under the lock, so it is consistent whenever the lock is free.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Lease {
    /// The leased device; it is this lease's alone until the lease is dropped.
    pub fn device(&self) -> &Device {
        &self.pool.devices[self.slot]
    }

    /// `cuda:1`, `cpu:0`: see [`Device::label`].
    pub fn label(&self) -> String {
        self.device().label()
    }

    /// `cuda:0`-style name in this process: see [`Device::cuda_device`].
    pub fn cuda_device(&self) -> Option<String> {
        self.device().cuda_device()
    }

    /// The environment the evaluation's child process needs: see [`Device::env`].
    pub fn env(&self) -> Vec<(String, String)> {
        self.device().env()
    }

    /// The device's cross-process lock file, when the lease holds one
    /// ([`DevicePool::lease_locked`]).
    pub fn lock_path(&self) -> Option<&std::path::Path> {
        self.lock.as_ref().map(|l| l.path())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Other processes may take the device as soon as this one may.
        drop(self.lock.take());
        let mut state = self.pool.lock();
        state.busy[self.slot] = false;
        drop(state);
        self.pool.freed.notify_all();
    }
}
