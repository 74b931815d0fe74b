//! Opening zenoh sessions the way weir uses them: peer mode, explicit endpoints, no multicast
//! scouting (so tests and deployments never find strangers), and quick reconnection to the
//! endpoints a process connects to (a restarted executor is found again within a second).
//!
//! Security is zenoh's own, switched on by configuration: a process given a zenoh configuration
//! file (`--zenoh-config`) starts every session it opens from that file — TLS links and their
//! certificates, user/password authentication, access control — and weir sets on top only what
//! it must (peer mode, no multicast scouting, the endpoints named on its command line). One file
//! per process, installed once with [`use_config_file`], so the graph's replica session, its
//! zenoh stream connectors and an executor's session cannot disagree about it.
//!
//! Listening is on loopback unless asked otherwise: with no listen endpoint on the command line
//! or in the file, a session listens on `tcp/127.0.0.1:0` (zenoh's own default, every interface,
//! is never used implicitly). An endpoint on every interface (`0.0.0.0`, `[::]`) is taken when
//! named, with a warning when the file switches on neither TLS nor authentication.

use std::path::Path;
use std::sync::OnceLock;
use weir_engine::paths::{read_capped, FileRules};

use tracing::warn;
use zenoh::{Config, Session, Wait};

/// The largest zenoh configuration file read.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Where a session listens when nothing says otherwise.
pub const DEFAULT_LISTEN: &str = "tcp/127.0.0.1:0";

/// Each link's receive buffer when the configuration file sets none: 16 of zenoh's 64 KiB
/// batches. zenoh reads each batch into a buffer from a per-link pool of `buffer_size /
/// batch_size` buffers (one, by default) and keeps a large message's fragments in the buffers they
/// were read into until the message is whole and its receiver lets go of it; while the pool is
/// empty it allocates and zeroes a fresh buffer per batch. A 600 KiB tensor is ten fragments, so
/// with the default nine 64 KiB buffers were allocated, zeroed and freed per message.
pub const RX_BUFFER_BYTES: usize = 16 * 65_535;

/// Transmission batches a link may hold for the `data` priority (queries and replies) when the
/// configuration file sets none: zenoh's most, 16 (its default is 2; batches are allocated only
/// when used). A message is serialised into free batches by the thread that sends it and the
/// link's TX task writes them out; with two, a ten-fragment tensor made the sending thread and
/// the TX task wake each other for every fragment.
pub const TX_DATA_BATCHES: usize = 16;

/// Errors opening a session.
#[derive(Debug, thiserror::Error)]
#[error("zenoh: {0}")]
pub struct SessionError(pub String);

static BASE: OnceLock<Config> = OnceLock::new();

fn json_list(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|i| serde_json::Value::String(i.clone()).to_string())
        .collect();
    format!("[{}]", quoted.join(","))
}

/// Reads and parses a zenoh configuration file (JSON5), refusing one over [`MAX_CONFIG_BYTES`].
///
/// # Errors
/// When the file cannot be read, is too large, or is not a zenoh configuration.
pub fn read_config_file(path: &Path) -> Result<Config, SessionError> {
    let shown = path.display();
    let bytes = read_capped(path, MAX_CONFIG_BYTES, &FileRules::default())
        .map_err(|e| SessionError(e.to_string()))?;
    let text =
        String::from_utf8(bytes).map_err(|_| SessionError(format!("{shown} is not UTF-8")))?;
    Config::from_json5(&text).map_err(|e| SessionError(format!("{shown}: {e}")))
}

/// Makes the file at `path` the base of every session this process opens from now on.
///
/// # Errors
/// As [`read_config_file`], or when a base was installed already.
pub fn use_config_file(path: &Path) -> Result<(), SessionError> {
    let config = read_config_file(path)?;
    BASE.set(config)
        .map_err(|_| SessionError("a zenoh configuration file is already in use".into()))
}

/// Whether `endpoint` binds every interface.
fn binds_every_interface(endpoint: &str) -> bool {
    let address = endpoint.split_once('/').map_or(endpoint, |(_, a)| a);
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    matches!(host, "0.0.0.0" | "[::]" | "::" | "[0:0:0:0:0:0:0:0]")
}

fn secured(config: &Config) -> bool {
    let set = |key: &str| {
        config
            .get_json(key)
            .is_ok_and(|v| v != "null" && v != "false" && v != "{}")
    };
    set("transport/auth/usrpwd/user")
        || set("transport/auth/usrpwd/dictionary_file")
        || set("transport/link/tls/listen_certificate")
        || set("access_control/enabled")
}

/// The configuration of a peer listening on `listen` and connecting to `connect`, on top of the
/// process's configuration file when one is in use.
///
/// # Errors
/// When zenoh rejects a value (a malformed locator, say).
pub fn peer_config(listen: &[String], connect: &[String]) -> Result<Config, SessionError> {
    peer_config_from(BASE.get().cloned(), listen, connect)
}

