//! Jobs' devices: the siblings of an opened target that a thread per job drives (`--jobs`).
//!
//! A sibling is a duplicate of the descriptor the safety gate judged and claimed, never a reopen by path, with a
//! ring and buffers of its own, timed on the opened device's clock. Only devices whose state is all in the
//! kernel have siblings (io_uring, pread/pwrite and the null device); the virtual SSD and a cache keep their
//! state in the one device, so their jobs run as lanes of one loop. It never opens a path and never decides
//! whether writing is allowed.

use ssdlab_core::device::{DeviceError, DeviceResult, JobDevice, JobRun};
use ssdlab_io::Sibling;
use ssdlab_io::null::NullDevice;
use ssdlab_io::psync::PsyncDevice;
use ssdlab_io::uring::UringDevice;

use crate::AnyDevice;

/// One job's device, made on the job's thread.
pub enum JobTarget {
    Uring(Sibling),
    Psync(Sibling),
    Null(NullDevice),
}

impl AnyDevice {
    /// The devices of `jobs` jobs, each a sibling of this one; None when this device runs its jobs as lanes of
    /// one loop (the virtual SSD, a cache, a device a caller built).
    pub fn job_targets(&self, jobs: u32) -> DeviceResult<Option<Vec<JobTarget>>> {
        let one = |device: &AnyDevice| -> DeviceResult<Option<JobTarget>> {
            let duplicate = |e| DeviceError::os("duplicating the target's descriptor for a job", e);
            Ok(match device {
                AnyDevice::Uring(d) => Some(JobTarget::Uring(d.sibling().map_err(duplicate)?)),
                AnyDevice::Psync(d) => Some(JobTarget::Psync(d.sibling().map_err(duplicate)?)),
                AnyDevice::Null(d) => Some(JobTarget::Null(d.sibling())),
                AnyDevice::Sim(_) | AnyDevice::Cached(_) | AnyDevice::Dyn(_) => None,
            })
        };
        (0..jobs).map(|_| one(self)).collect()
    }
}

/// Where a device's jobs come from when the device is not at hand: one sibling kept aside (a duplicate of the
/// claimed descriptor), from which each phase's jobs are duplicated. A method's session holds the device itself.
pub struct JobSource(JobTarget);

impl AnyDevice {
    /// The source of this device's jobs, or None when its jobs run as lanes of one loop.
    pub fn job_source(&self) -> DeviceResult<Option<JobSource>> {
        Ok(self.job_targets(1)?.and_then(|mut one| one.pop()).map(JobSource))
    }
}

impl JobSource {
    /// The devices of `jobs` jobs, each a sibling of the source's device.
    pub fn targets(&self, jobs: u32) -> DeviceResult<Vec<JobTarget>> {
        let duplicate = |e| DeviceError::os("duplicating the target's descriptor for a job", e);
        (0..jobs)
            .map(|_| {
                Ok(match &self.0 {
                    JobTarget::Uring(s) => JobTarget::Uring(s.duplicate().map_err(duplicate)?),
                    JobTarget::Psync(s) => JobTarget::Psync(s.duplicate().map_err(duplicate)?),
                    JobTarget::Null(d) => JobTarget::Null(d.sibling()),
                })
            })
            .collect()
    }
}

impl JobDevice for JobTarget {
    fn with_device<R: JobRun>(self, run: R) -> DeviceResult<R::Output> {
        Ok(match self {
            JobTarget::Uring(sibling) => {
                let device = UringDevice::from_sibling(sibling).map_err(|refused| {
                    DeviceError::Invalid(format!(
                        "a job's io_uring could not be set up: {}",
                        refused.reason
                    ))
                })?;
                run.on(device)
            }
            JobTarget::Psync(sibling) => run.on(PsyncDevice::from_sibling(sibling)),
            JobTarget::Null(device) => run.on(device),
        })
    }
}
