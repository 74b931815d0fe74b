//! Triton's shared memory RPCs over gRPC (`SystemSharedMemory*`, `CudaSharedMemory*`), answered
//! from the registry the HTTP endpoints share (`crate::shared_memory` says why it is shaped so).
//! An empty name means every region, as in Triton; CUDA shared memory holds no region here, its
//! registration is refused saying why, and unregistering it succeeds.

use std::net::SocketAddr;

use tonic::{Code, Status};

use super::proto::system_shared_memory_status_response::RegionStatus;
use super::proto::{SystemSharedMemoryRegisterRequest, SystemSharedMemoryStatusResponse};
use crate::echo::{cap_error, quote};
use crate::shared_memory::{SharedMemory, SharedMemoryError};

/// The status of a refusal.
fn status(e: SharedMemoryError) -> Status {
    let code = match e {
        SharedMemoryError::NotLocal { .. } => Code::PermissionDenied,
        SharedMemoryError::Unknown(_) => Code::NotFound,
        SharedMemoryError::Off | SharedMemoryError::Cuda => Code::FailedPrecondition,
        _ => Code::InvalidArgument,
    };
    Status::new(code, cap_error(e.to_string()))
}

/// The named region's status, or every region's (an empty name).
pub(super) fn system_status(
    regions: &SharedMemory,
    name: &str,
) -> Result<SystemSharedMemoryStatusResponse, Status> {
    let found = regions
        .status((!name.is_empty()).then_some(name))
        .map_err(status)?;
    Ok(SystemSharedMemoryStatusResponse {
        regions: found
            .into_iter()
            .map(|r| {
                let status = RegionStatus {
                    name: r.name.clone(),
                    key: r.key,
                    offset: r.offset,
                    byte_size: r.byte_size,
                };
                (r.name, status)
            })
            .collect(),
    })
}

/// Registers a region for a client connected from `peer`.
pub(super) fn system_register(
    regions: &SharedMemory,
    r: &SystemSharedMemoryRegisterRequest,
    peer: Option<SocketAddr>,
) -> Result<(), Status> {
    regions
        .register(&r.name, &r.key, r.offset, r.byte_size, peer)
        .map_err(status)?;
    tracing::info!(region = %quote(&r.name), key = %quote(&r.key), offset = r.offset, byte_size = r.byte_size, "Shared memory region registered.");
    Ok(())
}

/// Unregisters the named region, or every region (an empty name).
pub(super) fn system_unregister(regions: &SharedMemory, name: &str) {
    regions.unregister((!name.is_empty()).then_some(name));
}

/// A CUDA region's status: none is registered.
pub(super) fn cuda_status(name: &str) -> Result<(), Status> {
    if name.is_empty() {
        Ok(())
    } else {
        Err(status(SharedMemoryError::Unknown(quote(name).into_owned())))
    }
}

/// A CUDA registration, refused.
pub(super) fn cuda_register() -> Status {
    status(SharedMemoryError::Cuda)
}
