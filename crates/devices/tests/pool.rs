//! The device pool under contention, with fake workers: threads that hold leases for scripted
//! durations and record what they held.

use ksearch_devices::{cpu_slots, parse_nvidia_smi, DeviceError, DevicePool};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

fn gpus(n: usize) -> DevicePool {
    let text: String = (0..n)
        .map(|i| format!("{i}, NVIDIA H200, GPU-{i:08x}-aaaa-bbbb-cccc-dddddddddddd, 143771 MiB\n"))
        .collect();
    DevicePool::new(parse_nvidia_smi(&text).unwrap()).unwrap()
}

/// Waits (bounded) until `cond` holds, so a test that would deadlock fails instead.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for: {what}"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_device_is_never_leased_twice_under_contention() {
    let pool = gpus(3);
    let holders: Arc<Vec<AtomicUsize>> = Arc::new((0..3).map(|_| AtomicUsize::new(0)).collect());
    let overlaps = Arc::new(AtomicUsize::new(0));
    let served = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..8)
        .map(|w| {
            let (pool, holders, overlaps, served) = (pool.clone(), holders.clone(), overlaps.clone(), served.clone());
            thread::spawn(move || {
                for job in 0..6 {
                    let lease = pool.lease();
                    let slot = lease.device().index as usize;
                    if holders[slot].fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    // Scripted durations, different per worker and job.
                    thread::sleep(Duration::from_micros(200 + ((w * 7 + job * 3) % 5) as u64 * 300));
                    holders[slot].fetch_sub(1, Ordering::SeqCst);
                    served.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders shared a device");
    assert_eq!(served.load(Ordering::SeqCst), 48);
    assert_eq!(pool.in_use(), 0);
    assert!(pool.peak_in_use() <= 3);
}

#[test]
fn n_devices_give_n_concurrent_evaluations_and_not_more() {
    for n in [1usize, 2, 4] {
        let pool = gpus(n);
        // Each of n workers takes a lease, then waits until all n hold one at the same time:
        // with fewer than n concurrent leases this rendezvous never completes (and times out).
        let arrived = Arc::new((Mutex::new(0usize), Condvar::new()));
        let labels = Arc::new(Mutex::new(Vec::new()));
        let workers: Vec<_> = (0..n)
            .map(|_| {
                let (pool, arrived, labels) = (pool.clone(), arrived.clone(), labels.clone());
                thread::spawn(move || {
                    let lease = pool.lease();
                    labels.lock().unwrap().push((lease.label(), lease.env()));
                    let (count, cv) = &*arrived;
                    let mut c = count.lock().unwrap();
                    *c += 1;
                    cv.notify_all();
                    let deadline = Instant::now() + Duration::from_secs(20);
                    while *c < n {
                        let left = deadline.saturating_duration_since(Instant::now());
                        assert!(!left.is_zero(), "only {} of {n} evaluations ran at once", *c);
                        c = cv.wait_timeout(c, left).unwrap().0;
                    }
                    drop(c);
                    lease
                })
            })
            .collect();
        eventually("all leases taken", || pool.in_use() == n);
        assert!(pool.try_lease().is_none(), "an n+1-th lease while n are held");
        let leases: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(pool.peak_in_use(), n);
        let mut got: Vec<String> = labels.lock().unwrap().iter().map(|l| l.0.clone()).collect();
        got.sort();
        let want: Vec<String> = (0..n).map(|i| format!("cuda:{i}")).collect();
        assert_eq!(got, want, "every device leased once");
        for (label, env) in labels.lock().unwrap().iter() {
            let i: usize = label.trim_start_matches("cuda:").parse().unwrap();
            assert_eq!(
                env,
                &vec![(
                    "CUDA_VISIBLE_DEVICES".to_string(),
                    format!("GPU-{i:08x}-aaaa-bbbb-cccc-dddddddddddd")
                )]
            );
        }
        drop(leases);
        assert_eq!(pool.in_use(), 0);
    }
}

#[test]
fn waiters_are_served_first_come_first_served() {
    let pool = DevicePool::new(cpu_slots(1)).unwrap();
    let held = pool.lease();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for w in 0..6 {
        let (p, order) = (pool.clone(), order.clone());
        waiters.push(thread::spawn(move || {
            let lease = p.lease();
            order.lock().unwrap().push(w);
            thread::sleep(Duration::from_millis(2));
            drop(lease);
        }));
        // The next waiter starts only once this one is queued, so the queue order is known.
        eventually("the waiter queued", || pool.waiting() == w + 1);
    }
    assert!(pool.try_lease().is_none(), "try_lease jumps no queue");
    drop(held);
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
}

#[test]
fn a_panicking_holder_frees_its_device() {
    let pool = DevicePool::new(cpu_slots(1)).unwrap();
    let p = pool.clone();
    let crashed = thread::spawn(move || {
        let _lease = p.lease();
        panic!("the evaluation crashed");
    })
    .join();
    assert!(crashed.is_err());
    assert_eq!(pool.in_use(), 0);
    let lease = pool
        .lease_timeout(Duration::from_secs(5))
        .expect("the device was freed");
    assert_eq!(lease.label(), "cpu:0");
    assert!(lease.env().is_empty(), "a CPU slot needs no environment");
}

#[test]
fn a_timed_out_waiter_leaves_the_queue() {
    let pool = gpus(1);
    let held = pool.lease();
    let err = pool.lease_timeout(Duration::from_millis(30)).unwrap_err();
    assert!(matches!(err, DeviceError::Timeout { busy: 1, total: 1, .. }), "{err:?}");
    assert!(err.to_string().contains("no device came free"), "{err}");
    assert_eq!(pool.waiting(), 0);
    // The queue is not blocked by the caller that gave up.
    let p = pool.clone();
    let next = thread::spawn(move || p.lease().label());
    eventually("the next waiter queued", || pool.waiting() == 1);
    drop(held);
    assert_eq!(next.join().unwrap(), "cuda:0");
}

#[test]
fn an_empty_pool_is_refused() {
    let err = DevicePool::new(vec![]).unwrap_err();
    assert!(matches!(err, DeviceError::NoDevices { .. }), "{err:?}");
}
