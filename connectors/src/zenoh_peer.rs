//! Opening zenoh sessions the way weir uses them: peer mode, explicit endpoints, no multicast
//! scouting (so tests and deployments never find strangers), and quick reconnection to the
//! endpoints a process connects to (a restarted executor is found again within a second).

use zenoh::{Config, Session, Wait};

/// Errors opening a session.
#[derive(Debug, thiserror::Error)]
#[error("zenoh: {0}")]
pub struct SessionError(pub String);

fn json_list(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|i| serde_json::Value::String(i.clone()).to_string())
        .collect();
    format!("[{}]", quoted.join(","))
}

/// The configuration of a peer listening on `listen` and connecting to `connect`.
///
/// # Errors
/// When zenoh rejects a value (a malformed locator, say).
pub fn peer_config(listen: &[String], connect: &[String]) -> Result<Config, SessionError> {
    let mut config = Config::default();
    let set = |config: &mut Config, key: &str, value: &str| {
        config
            .insert_json5(key, value)
            .map_err(|e| SessionError(format!("setting `{key}` to {value}: {e}")))
    };
    set(&mut config, "mode", "\"peer\"")?;
    set(&mut config, "scouting/multicast/enabled", "false")?;
    set(&mut config, "listen/endpoints", &json_list(listen))?;
    set(&mut config, "connect/endpoints", &json_list(connect))?;
    set(
        &mut config,
        "connect/retry",
        "{period_init_ms: 100, period_max_ms: 500, period_increase_factor: 1.5}",
    )?;
    Ok(config)
}

/// Opens a peer session listening on `listen` and connecting to `connect`.
///
/// # Errors
/// When the configuration is invalid or a listen endpoint cannot be bound.
pub fn open_peer(listen: &[String], connect: &[String]) -> Result<Session, SessionError> {
    let config = peer_config(listen, connect)?;
    zenoh::open(config)
        .wait()
        .map_err(|e| SessionError(e.to_string()))
}
