//! Triton's system shared memory extension: a client on this host registers a POSIX shared
//! memory object (or a byte range of it) as a named region, then names regions for a request's
//! inputs, which the server reads from there, and for its outputs, which the server writes
//! there, instead of sending the tensors' bytes (`/v2/systemsharedmemory/…` over HTTP,
//! `SystemSharedMemory*` over gRPC, one registry for both; `crate::oip::Placement` is what a
//! request names).
//!
//! Shaped for a server on a network it does not trust:
//! - **Off unless asked for** (`weir serve --shared-memory system`): a registered region lets a
//!   client have the server read and write a shared memory object by name.
//! - **Registered only over loopback.** Shared memory means something only to a client on this
//!   host; a registration from any other address is refused, so a remote client cannot name the
//!   objects of processes on the server's host. The routes are behind the server's bearer token.
//! - **Keys are POSIX shared memory names** (`/name`, no other `/`), opened under `/dev/shm`
//!   (where `shm_open` keeps them) without following a symbolic link, and must be plain files;
//!   the registered range must lie within the object (checked arithmetic).
//! - **Read and written through the descriptor, never mapped** (`region.rs`): a client that
//!   shrinks its object after registering makes a read come up short, refused naming the region,
//!   where a mapping would fault the server.
//! - **Bounded**: at most [`MAX_REGIONS`] regions, names of at most
//!   [`crate::oip::REGION_NAME_MAX_BYTES`]; a tensor read from a region is at most the request
//!   size cap and charged to the process's byte budget before it is read, as a body would be.
//!
//! CUDA shared memory is not served (tensors live in host memory here): its status is empty,
//! unregistering succeeds, and a registration is refused saying so, as a client that probes for
//! it expects.

mod region;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::echo::quote;
use crate::oip::{
    region_name_fits, InferRequest, Placement, ProtocolError, RegionSlice, ReplyTensor,
    REGION_NAME_MAX_BYTES,
};
use region::{Region, SHM_DIR};

/// Most regions registered at once.
pub const MAX_REGIONS: usize = 256;

/// Why a shared memory request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SharedMemoryError {
    /// The server was started without the extension.
    #[error(
        "system shared memory is off in this server: start `weir serve` with \
         `--shared-memory system` to serve it"
    )]
    Off,
    /// A registration from a client that is not on this host.
    #[error(
        "shared memory regions are registered only by clients on this host (over loopback); \
         this connection came from {peer}"
    )]
    NotLocal {
        /// The client's address, as far as it is known.
        peer: String,
    },
    /// A region name that is empty or too long.
    #[error("name: a region name of 1 to {REGION_NAME_MAX_BYTES} bytes")]
    Name,
    /// A key that is not a POSIX shared memory name.
    #[error("key `{key}`: {why}")]
    Key {
        /// The key, cut short.
        key: String,
        /// What is wrong with it.
        why: String,
    },
    /// A key whose object cannot be opened, or is not a shared memory object.
    #[error("key `{key}`: {why}")]
    Open {
        /// The key, cut short.
        key: String,
        /// Why.
        why: String,
    },
    /// A range that does not lie where it must.
    #[error("{field}: {why}")]
    Range {
        /// The field at fault.
        field: String,
        /// Why.
        why: String,
    },
    /// A name already registered.
    #[error("name: region `{0}` is already registered; unregister it first")]
    Exists(String),
    /// The registry is full.
    #[error(
        "{MAX_REGIONS} regions are registered, the most this server keeps; unregister one first"
    )]
    TooMany,
    /// A name not registered.
    #[error("no system shared memory region `{0}` is registered")]
    Unknown(String),
    /// Reading or writing the object failed.
    #[error("region `{region}`: {why}")]
    Io {
        /// The region.
        region: String,
        /// Why.
        why: String,
    },
    /// A CUDA shared memory registration.
    #[error(
        "CUDA shared memory is not served: this server keeps tensors in host memory; register a \
         system shared memory region instead"
    )]
    Cuda,
}

/// A registered region as its status reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionStatus {
    /// Its name.
    pub name: String,
    /// The shared memory object's key.
    pub key: String,
    /// Where the region starts in the object.
    pub offset: u64,
    /// Its length.
    pub byte_size: u64,
}

/// The server's registered regions (one registry for HTTP and gRPC).
#[derive(Debug)]
pub struct SharedMemory {
    enabled: bool,
    dir: PathBuf,
    regions: Mutex<BTreeMap<String, Arc<Region>>>,
}

impl SharedMemory {
    /// A registry that refuses every registration: the extension is off.
    pub fn off() -> Arc<SharedMemory> {
        Arc::new(SharedMemory {
            enabled: false,
            dir: PathBuf::from(SHM_DIR),
            regions: Mutex::default(),
        })
    }

    /// A registry serving the system shared memory extension.
    pub fn system() -> Arc<SharedMemory> {
        Arc::new(SharedMemory {
            enabled: true,
            dir: PathBuf::from(SHM_DIR),
            regions: Mutex::default(),
        })
    }

