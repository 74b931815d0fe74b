//! The ingress: requests handed over by [`crate::runtime::GraphRuntime`] become one batch per epoch.
//!
//! Each timely worker has its own ingress channel; the runtime spreads requests over them and wakes
//! the worker with a `SyncActivator`. On each activation the source drains what is waiting (up to
//! `max_batch_rows`), emits it as one batch at the current epoch and moves its capability to the next
//! epoch, so the frontier past epoch `e` means every request of `e` has been answered. When the runtime
//! drops the channel the source drops its capability and the dataflow winds down.

use std::sync::Arc;

use arrow_array::{StringArray, UInt64Array};
use crossbeam_channel::{Receiver, TryRecvError};
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::Scope;
use timely::scheduling::SyncActivator;
use tracing::error;

use super::egress::ReplyTable;
use crate::request::{AdmittedRequest, RequestError};

use super::BatchStream;
use crate::batch::{Batch, TensorColumn};
use crate::lineage;
use crate::tensor::{DType, TensorData};
use crate::validate::GraphInput;

/// Builds the ingress source; hands its activator to `register`.
pub fn ingress<'s>(
    scope: Scope<'s, u64>,
    inputs: Vec<GraphInput>,
    requests: Receiver<AdmittedRequest>,
    max_batch_rows: usize,
    replies: Arc<ReplyTable>,
    register: impl FnOnce(SyncActivator),
) -> BatchStream<'s> {
    source(scope, "ingress", move |cap, info| {
        register(scope.worker().sync_activator_for(info.address.to_vec()));
        let again = scope.activator_for(info.address.clone());
        let mut cap = Some(cap);
        let names: Vec<Arc<str>> = inputs.iter().map(|i| Arc::from(i.name.as_str())).collect();
        let mut pending = Vec::with_capacity(max_batch_rows);
        move |output| {
            let Some(c) = cap.as_mut() else { return };
            let mut closed = false;
            while pending.len() < max_batch_rows {
                match requests.try_recv() {
                    Ok(r) => pending.push(r),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        closed = true;
                        break;
                    }
                }
            }
            if !pending.is_empty() {
                let epoch = *c.time();
                match build_batch(&names, &inputs, &mut pending, epoch) {
                    Ok(batch) => output.session(&*c).give(batch),
                    Err(e) => {
                        // Admission checked every tensor, so this is a bug; answer, never drop.
                        error!(error = %e, "Ingress could not build a batch from admitted requests.");
                        let err = Arc::new(RequestError::Node {
                            node: "ingress".into(),
                            message: e.to_string(),
                        });
                        for r in &pending {
                            replies.answer(r.id, Err(err.as_ref().clone()));
                        }
                    }
                }
                pending.clear();
                c.downgrade(&(epoch + 1));
                if !closed && !requests.is_empty() {
                    // More is waiting beyond max_batch_rows: run again.
                    again.activate();
                }
            }
            if closed && requests.is_empty() {
                cap = None;
            }
        }
    })
}

fn build_batch(
    names: &[Arc<str>],
    inputs: &[GraphInput],
    pending: &mut [AdmittedRequest],
    epoch: u64,
) -> Result<Batch, crate::batch::BatchError> {
    let ids: Vec<u64> = pending.iter().map(|r| r.id).collect();
    let lineage = lineage::from_clients(&ids, epoch);
    let mut columns = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        let shapes = pending.iter().map(|r| r.inputs[i].shape.clone()).collect();
        let data = column_data(input.ty.dtype, pending, i)?;
        let column = TensorColumn::from_shapes(&input.name, shapes, data)?;
        columns.push((names[i].clone(), column));
    }
    let parameters: StringArray = pending.iter().map(|r| r.parameters.as_deref()).collect();
    Batch::new(UInt64Array::from(ids), lineage, columns)?.with_parameters(parameters)
}

/// Input `i` of every pending request, back to back, moved out of the requests (a lone
/// request's tensor becomes the column without a copy: the common case at low load, where a copy
/// would be the ingress's largest cost).
fn column_data(
    dtype: DType,
    pending: &mut [AdmittedRequest],
    i: usize,
) -> Result<TensorData, crate::batch::BatchError> {
    let mut taken = pending
        .iter_mut()
        .map(|r| std::mem::replace(&mut r.inputs[i].data, TensorData::empty(dtype)));
    let mut data = taken.next().unwrap_or_else(|| TensorData::empty(dtype));
    for more in taken {
        data.extend(more)
            .map_err(|e| crate::batch::BatchError::BadColumn {
                column: i.to_string(),
                problem: e.to_string(),
            })?;
    }
    Ok(data)
}
