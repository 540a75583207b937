//! Cross-process device locks: one advisory file lock (`flock`) per device, so that two ksearch
//! processes (two `ksearch run`s, a run and a resume, ...) never time on the same GPU or CPU slot
//! at once. The pool keeps one evaluation per device inside a process; these locks keep it
//! across processes.
//!
//! Each device has a lock file in [`DeviceLocks::dir`], named by its stable identity
//! ([`lock_key`]): the GPU's UUID, or the host name and slot number of a CPU slot. A holder keeps
//! the file open with an exclusive `flock` and writes its pid and command line into it, which is
//! what a waiter shows the user. The kernel drops an `flock` when the last descriptor of the
//! open file is closed, which includes every way a process can die (SIGKILL too), so a file left
//! behind by a dead process never blocks anyone; the descriptor is opened close-on-exec, so an
//! evaluation's child process (or a stray grandchild that outlives ksearch) never holds it.

use crate::{Device, DeviceError, DeviceKind};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The environment variable that overrides where the lock files live.
pub const LOCK_DIR_ENV: &str = "KSEARCH_DEVICE_LOCK_DIR";

/// Where the device locks of this user live, and how to take one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceLocks {
    dir: PathBuf,
}

/// A device locked against other processes; dropping it releases the lock.
#[derive(Debug)]
pub struct DeviceLock {
    file: File,
    path: PathBuf,
}

impl DeviceLocks {
    /// Locks kept in `dir` (created when first needed).
    pub fn new(dir: impl Into<PathBuf>) -> DeviceLocks {
        DeviceLocks { dir: dir.into() }
    }

    /// `$KSEARCH_DEVICE_LOCK_DIR` when set, else [`default_dir`](Self::default_dir).
    pub fn from_env() -> DeviceLocks {
        match std::env::var_os(LOCK_DIR_ENV) {
            Some(dir) if !dir.is_empty() => DeviceLocks::new(dir),
            _ => DeviceLocks::new(Self::default_dir()),
        }
    }

    /// This user's lock directory: `$XDG_RUNTIME_DIR/ksearch/device-locks` (a per-user,
    /// per-machine tmpfs), else `$XDG_CACHE_HOME/ksearch/device-locks`, else
    /// `~/.cache/ksearch/device-locks`, else `<temp dir>/ksearch-device-locks-<uid>`. It does not
    /// follow `KSEARCH_CACHE_DIR`: two runs with different caches still share the machine's
    /// GPUs, so they must share the locks. (A home directory shared by several machines is
    /// harmless: GPU locks are named by UUID and CPU locks by host name.)
    pub fn default_dir() -> PathBuf {
        let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        if let Some(runtime) = non_empty("XDG_RUNTIME_DIR") {
            return runtime.join("ksearch").join("device-locks");
        }
        if let Some(cache) = non_empty("XDG_CACHE_HOME") {
            return cache.join("ksearch").join("device-locks");
        }
        if let Some(home) = non_empty("HOME") {
            return home.join(".cache").join("ksearch").join("device-locks");
        }
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        std::env::temp_dir().join(format!("ksearch-device-locks-{uid}"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The lock file of `device`.
    pub fn path(&self, device: &Device) -> PathBuf {
        self.dir.join(format!("{}.lock", lock_key(device)))
    }

    /// Locks `device` if no other holder (another process, or another open of the same file in
    /// this one) has it: `Ok(None)` when it is held. Never waits.
    pub fn try_lock(&self, device: &Device) -> Result<Option<DeviceLock>, DeviceError> {
        let path = self.path(device);
        let err = |what: &str, e: std::io::Error| DeviceError::Lock {
            device: device.label(),
            path: path.display().to_string(),
            reason: format!("{what}: {e} (set {LOCK_DIR_ENV} to a writable local directory)"),
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| err("cannot create the lock directory", e))?;
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(&path)
        {
            Ok(f) => f,
            // Another user's lock file in a shared directory: an flock needs no write access,
            // only the holder's record is lost.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                File::open(&path).map_err(|e| err("cannot open the lock file", e))?
            }
            Err(e) => return Err(err("cannot open the lock file", e)),
        };
        loop {
            // SAFETY: a plain syscall on a descriptor this function owns.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EWOULDBLOCK) => return Ok(None),
                Some(libc::EINTR) => continue,
                _ => return Err(err("cannot lock the lock file", e)),
            }
        }
        // Whose it is, for whoever waits for it. Best effort: a read-only file keeps no record.
        let _ = file.set_len(0);
        let _ = file.write_all_at(holder_record().as_bytes(), 0);
        Ok(Some(DeviceLock { file, path }))
    }

    /// Who holds `device`'s lock, as its holder recorded it (`pid 4242: ksearch run ...`), or
    /// `None` when the file records nobody (it is free, or its holder has not written yet).
    pub fn holder(&self, device: &Device) -> Option<String> {
        let mut text = String::new();
        File::open(self.path(device)).ok()?.read_to_string(&mut text).ok()?;
        let mut pid = None;
        let mut command = None;
        for line in text.lines() {
            if let Some(p) = line.strip_prefix("pid ") {
                pid = Some(p.trim().to_string());
            } else if let Some(c) = line.strip_prefix("command ") {
                command = Some(c.trim().to_string());
            }
        }
        match (pid?, command) {
            (pid, Some(c)) if !c.is_empty() => Some(format!("pid {pid}: {c}")),
            (pid, _) => Some(format!("pid {pid}")),
        }
    }
}

impl DeviceLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DeviceLock {
    fn drop(&mut self) {
        // Forget the record while still holding the lock; closing the file releases it.
        let _ = self.file.set_len(0);
    }
}

/// The name of `device`'s lock: its UUID for a GPU (`GPU-8f2c...`, the same whatever
/// `CUDA_VISIBLE_DEVICES` or `CUDA_DEVICE_ORDER` say), `gpu-<host>-<index>` for a GPU without
/// one, `cpu-<host>-<slot>` for a CPU slot. Only letters, digits, `.`, `-` and `_`.
pub fn lock_key(device: &Device) -> String {
    let key = match (device.kind, &device.uuid) {
        (DeviceKind::Cuda, Some(uuid)) => uuid.clone(),
        (DeviceKind::Cuda, None) => format!("gpu-{}-{}", hostname(), device.index),
        (DeviceKind::Cpu, _) => format!("cpu-{}-{}", hostname(), device.index),
    };
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length; the result is NUL-terminated or
    // truncated, and we stop at the first NUL either way.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name = if rc == 0 {
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    };
    if name.is_empty() {
        "localhost".to_string()
    } else {
        name
    }
}

/// What a holder writes into its lock file: its pid, its command line and when it took it.
fn holder_record() -> String {
    let mut command: String = std::env::args().collect::<Vec<_>>().join(" ");
    if command.chars().count() > 300 {
        command = command.chars().take(300).collect::<String>() + "...";
    }
    let command = command.replace(['\n', '\r'], " ");
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("pid {}\ncommand {command}\nsince {since}\n", std::process::id())
}
