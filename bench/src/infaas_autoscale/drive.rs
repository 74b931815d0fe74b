//! The load and the watch of one run: open-loop Poisson arrivals at a rate that follows the
//! load pattern, sent over keep-alive HTTP connections to a real `weir serve`, and `/metrics`
//! read every second for the instances held and their price.
//!
//! Open loop: the dispatcher schedules each arrival by the pattern's rate at that moment
//! (exponential gaps) and hands it to the first free client; a request's latency runs from its
//! *scheduled* time, so a backlog of busy clients counts against the server, not in its favour.
//! Each request has its own id; the reply must carry it, and every id is accounted for exactly
//! once (answered, refused or failed). A request no client could take up within [`EXPIRE`] of
//! its scheduled time is counted a violation without being sent — the server's own request
//! timeout (the same length) would answer it 504 — so a saturated system cannot stretch a run.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use crossbeam_channel::unbounded;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use serde_json::Value;

use crate::client::Client;

/// How long a request may wait for a client before it counts as unanswered.
pub const EXPIRE: Duration = Duration::from_secs(2);

/// One request's outcome.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Its scheduled send, seconds since the run started.
    pub at_s: f64,
    /// Scheduled send to the end of its reply, ms.
    pub latency_ms: f64,
    /// Whether it was answered 200 with its own id.
    pub ok: bool,
    /// The executor type that served it (the variant name's last part), when answered.
    pub hardware: Option<String>,
}

/// What `/metrics` said at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Seconds since the run started.
    pub at_s: f64,
    /// `weir_infaas_cost_total` (0 without an autoscaler).
    pub cost_total: f64,
    /// `weir_infaas_cost_per_second`.
    pub cost_per_s: f64,
    /// Instances loaded (every state but inactive).
    pub instances: f64,
}

/// Everything one run recorded.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    /// One per request, in no particular order.
    pub outcomes: Vec<Outcome>,
    /// One per second.
    pub samples: Vec<Sample>,
}

/// A rate over time: requests per second at `t` seconds.
pub trait Rate: Sync {
    /// The rate at `t`.
    fn at(&self, t: f64) -> f64;
}

/// One GET over a fresh connection, its body as text.
pub fn get(addr: &str, path: &str) -> Result<String> {
    let mut client = Client::connect(addr)?;
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n");
    let (status, body) = client.exchange(head.as_bytes(), b"")?;
    if status != 200 {
        bail!("GET {path}: {status}");
    }
    String::from_utf8(body).context("metrics are not UTF-8")
}

/// One JSON POST over a fresh connection: the status and the body as text.
pub fn post(addr: &str, path: &str, body: &str) -> Result<(u16, String)> {
    let mut client = Client::connect(addr)?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let (status, reply) = client.exchange(head.as_bytes(), body.as_bytes())?;
    Ok((status, String::from_utf8_lossy(&reply).into_owned()))
}

/// The sum of the series of `family` in Prometheus text `text` (its label sets filtered by `keep`).
fn family_sum(text: &str, family: &str, keep: impl Fn(&str) -> bool) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let labels = match series.strip_prefix(family)? {
                "" => "",
                rest => rest.strip_prefix('{')?,
            };
            keep(labels).then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

/// Reads one [`Sample`] from `/metrics`.
pub fn sample(addr: &str, at_s: f64) -> Result<Sample> {
    let text = get(addr, "/metrics")?;
    Ok(Sample {
        at_s,
        cost_total: family_sum(&text, "weir_infaas_cost_total", |_| true),
        cost_per_s: family_sum(&text, "weir_infaas_cost_per_second", |_| true),
        instances: family_sum(&text, "weir_infaas_instances", |l| {
            !l.contains("\"inactive\"")
        }),
    })
}

/// One request's exchange on `client`: whether it came back 200 with `id`, and the serving type.
fn exchange(client: &mut Client, head: &[u8], body: &[u8], id: &str) -> Result<Option<String>> {
    let (status, reply) = client.exchange(head, body)?;
    if status != 200 {
        return Ok(None);
    }
    let reply: Value = serde_json::from_slice(&reply).map_err(|e| anyhow!("reply: {e}"))?;
    if reply["id"].as_str() != Some(id) {
        bail!("the reply to {id} carries id {}", reply["id"]);
    }
    let variant = reply["parameters"]["variant"].as_str().unwrap_or("");
    Ok(Some(variant.rsplit('-').next().unwrap_or("").to_string()))
}

