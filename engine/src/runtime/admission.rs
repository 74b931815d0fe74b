//! Admission: how a request enters a running graph. Its tensors are checked against the graph's
//! inputs (a bad request is refused with the wrong field and never enters the dataflow), rows are
//! reserved against the in-flight limit, the responder is registered in the reply table, and the
//! request is handed to a worker's ingress round-robin; a request that cannot be handed over is
//! answered from here, so every admitted request is answered once.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{input_checks, GraphRuntime};
use crate::request::{AdmittedRequest, RequestError, Responder};
use crate::tensor::NamedTensor;

impl GraphRuntime {
    /// Submits a request; `responder` is called exactly once with its outcome, unless this returns
    /// an error (then the request was refused and `responder` is dropped uncalled).
    ///
    /// # Errors
    /// [`RequestError::Invalid`] naming the wrong field, [`RequestError::Overloaded`] at the
    /// in-flight limit, [`RequestError::ShuttingDown`] after [`GraphRuntime::shutdown`] began.
    pub fn submit(
        &self,
        inputs: Vec<NamedTensor>,
        responder: Responder,
    ) -> Result<u64, RequestError> {
        self.submit_until(inputs, None, None, responder)
    }

    /// As [`GraphRuntime::submit`], with the client's parameters (a JSON object's text) carried
    /// through the graph in the batch's `parameters` column and returned in the
    /// [`Response`](crate::request::Response) (the rows of one client request share one copy
    /// until the ingress), for a client that stops waiting at `deadline`: a model node the
    /// request still waits for then does not run it, and answers it [`RequestError::Expired`]. A
    /// request already running is finished.
    ///
    /// # Errors
    /// As [`GraphRuntime::submit`].
    pub fn submit_until(
        &self,
        inputs: Vec<NamedTensor>,
        parameters: Option<Arc<str>>,
        deadline: Option<Instant>,
        responder: Responder,
    ) -> Result<u64, RequestError> {
        self.submit_traced(inputs, parameters, deadline, None, responder)
    }

    /// As [`GraphRuntime::submit_until`], for a request sampled in trace `trace_id` when given:
    /// the nodes it passes record their batches' times for its spans
    /// ([`crate::trace::TraceBook`]; read them back with [`GraphRuntime::traces`]).
    ///
    /// # Errors
    /// As [`GraphRuntime::submit`].
    pub fn submit_traced(
        &self,
        inputs: Vec<NamedTensor>,
        parameters: Option<Arc<str>>,
        deadline: Option<Instant>,
        trace_id: Option<[u8; 16]>,
        responder: Responder,
    ) -> Result<u64, RequestError> {
        let mut request = self.admit(inputs, parameters)?;
        request.deadline = deadline;
        let id = request.id;
        if let Some(t) = trace_id {
            self.replies.requests().traces().begin(id, t);
        }
        self.register(&request, responder);
        self.dispatch_or_answer(vec![request]);
        Ok(id)
    }

    /// Submits several requests as one group: they reach the same worker together and are woken
    /// for once, so the ingress puts them in one batch (as long as `max_ingress_batch` allows).
    /// This is how a client's query of several rows (a recommendation query ranking n items, one
    /// row each) stays together up to the model node. Either every request is admitted, and each
    /// responder is called exactly once, or none is (then the error says why and no responder is
    /// called). Returns the ids in order.
    ///
    /// # Errors
    /// As [`GraphRuntime::submit`], for the first request that fails admission, or
    /// [`RequestError::Overloaded`] when the whole group does not fit under the in-flight limit.
    pub fn submit_group(
        &self,
        rows: Vec<(Vec<NamedTensor>, Responder)>,
    ) -> Result<Vec<u64>, RequestError> {
        let n = rows.len();
        let mut checked = Vec::with_capacity(n);
        let mut responders = Vec::with_capacity(n);
        for (inputs, responder) in rows {
            checked.push(input_checks::check_inputs(&self.plan, inputs, None)?);
            responders.push(responder);
        }
        let first = self.reserve(n)?;
        let requests: Vec<AdmittedRequest> = checked
            .into_iter()
            .zip(first..)
            .map(|(inputs, id)| AdmittedRequest {
                id,
                inputs,
                parameters: None,
                deadline: None,
            })
            .collect();
        for (request, responder) in requests.iter().zip(responders) {
            self.register(request, responder);
        }
        let ids = requests.iter().map(|r| r.id).collect();
        self.dispatch_or_answer(requests);
        Ok(ids)
    }

