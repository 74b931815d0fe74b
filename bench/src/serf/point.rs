//! What one point of the experiment measured and predicted, the errors between them, and what one
//! model's run adds up to (the best configuration per load, the machine's drift).

use weir_serf::config::Config;
use weir_serf::profile::Profile;
use weir_serf::table::Candidates;

use super::SecondProfile;
use crate::overhead::median;

/// One configuration at one load.
#[derive(Debug, Clone, PartialEq)]
pub struct SerfPoint {
    /// Configuration run.
    pub config: Config,
    /// Load level `k` (1-based).
    pub level: usize,
    /// Arrival rate, requests per second.
    pub lambda: f64,
    /// Predicted utilisation.
    pub rho: f64,
    /// Predicted mean latency, ms (with what requests after idle gaps add, where profiled).
    pub predicted_ms: f64,
    /// Predicted mean latency without weir's terms (service and path after idle gaps): the
    /// paper's model on the profile's rates plus the back-to-back path time, ms.
    pub back_to_back_ms: f64,
    /// Predicted mean latency as [`Self::predicted_ms`], from the second profile
    /// (`SerfBenchConfig::second_profile`) instead of the first, ms (`None`: none asked for, or
    /// unstable at `λ` on it).
    pub second_predicted_ms: Option<f64>,
    /// Predicted mean latency as [`Self::predicted_ms`], from the profile blended with the calls
    /// served before this point (module docs; `None`: unstable at `λ` on those rates), ms.
    pub online_predicted_ms: Option<f64>,
    /// Predicted mean latency as [`Self::predicted_ms`], on the profile slowed to the service
    /// level of the last point served (module docs; `None`: unstable at `λ` there), ms.
    pub carried_predicted_ms: Option<f64>,
    /// Measured mean latency, ms.
    pub measured_ms: f64,
    /// How late the load generator sent each request after its Poisson arrival time, on average,
    /// ms (part of the measured latency; [`weir::loadgen::LoadReport::mean_send_lateness`]).
    pub send_late_ms: f64,
    /// Requests measured.
    pub requests: usize,
    /// Mean service time the model expects at this load (Eq. 12 with the idle starts), ms.
    pub predicted_service_ms: f64,
    /// Mean ONNX Runtime call time measured during the point, ms (`None`: no call recorded).
    pub measured_service_ms: Option<f64>,
    /// Mean latency predicted with the service rates scaled to the measured service time, ms (`None`:
    /// no service time, or the scaled rates cannot keep up with `λ`).
    pub in_situ_ms: Option<f64>,
    /// Squared coefficient of variation of the node's calls during the point (`None`: fewer than
    /// two calls recorded); the profile's, back to back, is near 0.
    pub measured_service_scv: Option<f64>,
    /// [`Self::in_situ_ms`] with the queue of service times as spread as the calls measured
    /// ([`weir_serf::model::Prediction::waiting_with_scv`]) instead of deterministic, ms (`None`
    /// as for the in-situ prediction, or no SCV).
    pub in_situ_scv_ms: Option<f64>,
    /// Squared coefficient of variation of the gaps between the jobs' arrivals at the node
    /// (`arrival_scv`; `None`: fewer than three): the load generator sends a Poisson stream, and
    /// what reaches the node after the serving path may come in clumps.
    pub node_arrival_scv: Option<f64>,
    /// The in-situ prediction at the node (no path outside it) with the waiting of the measured
    /// arrival and call SCVs (`in_situ_latency_with_scvs`), ms (`None` as for the in-situ
    /// prediction, or either SCV missing).
    pub in_situ_node_spread_ms: Option<f64>,
    /// Coefficient of variation of the mean call time across the point's `SPEED_WINDOW`s
    /// (`window_cv`; `None`: fewer than two windows).
    pub window_service_cv: Option<f64>,
    /// The in-situ prediction per `SPEED_WINDOW`, averaged (`windowed_in_situ_latency`), ms
    /// (`None`: no calls, or a window where the scaled rates cannot keep up).
    pub windowed_in_situ_ms: Option<f64>,
    /// The part of [`Self::predicted_ms`] spent at the model node (waiting in its queue, then the
    /// call): the queueing model's own prediction, ms.
    pub predicted_node_ms: f64,
    /// Measured mean time from a request's job being queued at the node to its answer there, ms
    /// (`None`: no job answered); the rest of the measured latency is the path outside the node.
    pub measured_node_ms: Option<f64>,
}

impl SerfPoint {
    /// `(predicted − measured) / measured`.
    pub fn error(&self) -> f64 {
        relative_error(self.predicted_ms, self.measured_ms)
    }

    /// The error of the prediction without weir's terms.
    pub fn back_to_back_error(&self) -> f64 {
        relative_error(self.back_to_back_ms, self.measured_ms)
    }

    /// The error of the prediction from the second profile.
    pub fn second_error(&self) -> Option<f64> {
        self.against_latency(self.second_predicted_ms)
    }

    /// The error of the prediction from the calls served before the point.
    pub fn online_error(&self) -> Option<f64> {
        self.against_latency(self.online_predicted_ms)
    }

    /// The error of the prediction at the service level of the last point served.
    pub fn carried_error(&self) -> Option<f64> {
        self.against_latency(self.carried_predicted_ms)
    }

    /// The same for the in-situ prediction.
    pub fn in_situ_error(&self) -> Option<f64> {
        self.against_latency(self.in_situ_ms)
    }

    /// The same for the in-situ prediction with the calls' measured spread.
    pub fn in_situ_scv_error(&self) -> Option<f64> {
        self.against_latency(self.in_situ_scv_ms)
    }

