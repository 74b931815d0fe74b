//! `weir serve`'s dashboard flags and the status feed they start: one [`StatusBoard`] over the
//! served graphs (and the model-less front end, when one runs), sampled once per second for
//! `/v2/weir/status`, its event stream and `/ui` (docs/ui.md).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use clap::Args;
use serde_json::json;
use weir_connectors::http::{StatusFeed, StatusOptions};

use crate::{RunningGraph, StatusBoard};

/// The dashboard's flags.
#[derive(Debug, Args)]
pub(crate) struct UiArgs {
    /// Serve the dashboard (`/ui`) and the status feed (`/v2/weir/status`) on the HTTP listener,
    /// whatever its address. By default they are on when HTTP listens on a loopback address.
    #[arg(long, conflicts_with = "no_ui")]
    ui: bool,
    /// Serve neither the dashboard nor the status feed.
    #[arg(long)]
    no_ui: bool,
    /// Status streams open at once (open dashboards); past it a new one gets 503.
    #[arg(long, default_value_t = 64, env = "WEIR_UI_MAX_VIEWERS",
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    ui_max_viewers: u32,
    /// Keep the path (hops and their times) of one request in this many per graph for the
    /// dashboard's request-path panel and `/v2/weir/requests`; 0 keeps none. Requests sampled
    /// for tracing are always kept while the dashboard is on.
    #[arg(long, default_value_t = weir_engine::trace::paths::DEFAULT_EVERY, env = "WEIR_UI_PATH_EVERY")]
    ui_path_every: u32,
}

impl UiArgs {
    /// Whether the dashboard is on for an HTTP listener at `http`.
    fn on(&self, http: Option<&str>) -> bool {
        match (self.ui, self.no_ui, http) {
            (_, true, _) | (_, _, None) => false,
            (true, _, _) => true,
            (false, false, Some(addr)) => is_loopback(addr),
        }
    }

    /// One request in how many each graph keeps the path of: none while the dashboard is off
    /// (nobody could look), `http` being the HTTP address given, if any.
    pub(crate) fn path_every(&self, http: Option<&str>) -> u32 {
        if self.on(Some(http.unwrap_or(super::listen::DEFAULT_HTTP))) {
            self.ui_path_every
        } else {
            0
        }
    }

    /// The status feed over `running` and `modelless`, when the dashboard is on for `http`.
    pub(crate) fn feed(
        &self,
        http: Option<&str>,
        running: &[RunningGraph],
        modelless: Option<Arc<weir_modelless::ModelLessServer>>,
    ) -> Option<Arc<StatusFeed>> {
        if !self.on(http) {
            return None;
        }
        let mut board = StatusBoard::new(running.iter().map(RunningGraph::status_probe).collect());
        let sampler = Box::new(move || {
            let mut doc = board.sample();
            doc["modelless"] = modelless.as_ref().map_or(json!(null), |m| m.status());
            doc
        });
        let options = StatusOptions {
            max_subscribers: self.ui_max_viewers as usize,
            ..StatusOptions::default()
        };
        Some(StatusFeed::new(sampler, options))
    }
}

/// Whether `addr` (`host:port`) names a loopback address.
fn is_loopback(addr: &str) -> bool {
    match addr.parse::<SocketAddr>() {
        Ok(a) => a.ip().is_loopback(),
        Err(_) => addr
            .rsplit_once(':')
            .map(|(host, _)| host.trim_matches(['[', ']']))
            .is_some_and(|h| {
                h.eq_ignore_ascii_case("localhost")
                    || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dashboard_is_on_by_default_on_loopback_only() {
        let args = |ui, no_ui| UiArgs {
            ui,
            no_ui,
            ui_max_viewers: 64,
            ui_path_every: 16,
        };
        for addr in ["127.0.0.1:8000", "[::1]:0", "localhost:8000"] {
            assert!(args(false, false).on(Some(addr)), "{addr}");
        }
        assert!(!args(false, false).on(Some("0.0.0.0:8000")));
        assert!(args(true, false).on(Some("0.0.0.0:8000")));
        assert!(!args(false, true).on(Some("127.0.0.1:8000")));
        assert!(!args(true, false).on(None));
        assert_eq!(args(false, false).path_every(None), 16);
        assert_eq!(args(false, false).path_every(Some("0.0.0.0:8000")), 0);
        assert_eq!(args(false, true).path_every(None), 0);
    }
}