    /// Checks one request and reserves its in-flight slot and id.
    fn admit(
        &self,
        inputs: Vec<NamedTensor>,
        parameters: Option<Arc<str>>,
    ) -> Result<AdmittedRequest, RequestError> {
        let inputs = input_checks::check_inputs(&self.plan, inputs, parameters.as_deref())?;
        let id = self.reserve(1)?;
        Ok(AdmittedRequest {
            id,
            inputs,
            parameters,
            deadline: None,
        })
    }

    /// Reserves `n` in-flight slots and `n` consecutive ids (returning the first), unless the
    /// runtime is closed or the slots would pass the limit.
    fn reserve(&self, n: usize) -> Result<u64, RequestError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(RequestError::ShuttingDown {
                graph: self.plan.name.clone(),
            });
        }
        let limit = self.options.max_in_flight.max(1);
        let in_flight = &self.admission.in_flight;
        let before = in_flight.fetch_add(n, Ordering::AcqRel);
        if before + n > limit {
            in_flight.fetch_sub(n, Ordering::AcqRel);
            return Err(RequestError::Overloaded {
                in_flight: before,
                limit,
            });
        }
        self.admission
            .admitted
            .fetch_add(n as u64, Ordering::Relaxed);
        Ok(self.next_id.fetch_add(n as u64, Ordering::Relaxed))
    }

    /// Files `responder` as the answer to `request`, releasing its in-flight slot when called.
    fn register(&self, request: &AdmittedRequest, responder: Responder) {
        let in_flight = Arc::clone(&self.admission.in_flight);
        let responder: Responder = Box::new(move |outcome| {
            in_flight.fetch_sub(1, Ordering::AcqRel);
            responder(outcome);
        });
        if self.log_requests {
            self.replies.insert_logged(request.clone(), responder);
        } else {
            self.replies.insert(request.id, request.deadline, responder);
        }
    }

    /// Hands admitted requests to the next worker's ingress and wakes it once; false when the
    /// workers are gone.
    fn dispatch(&self, requests: Vec<AdmittedRequest>) -> bool {
        let guard = self.workers.read().unwrap_or_else(|p| p.into_inner());
        let Some(workers) = guard.as_ref() else {
            return false;
        };
        let w = &workers[self.next_worker.fetch_add(1, Ordering::Relaxed) % workers.len()];
        requests.into_iter().all(|r| w.requests.send(r).is_ok()) && w.activator.activate().is_ok()
    }

    /// Dispatches admitted requests, answering each at once if the workers are gone (rather than
    /// leave them hanging).
    fn dispatch_or_answer(&self, requests: Vec<AdmittedRequest>) {
        let ids: Vec<u64> = requests.iter().map(|r| r.id).collect();
        if self.dispatch(requests) {
            return;
        }
        for id in ids {
            self.replies.answer(
                id,
                Err(RequestError::ShuttingDown {
                    graph: self.plan.name.clone(),
                }),
            );
        }
    }

    /// Runs the request first admitted as `original` again, under its next attempt's id (HAMS
    /// recovery: its speculative path was rolled back). Rows of the older attempt are stale from
    /// now on. Returns whether it was re-admitted (false: already answered, or not logged).
    pub fn retry(&self, original: u64) -> bool {
        let Some(request) = self.replies.retry(original) else {
            return false;
        };
        let id = request.id;
        if self.dispatch(vec![request]) {
            return true;
        }
        self.replies.answer(
            id,
            Err(RequestError::ShuttingDown {
                graph: self.plan.name.clone(),
            }),
        );
        false
    }
}