/// Sends requests at `rate` for `seconds` from `clients` connections to `addr` (`body(id)` is a
/// request's JSON, posted to `path`), sampling `/metrics` every second; `label` names the
/// progress bar.
///
/// # Errors
/// When a connection cannot be made at the start, or an id is answered twice or never.
#[allow(clippy::too_many_arguments)]
pub fn drive(
    addr: &str,
    path: &str,
    body: &(dyn Fn(&str) -> String + Sync),
    rate: &dyn Rate,
    seconds: f64,
    clients: usize,
    seed: u64,
    label: &str,
) -> Result<Recorded> {
    let start = Instant::now();
    let (tx, rx) = unbounded::<(u64, Instant)>();
    let outcomes = Mutex::new(Vec::new());
    let failures = Mutex::new(Vec::<String>::new());
    let samples = Mutex::new(Vec::new());
    let stop = Arc::new(AtomicBool::new(false));
    let bar = ProgressBar::new(seconds.ceil() as u64).with_message(label.to_string());
    bar.set_style(
        ProgressStyle::with_template("{msg:>28} [{bar:30}] {pos}/{len} s")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut sent = 0u64;
    std::thread::scope(|s| -> Result<()> {
        let mut senders = Vec::with_capacity(clients);
        for _ in 0..clients {
            let rx = rx.clone();
            let (outcomes, failures) = (&outcomes, &failures);
            let mut client = Client::connect(addr)?;
            senders.push(s.spawn(move || {
                let mut mine = Vec::new();
                for (n, scheduled) in rx.iter() {
                    let at_s = scheduled.duration_since(start).as_secs_f64();
                    if scheduled.elapsed() > EXPIRE {
                        let latency_ms = scheduled.elapsed().as_secs_f64() * 1e3;
                        let (ok, hardware) = (false, None);
                        mine.push((n, Outcome { at_s, latency_ms, ok, hardware }));
                        continue;
                    }
                    let id = format!("r{n}");
                    let body = body(&id);
                    let head = format!(
                        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    let result = exchange(&mut client, head.as_bytes(), body.as_bytes(), &id);
                    let latency_ms = scheduled.elapsed().as_secs_f64() * 1e3;
                    let hardware = match result {
                        Ok(h) => h,
                        Err(e) => {
                            failures.lock().expect("failures").push(format!("{id}: {e:#}"));
                            // The connection may be broken: a fresh one for the next request.
                            if let Ok(c) = Client::connect(addr) {
                                client = c;
                            }
                            None
                        }
                    };
                    mine.push((
                        n,
                        Outcome {
                            at_s,
                            latency_ms,
                            ok: hardware.is_some(),
                            hardware,
                        },
                    ));
                }
                outcomes.lock().expect("outcomes").extend(mine);
            }));
        }
        drop(rx);
        let (stop_s, samples_s) = (Arc::clone(&stop), &samples);
        s.spawn(move || {
            let mut next = Duration::ZERO;
            while !stop_s.load(Ordering::Acquire) {
                let at = start.elapsed().as_secs_f64();
                match sample(addr, at) {
                    Ok(x) => samples_s.lock().expect("samples").push(x),
                    Err(e) => tracing::warn!(error = %e, "Could not read /metrics."),
                }
                next += Duration::from_secs(1);
                std::thread::sleep(next.saturating_sub(start.elapsed()));
            }
        });
        let mut rng = StdRng::seed_from_u64(seed);
        let mut t = 0.0f64;
        let dispatched = loop {
            let r = rate.at(t).max(0.01);
            let gap = match Exp::new(r) {
                Ok(d) => d.sample(&mut rng),
                Err(e) => break Err(anyhow!("rate {r}: {e}")),
            };
            t += gap;
            if t >= seconds {
                break Ok(());
            }
            let at = start + Duration::from_secs_f64(t);
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            bar.set_position(t as u64);
            if tx.send((sent, at)).is_err() {
                break Err(anyhow!("every client stopped"));
            }
            sent += 1;
        };
        drop(tx);
        // The clients finish what is queued; then the watch stops.
        for sender in senders {
            let _ = sender.join();
        }
        stop.store(true, Ordering::Release);
        dispatched
    })?;
    bar.finish_and_clear();
    let mut outcomes = outcomes.into_inner().expect("outcomes");
    let failures = failures.into_inner().expect("failures");
    if let Some(first) = failures.first() {
        tracing::warn!(count = failures.len(), first = %first, "Requests failed.");
    }
    let ids: HashSet<u64> = outcomes.iter().map(|(n, _)| *n).collect();
    if ids.len() != outcomes.len() || outcomes.len() as u64 != sent {
        bail!(
            "{sent} requests sent, {} outcomes for {} distinct ids",
            outcomes.len(),
            ids.len()
        );
    }
    outcomes.sort_by(|a, b| a.1.at_s.total_cmp(&b.1.at_s));
    Ok(Recorded {
        outcomes: outcomes.into_iter().map(|(_, o)| o).collect(),
        samples: samples.into_inner().expect("samples"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_a_family_by_label() {
        let text = "# HELP x\nweir_infaas_instances{state=\"inactive\"} 5\nweir_infaas_instances{state=\"active\"} 2\nweir_infaas_instances{state=\"overloaded\"} 1\nweir_infaas_cost_total 3.5\nweir_infaas_cost_per_second 1\n";
        assert_eq!(
            family_sum(text, "weir_infaas_instances", |l| !l
                .contains("\"inactive\"")),
            3.0
        );
        assert_eq!(family_sum(text, "weir_infaas_cost_total", |_| true), 3.5);
        assert_eq!(family_sum(text, "weir_infaas_cost", |_| true), 0.0);
    }
}