fn peer_config_from(
    base: Option<Config>,
    listen: &[String],
    connect: &[String],
) -> Result<Config, SessionError> {
    let from_file = base.is_some();
    let mut config = base.unwrap_or_default();
    let set = |config: &mut Config, key: &str, value: &str| {
        config
            .insert_json5(key, value)
            .map_err(|e| SessionError(format!("setting `{key}` to {value}: {e}")))
    };
    let file_listens = from_file
        && config.get_json("listen/endpoints").ok()
            != Config::default().get_json("listen/endpoints").ok();
    set(&mut config, "mode", "\"peer\"")?;
    // Sizes for large messages, each where the file leaves zenoh's default.
    for (key, value) in [
        ("transport/link/rx/buffer_size", RX_BUFFER_BYTES),
        ("transport/link/tx/queue/size/data", TX_DATA_BATCHES),
    ] {
        if config.get_json(key).ok() == Config::default().get_json(key).ok() {
            set(&mut config, key, &value.to_string())?;
        }
    }
    set(&mut config, "scouting/multicast/enabled", "false")?;
    if !listen.is_empty() {
        set(&mut config, "listen/endpoints", &json_list(listen))?;
    } else if !file_listens {
        set(
            &mut config,
            "listen/endpoints",
            &json_list(&[DEFAULT_LISTEN.to_string()]),
        )?;
    }
    if !connect.is_empty() || !from_file {
        set(&mut config, "connect/endpoints", &json_list(connect))?;
    }
    set(
        &mut config,
        "connect/retry",
        "{period_init_ms: 100, period_max_ms: 500, period_increase_factor: 1.5}",
    )?;
    let listening = config.get_json("listen/endpoints").unwrap_or_default();
    let open: Vec<&String> = listen.iter().filter(|e| binds_every_interface(e)).collect();
    if (!open.is_empty() || ["0.0.0.0", "[::]"].iter().any(|h| listening.contains(h)))
        && !secured(&config)
    {
        warn!(endpoints = %listening, "zenoh listens on every interface without TLS, authentication or access control: any host that reaches it can send jobs and HAMS messages; see examples/zenoh-secure.");
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn listening(config: &Config) -> String {
        config.get_json("listen/endpoints").unwrap()
    }

    #[test]
    fn the_default_listen_endpoint_is_loopback() {
        let c = peer_config_from(None, &[], &[]).unwrap();
        assert!(listening(&c).contains("127.0.0.1"), "{}", listening(&c));
        let c = peer_config_from(None, &["tcp/0.0.0.0:7447".into()], &[]).unwrap();
        assert!(listening(&c).contains("0.0.0.0:7447"));
    }

    #[test]
    fn a_files_settings_stay_and_weir_sets_only_its_own() {
        let base = Config::from_json5(
            r#"{ mode: "client", listen: { endpoints: ["tcp/127.0.0.1:7999"] },
                 transport: { auth: { usrpwd: { user: "graph", password: "pw" } } } }"#,
        )
        .unwrap();
        let c = peer_config_from(Some(base), &[], &[]).unwrap();
        assert!(listening(&c).contains("7999"), "{}", listening(&c));
        assert_eq!(c.get_json("mode").unwrap(), "\"peer\"");
        assert!(c
            .get_json("transport/auth/usrpwd/user")
            .unwrap()
            .contains("graph"));
        assert!(secured(&c));
    }

    #[test]
    fn buffers_for_large_messages_are_raised_unless_a_file_sets_them() {
        let rx = "transport/link/rx/buffer_size";
        let tx = "transport/link/tx/queue/size/data";
        let c = peer_config_from(None, &[], &[]).unwrap();
        assert_eq!(c.get_json(rx).unwrap(), RX_BUFFER_BYTES.to_string());
        assert_eq!(c.get_json(tx).unwrap(), TX_DATA_BATCHES.to_string());
        let base = Config::from_json5(
            r#"{ transport: { link: { rx: { buffer_size: 131070 }, tx: { queue: { size: { data: 4 } } } } } }"#,
        )
        .unwrap();
        let c = peer_config_from(Some(base), &[], &[]).unwrap();
        assert_eq!(c.get_json(rx).unwrap(), "131070");
        assert_eq!(c.get_json(tx).unwrap(), "4");
    }

    #[test]
    fn every_interface_is_recognised() {
        assert!(binds_every_interface("tcp/0.0.0.0:7447"));
        assert!(binds_every_interface("tls/[::]:7447"));
        assert!(!binds_every_interface("tcp/127.0.0.1:7447"));
        assert!(!binds_every_interface("tcp/[::1]:7447"));
    }

    #[test]
    fn oversized_or_malformed_files_are_refused() {
        let dir = std::env::temp_dir().join(format!("weir-zcfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.json5");
        std::fs::write(&big, vec![b' '; (MAX_CONFIG_BYTES + 10) as usize]).unwrap();
        assert!(read_config_file(&big).unwrap_err().0.contains("larger"));
        let bad = dir.join("bad.json5");
        std::fs::write(&bad, "{ mode: ").unwrap();
        assert!(read_config_file(&bad).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_secure_examples_are_zenoh_configurations() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/zenoh-secure");
        for file in ["executor.json5", "graph.json5"] {
            let c = read_config_file(&dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(secured(&c), "{file}");
            assert_eq!(
                c.get_json("transport/link/tls/enable_mtls").unwrap(),
                "true",
                "{file}"
            );
        }
    }
}