    /// Whether the extension is served.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    fn regions(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Region>>> {
        // A panic while the map was held cannot leave it half-changed: every change is one insert
        // or removal.
        self.regions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers `byte_size` bytes at `offset` into the object `key` as region `name`, for a
    /// client connected from `peer` (`None`: not known, refused).
    ///
    /// # Errors
    /// See [`SharedMemoryError`]: off, not a local peer, a bad name or key, an object that cannot
    /// be opened or is shorter than the range, a name registered already, a full registry.
    pub fn register(
        &self,
        name: &str,
        key: &str,
        offset: u64,
        byte_size: u64,
        peer: Option<SocketAddr>,
    ) -> Result<(), SharedMemoryError> {
        if !self.enabled {
            return Err(SharedMemoryError::Off);
        }
        match peer {
            Some(p) if p.ip().is_loopback() => {}
            Some(p) => {
                return Err(SharedMemoryError::NotLocal {
                    peer: p.to_string(),
                })
            }
            None => {
                return Err(SharedMemoryError::NotLocal {
                    peer: "an address the server does not know".into(),
                })
            }
        }
        if !region_name_fits(name) {
            return Err(SharedMemoryError::Name);
        }
        let room = |regions: &BTreeMap<String, Arc<Region>>| {
            if regions.contains_key(name) {
                Err(SharedMemoryError::Exists(quote(name).into_owned()))
            } else if regions.len() >= MAX_REGIONS {
                Err(SharedMemoryError::TooMany)
            } else {
                Ok(())
            }
        };
        room(&self.regions())?;
        // Opened outside the lock; the room is checked again when it is inserted.
        let region = Arc::new(Region::open(&self.dir, key, offset, byte_size)?);
        let mut regions = self.regions();
        room(&regions)?;
        regions.insert(name.to_string(), region);
        Ok(())
    }

    /// Unregisters region `name`, or every region (`None`); a name not registered is no error,
    /// as in Triton.
    pub fn unregister(&self, name: Option<&str>) {
        let mut regions = self.regions();
        match name {
            Some(n) => {
                regions.remove(n);
            }
            None => regions.clear(),
        }
    }

    /// The status of region `name`, or of every region (`None`).
    ///
    /// # Errors
    /// [`SharedMemoryError::Unknown`] for a name not registered.
    pub fn status(&self, name: Option<&str>) -> Result<Vec<RegionStatus>, SharedMemoryError> {
        let regions = self.regions();
        let status = |(name, r): (&String, &Arc<Region>)| RegionStatus {
            name: name.clone(),
            key: r.key.clone(),
            offset: r.offset,
            byte_size: r.byte_size,
        };
        match name {
            None => Ok(regions.iter().map(status).collect()),
            Some(n) => regions
                .get_key_value(n)
                .map(|e| vec![status(e)])
                .ok_or_else(|| SharedMemoryError::Unknown(quote(n).into_owned())),
        }
    }

    fn region(&self, name: &str) -> Result<Arc<Region>, SharedMemoryError> {
        if !self.enabled {
            return Err(SharedMemoryError::Off);
        }
        self.regions()
            .get(name)
            .cloned()
            .ok_or_else(|| SharedMemoryError::Unknown(quote(name).into_owned()))
    }

    /// The bytes of `slice`, at most `max_bytes` of them.
    fn read(&self, slice: &RegionSlice, max_bytes: usize) -> Result<Vec<u8>, String> {
        let len = usize::try_from(slice.byte_size)
            .ok()
            .filter(|&n| n <= max_bytes)
            .ok_or_else(|| {
                format!(
                    "{} bytes, more than the {max_bytes} bytes a request may carry",
                    slice.byte_size
                )
            })?;
        let region = self.region(&slice.region).map_err(|e| e.to_string())?;
        region
            .read(slice.offset, len, &slice.region)
            .map_err(|e| e.to_string())
    }

    /// Reads the inputs `placement` puts in regions into `request`, each at most `max_bytes`
    /// (the caller has charged [`Placement::input_bytes`] to the byte budget).
    ///
    /// # Errors
    /// A [`ProtocolError`] naming the input: the extension off, a region not registered, a slice
    /// past its region or its object, bytes that are not the input's elements.
    pub fn read_inputs(
        &self,
        placement: &Placement,
        request: &mut InferRequest,
        max_bytes: usize,
    ) -> Result<(), ProtocolError> {
        placement.read_inputs(request, |slice| self.read(slice, max_bytes))
    }

    /// Writes the outputs `placement` puts in regions, marking each in `outputs` as written.
    ///
    /// # Errors
    /// A [`ProtocolError`] naming the output: the extension off, a region not registered, an
    /// output larger than its slice, a slice past its region or its object.
    pub fn write_outputs(
        &self,
        placement: &Placement,
        outputs: &mut [ReplyTensor],
    ) -> Result<(), ProtocolError> {
        placement.write_outputs(outputs, |slice, bytes| {
            let region = self.region(&slice.region).map_err(|e| e.to_string())?;
            region
                .write(slice.offset, bytes, &slice.region)
                .map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests;
