//! The executor's side of variant commands ([`crate::variants`]): admits each command through its
//! [`CommandGate`], then loads or unloads on a thread of its own, so zenoh's threads and the
//! models already served never wait on a load.
//!
//! One command per variant runs at a time (a second one for a variant that is loading or
//! unloading is answered at once, with nothing done); a load of a variant that is served already
//! answers at once too. The reply to a command is sent when it is done: for a load, once the
//! variant's queryable is declared and it is in the registry the load reports read.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::{info, warn};
use zenoh::query::{Query, Queryable};
use zenoh::{Session, Wait};

use crate::options::ServeError;
use crate::protocol::{ErrorKind, ErrorReply};
use crate::served::{serve_model, ModelDefaults, Registry};
use crate::variants::{
    control_key, Action, CommandGate, VariantCommand, VariantReply, VariantSource,
};

/// What answers the commands.
struct Loader {
    gate: CommandGate,
    source: Arc<dyn VariantSource>,
    defaults: ModelDefaults,
    models: Registry,
    session: Session,
    prefix: String,
    /// Variants with a command running.
    busy: Mutex<BTreeSet<String>>,
}

/// Declares `<prefix>/control/variants` and answers the commands sent to it.
pub(crate) fn serve_commands(
    session: &Session,
    prefix: &str,
    source: Arc<dyn VariantSource>,
    defaults: ModelDefaults,
    models: Registry,
) -> Result<Queryable<()>, ServeError> {
    let key = control_key(prefix);
    if weir_hams::control_auth::key().is_none() {
        warn!(%key, "No control key (--control-key-file): this executor refuses every variant load and unload command.");
    }
    let loader = Arc::new(Loader {
        gate: CommandGate::new(key.clone()),
        source,
        defaults,
        models,
        session: session.clone(),
        prefix: prefix.to_string(),
        busy: Mutex::default(),
    });
    session
        .declare_queryable(&key)
        .callback(move |query| Arc::clone(&loader).on_command(query))
        .wait()
        .map_err(|e| ServeError::Zenoh(weir_connectors::zenoh_peer::SessionError(e.to_string())))
}

fn refuse(query: &Query, kind: ErrorKind, message: String) {
    let body = ErrorReply { kind, message }.to_bytes();
    let _ = query.reply_err(body).wait();
}

impl Loader {
    fn on_command(self: Arc<Self>, query: Query) {
        let bytes = query
            .payload()
            .map(|p| p.to_bytes().to_vec())
            .unwrap_or_default();
        let command = match self.gate.admit(weir_hams::control_auth::key(), &bytes) {
            Ok(c) => c,
            Err(e) => {
                warn!(key = %query.key_expr(), error = %e, "Variant command refused.");
                refuse(&query, ErrorKind::Refused, e.to_string());
                return;
            }
        };
        if !self.lock_busy().insert(command.variant.clone()) {
            refuse(
                &query,
                ErrorKind::Refused,
                format!("variant `{}` has a command running", command.variant),
            );
            return;
        }
        let variant = command.variant.clone();
        let worker = Arc::clone(&self);
        let spawned = std::thread::Builder::new()
            .name(format!("load {}", command.variant))
            .spawn(move || {
                let outcome = match command.action {
                    Action::Load => worker.load(&command),
                    Action::Unload => Ok(worker.unload(&command)),
                };
                worker.lock_busy().remove(&command.variant);
                match outcome {
                    Ok(reply) => {
                        let body = serde_json::to_vec(&reply).unwrap_or_default();
                        let _ = query.reply(query.key_expr().clone(), body).wait();
                    }
                    Err(message) => {
                        warn!(variant = %command.variant, error = %message, "Variant load failed.");
                        refuse(&query, ErrorKind::LoadFailed, message);
                    }
                }
            });
        if let Err(e) = spawned {
            // The query went with the closure: dropped unanswered, the sender sees no answer.
            warn!(%variant, error = %e, "No thread for a variant command.");
            self.lock_busy().remove(&variant);
        }
    }

    fn lock_busy(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_served(&self, variant: &str) -> bool {
        self.models
            .lock()
            .map(|m| m.contains_key(variant))
            .unwrap_or(false)
    }

    fn load(&self, command: &VariantCommand) -> Result<VariantReply, String> {
        let name = &command.variant;
        let reply = |load_ms| VariantReply {
            action: Action::Load,
            variant: name.clone(),
            load_ms,
        };
        if self.is_served(name) {
            return Ok(reply(0.0));
        }
        let started = Instant::now();
        info!(variant = %name, "Loading a variant.");
        let resolved = self.source.resolve(name)?;
        let executor = self
            .defaults
            .start_model(name, &resolved)
            .map_err(|e| e.to_string())?;
        // An emulated type's slower load: the variant is served once its load time has passed.
        std::thread::sleep(
            self.defaults
                .options
                .emulated_load
                .saturating_sub(started.elapsed()),
        );
        let served = serve_model(
            &self.session,
            &self.prefix,
            name,
            executor,
            (
                self.defaults.options.emulation,
                self.defaults.options.spans.clone(),
            ),
        )
        .map_err(|e| e.to_string())?;
        self.models
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.clone(), served);
        let load_ms = started.elapsed().as_secs_f64() * 1e3;
        info!(variant = %name, load_ms, "Variant loaded and served.");
        Ok(reply(load_ms))
    }

    fn unload(&self, command: &VariantCommand) -> VariantReply {
        let name = &command.variant;
        let served = self
            .models
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        if let Some(served) = served {
            served.retire();
            info!(variant = %name, "Variant unloaded.");
        }
        VariantReply {
            action: Action::Unload,
            variant: name.clone(),
            load_ms: 0.0,
        }
    }
}
