//! Metric names, in one place (Prometheus conventions: `weir_<subsystem>_<name>_<unit>`, counters
//! end in `_total`, base units). Operators record into their own counters under these names; the
//! HTTP connector exports them.

/// Requests answered, by graph and outcome.
pub const REQUESTS_TOTAL: &str = "weir_requests_total";
/// Time from admission to answer.
pub const REQUEST_DURATION_SECONDS: &str = "weir_request_duration_seconds";
/// Batches (jobs) put on an executor's queue.
pub const EXECUTOR_ENQUEUED_TOTAL: &str = "weir_executor_enqueued_total";
/// Batches taken off an executor's queue.
pub const EXECUTOR_DEQUEUED_TOTAL: &str = "weir_executor_dequeued_total";
/// Inference calls made by an executor.
pub const EXECUTOR_RUNS_TOTAL: &str = "weir_executor_runs_total";
/// Rows (requests) inferred by an executor.
pub const EXECUTOR_ROWS_TOTAL: &str = "weir_executor_rows_total";
/// Inference calls that failed.
pub const EXECUTOR_ERRORS_TOTAL: &str = "weir_executor_errors_total";
/// Time sessions spent inside ONNX Runtime.
pub const EXECUTOR_BUSY_SECONDS_TOTAL: &str = "weir_executor_busy_seconds_total";
/// Jobs an executor answered (one per request row set handed to it).
pub const EXECUTOR_JOBS_ANSWERED_TOTAL: &str = "weir_executor_jobs_answered_total";
/// Time from a job being queued at an executor to its answer (queue wait plus call), summed.
pub const EXECUTOR_JOB_SECONDS_TOTAL: &str = "weir_executor_job_seconds_total";
/// Duration of each inference call of a node's executor.
pub const EXECUTOR_INFERENCE_SECONDS: &str = "weir_executor_inference_seconds";
/// Rows per inference call.
pub const NODE_BATCH_SIZE: &str = "weir_node_batch_size";
/// Per replica of a model node: 1 while alive.
pub const REPLICA_ALIVE: &str = "weir_replica_alive";
/// Per replica: jobs sent and not answered yet.
pub const REPLICA_OUTSTANDING: &str = "weir_replica_outstanding";
/// Per replica: jobs sent.
pub const REPLICA_DISPATCHED_TOTAL: &str = "weir_replica_dispatched_total";
/// Per node: jobs re-dispatched to another replica.
pub const REPLICA_REDISPATCHED_TOTAL: &str = "weir_replica_redispatched_total";
/// Per node: jobs failed because no replica was alive.
pub const REPLICA_FAILED_TOTAL: &str = "weir_replica_failed_total";
/// Per node: late answers suppressed.
pub const REPLICA_LATE_ANSWERS_TOTAL: &str = "weir_replica_late_answers_total";
/// Per `parallelism: auto` node: requests its executor runs at once now (SERF).
pub const PARALLELISM_CONCURRENCY: &str = "weir_parallelism_concurrency";
/// Per `parallelism: auto` node: intra-op threads of each new request now (SERF).
pub const PARALLELISM_THREADS: &str = "weir_parallelism_threads";
/// Per `parallelism: auto` node: configuration switches applied (SERF).
pub const PARALLELISM_SWITCHES_TOTAL: &str = "weir_parallelism_switches_total";
/// Per `parallelism: auto` node: the scheduler's arrival-rate estimate, requests per second.
pub const ARRIVAL_RATE_ESTIMATE: &str = "weir_arrival_rate_estimate";
/// Per `parallelism: auto` node: re-evaluations of its configurations with measured service rates (SERF).
pub const SERF_PROFILE_UPDATES_TOTAL: &str = "weir_serf_profile_updates_total";
/// Per `parallelism: auto` node: re-evaluations that changed the configurations' ranking (SERF).
pub const SERF_RANKING_CHANGES_TOTAL: &str = "weir_serf_ranking_changes_total";
/// Per `parallelism: auto` node: explorations of configurations without fresh measurements (SERF).
pub const SERF_EXPLORATIONS_TOTAL: &str = "weir_serf_explorations_total";
/// Per `parallelism: auto` node: switches away from a configuration whose queue kept growing (SERF's
/// backlog guard).
pub const SERF_BACKLOG_SWITCHES_TOTAL: &str = "weir_serf_backlog_switches_total";
/// Per `parallelism: auto` node: requests waiting in front of its sessions at the last control tick
/// (what SERF's backlog guard watches; for a graph's only model node, counted from admission).
pub const SERF_WAITING: &str = "weir_serf_waiting";
/// Per `parallelism: auto` node and tuple (`running`, `threads`): service times measured (SERF).
pub const SERF_SERVICE_SAMPLES_TOTAL: &str = "weir_serf_service_samples_total";
/// Per `parallelism: auto` node: service times dropped because the control thread fell behind (SERF).
pub const SERF_SERVICE_SAMPLES_DROPPED_TOTAL: &str = "weir_serf_service_samples_dropped_total";
/// Per `parallelism: auto` node: service times left out because their call began within the settling
/// time after a switch of configuration (SERF; `weir_serf::online`, *Settling after a switch*).
pub const SERF_SERVICE_SAMPLES_SETTLING_TOTAL: &str = "weir_serf_service_samples_settling_total";
/// Per `parallelism: auto` node and tuple: the measured service rate `μ_i` in use, requests per second,
/// once it overrides the offline profile's, calls after an idle gap counted at back-to-back speed
/// (SERF; `weir_serf::online`, *Idle gaps*).
pub const SERF_MEASURED_SERVICE_RATE: &str = "weir_serf_measured_service_rate";
/// Per `parallelism: auto` node and configuration (`concurrency`, `threads`): the mean latency the
/// scheduler predicted for it at its last update's planned load, seconds (absent where unstable).
pub const SERF_PREDICTED_LATENCY: &str = "weir_serf_predicted_latency_seconds";
/// Per `parallelism: auto` node and configuration: the planned load over its capacity (SERF).
pub const SERF_PREDICTED_UTILISATION: &str = "weir_serf_predicted_utilisation";
/// Per `parallelism: auto` node and configuration: its utilisation cap now (SERF's; higher for a
/// configuration shown to hold at the load, `weir_serf::scheduler`, *Earned headroom*; a
/// configuration other than the running one enters only up to `1 − utilisation_band` of it).
pub const SERF_UTILISATION_CAP: &str = "weir_serf_utilisation_cap";
/// Counter: HTTP connections accepted and served (open = accepted - closed).
pub const HTTP_CONNECTIONS_ACCEPTED_TOTAL: &str = "weir_http_connections_accepted_total";
/// Counter: HTTP connections served and since closed.
pub const HTTP_CONNECTIONS_CLOSED_TOTAL: &str = "weir_http_connections_closed_total";
/// Counter: HTTP connections refused at the connection limit.
pub const HTTP_CONNECTIONS_REFUSED_TOTAL: &str = "weir_http_connections_refused_total";