    /// The in-situ prediction's error at the node alone: the queueing model, its service level set
    /// to the calls measured, against the node's measured queue wait plus call — what remains for
    /// the model itself.
    pub fn node_in_situ_error(&self) -> Option<f64> {
        let path = self.predicted_path_ms();
        self.against_node(self.in_situ_ms.map(|p| p - path))
    }

    /// The same with the waiting of the measured arrival and call spreads.
    pub fn node_in_situ_spread_error(&self) -> Option<f64> {
        self.against_node(self.in_situ_node_spread_ms)
    }

    /// The same for the in-situ prediction per window.
    pub fn windowed_in_situ_error(&self) -> Option<f64> {
        self.against_latency(self.windowed_in_situ_ms)
    }

    /// The error against the latency from when the load generator actually sent each request
    /// (its lateness, a harness cost of sharing the cores with the served model, taken out).
    pub fn from_send_error(&self) -> f64 {
        relative_error(self.predicted_ms, self.measured_ms - self.send_late_ms)
    }

    /// The error of the time at the node alone: the queueing model against the node's measured
    /// queue wait plus call, without the path outside it.
    pub fn node_error(&self) -> Option<f64> {
        self.against_node(Some(self.predicted_node_ms))
    }

    /// The error of a prediction of the whole latency, if there is one.
    fn against_latency(&self, predicted_ms: Option<f64>) -> Option<f64> {
        predicted_ms.map(|p| relative_error(p, self.measured_ms))
    }

    /// The error of a prediction of the time at the node, if there is one and the node's time was
    /// measured.
    fn against_node(&self, predicted_ms: Option<f64>) -> Option<f64> {
        predicted_ms
            .zip(self.measured_node_ms.filter(|&m| m > 0.0))
            .map(|(p, m)| relative_error(p, m))
    }

    /// The predicted time outside the node (the serving path), ms.
    fn predicted_path_ms(&self) -> f64 {
        self.predicted_ms - self.predicted_node_ms
    }

    /// Predicted and measured time outside the node (the serving path and the load generator's
    /// lateness), ms.
    pub fn outside_the_node_ms(&self) -> Option<(f64, f64)> {
        self.measured_node_ms
            .map(|m| (self.predicted_path_ms(), self.measured_ms - m))
    }
}

/// `(predicted − measured) / measured`.
fn relative_error(predicted: f64, measured: f64) -> f64 {
    (predicted - measured) / measured
}

/// Best-configuration identification at one load: whether the model picks the configuration that
/// measures best (SERF, Fig. 12).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BestAtLoad {
    /// Load level `k`.
    pub level: usize,
    /// Arrival rate.
    pub lambda: f64,
    /// The configuration with the lowest predicted latency among those run.
    pub predicted: Config,
    /// The configuration with the lowest measured latency.
    pub measured: Config,
    /// Measured latency of the predicted best over the measured best (1 when they agree).
    pub ratio: f64,
}

impl BestAtLoad {
    /// The model's choice is the measured best, or within 5 % of it.
    pub fn acceptable(&self) -> bool {
        self.predicted == self.measured || self.ratio <= 1.05
    }
}

/// Everything measured for one model.
#[derive(Debug, Clone)]
pub struct SerfModelResult {
    /// Model name.
    pub model: String,
    /// Its profile.
    pub profile: Profile,
    /// Every point run, by configuration then load.
    pub points: Vec<SerfPoint>,
    /// Best configuration per load.
    pub best: Vec<BestAtLoad>,
    /// Wall time of the load runs, seconds.
    pub load_seconds: f64,
    /// A second profile taken after the load runs: how far the machine drifted meanwhile.
    pub profile_after: Profile,
    /// The second profile, if any, and which: by configuration (the same one for every
    /// configuration when it is taken once).
    pub second_profiles: Option<(SecondProfile, Vec<(Config, Profile)>)>,
}

impl SerfModelResult {
    /// Per configuration, the relative change of its capacity `c·μ_c` from the profile before the
    /// load runs to the one after (noise indicator on a shared machine).
    pub fn drift(&self) -> Vec<(Config, f64)> {
        let after = Candidates::from_profile(&self.profile_after);
        Candidates::from_profile(&self.profile)
            .as_slice()
            .iter()
            .filter_map(|c| {
                after
                    .get(c.config)
                    .map(|a| (c.config, a.capacity() / c.capacity() - 1.0))
            })
            .collect()
    }

    /// Per configuration, the relative change of its capacity from the first profile to the
    /// second.
    pub fn second_profile_drift(&self) -> Vec<(Config, f64)> {
        let first = Candidates::from_profile(&self.profile);
        let Some((_, seconds)) = &self.second_profiles else {
            return Vec::new();
        };
        seconds
            .iter()
            .filter_map(|(config, second)| {
                let now = Candidates::from_profile(second);
                let (then, now) = (first.get(*config)?, now.get(*config)?);
                Some((*config, now.capacity() / then.capacity() - 1.0))
            })
            .collect()
    }
}

/// Mean, p90 and p95 of the absolute values of `errors`.
pub fn error_summary(errors: impl Iterator<Item = f64>) -> (f64, f64, f64) {
    let mut e: Vec<f64> = errors.map(f64::abs).collect();
    if e.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    e.sort_by(f64::total_cmp);
    let q = |f: f64| e[((f * e.len() as f64).ceil() as usize).clamp(1, e.len()) - 1];
    (e.iter().sum::<f64>() / e.len() as f64, q(0.9), q(0.95))
}

/// Median of the per-point `|error|` of `results` (for quoting one figure).
pub fn median_abs_error(results: &[SerfModelResult]) -> f64 {
    median(
        results
            .iter()
            .flat_map(|r| r.points.iter().map(|p| p.error().abs()))
            .collect(),
    )
}
