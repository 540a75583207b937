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
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The environment variable that overrides where the lock files live.
pub const LOCK_DIR_ENV: &str = "KSEARCH_DEVICE_LOCK_DIR";

/// The machine-wide lock directory. Fixed, not read from the session's environment: two
/// processes must find the same files whether or not their sessions set `XDG_RUNTIME_DIR` or
/// `TMPDIR` (ssh, cron, sudo, CI), and whoever's they are (the GPUs are the machine's).
pub const DEFAULT_LOCK_DIR: &str = "/tmp/ksearch-device-locks";

/// Where the device locks live, and how to take one.
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

    /// The machine's lock directory, [`DEFAULT_LOCK_DIR`]: one for every user and session, as
    /// the devices are one. It is created sticky and writable by all (like /tmp itself), the
    /// files in it readable and writable by all, and a lock file that is a symbolic link is
    /// refused, so no user can point another's lock at a file of theirs.
    pub fn default_dir() -> PathBuf {
        PathBuf::from(DEFAULT_LOCK_DIR)
    }

    /// The directory holding the lock files (one `<key>.lock` per device).
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
        if !self.dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o1777)
                .create(&self.dir)
                .map_err(|e| err("cannot create the lock directory", e))?;
            // The umask took bits away; other users' processes must be able to add their
            // files (sticky: none can remove another's).
            let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o1777));
        }
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o666)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(f) => {
                // Readable and writable by all whoever made it (the umask took bits away), so
                // another user's process can lock it and record itself. Best effort: only the
                // file's owner may change it.
                let _ = f.set_permissions(std::fs::Permissions::from_mode(0o666));
                f
            }
            // Another user's lock file in a shared directory: an flock needs no write access,
            // only the holder's record is lost.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .map_err(|e| err("cannot open the lock file", e))?,
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
