//! Names: the graph's, its inputs', nodes' and outputs'.
//!
//! A name starts with a letter or `_` and holds only letters, digits, `_` and `-`: never a `.`,
//! which separates a node from its output in a reference (`node.tensor`) and in a batch column.
//! Graph inputs and node ids share one namespace, because a bare reference (`input: image`) may
//! name either; output names are unique among outputs, since they key the reply. An input may
//! be sent by clients under another name (`client_name`), any text a protocol carries; those
//! names are unique among the inputs too.

use std::collections::HashMap;

use super::Validator;
use crate::diagnostic::Location;

/// Whether `name` is usable as a graph, input or node name.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl Validator<'_, '_> {
    pub(super) fn check_names(&mut self) {
        let spec = self.spec;
        if !valid_name(&spec.name) {
            self.error(
                "name".into(),
                spec.name.location,
                format!("graph name `{}` must start with a letter or `_` and hold only letters, digits, `_` and `-`", spec.name.value),
            );
        }
        let mut seen: HashMap<&str, (&str, Location)> = HashMap::new();
        let named = spec
            .inputs
            .iter()
            .map(|i| ("input", &i.name))
            .chain(spec.nodes.iter().map(|n| ("node", n.id())));
        for (what, name) in named {
            let path = if what == "input" {
                format!("inputs.{}", name.value)
            } else {
                format!("nodes.{}.id", name.value)
            };
            if !valid_name(name) {
                self.error(
                    path.clone(),
                    name.location,
                    format!("{what} id `{}` must start with a letter or `_` and hold only letters, digits, `_` and `-`", name.value),
                );
            }
            if let Some((first_what, first_loc)) = seen.get(name.value.as_str()).copied() {
                let at = if first_loc.is_known() {
                    format!(" (first defined at line {})", first_loc.line)
                } else {
                    String::new()
                };
                self.error(
                    path,
                    name.location,
                    format!(
                        "duplicate id `{}`: already used by a graph {first_what}{at}",
                        name.value
                    ),
                )
                .help = Some("node ids and graph input names share one namespace".into());
            } else {
                seen.insert(name.value.as_str(), (what, name.location));
            }
        }
        self.check_client_names();
        let mut outs: HashMap<&str, Location> = HashMap::new();
        for o in &spec.outputs {
            if outs
                .insert(o.name.value.as_str(), o.name.location)
                .is_some()
            {
                self.error(
                    format!("outputs.{}", o.name.value),
                    o.name.location,
                    format!("duplicate graph output name `{}`", o.name.value),
                );
            }
        }
    }
}

impl Validator<'_, '_> {
    /// The names clients send the inputs under (`client_name`, else `name`): each a name a
    /// protocol can carry, none used twice.
    fn check_client_names(&mut self) {
        let spec = self.spec;
        let mut seen: HashMap<&str, &str> = HashMap::new();
        for input in &spec.inputs {
            let client = input
                .client_name
                .as_ref()
                .map_or(input.name.value.as_str(), |c| c.value.as_str());
            let at = input
                .client_name
                .as_ref()
                .map_or(input.name.location, |c| c.location);
            let path = format!("inputs.{}.client_name", input.name.value);
            if client.is_empty()
                || client.len() > MAX_CLIENT_NAME
                || client.chars().any(char::is_control)
            {
                self.error(
                    path.clone(),
                    at,
                    format!(
                        "input `{}`: a client name is 1 to {MAX_CLIENT_NAME} bytes with no control characters",
                        input.name.value
                    ),
                );
            }
            if let Some(first) = seen.insert(client, &input.name.value) {
                self.error(
                    path,
                    at,
                    format!(
                        "inputs `{first}` and `{}` are both sent as `{client}`",
                        input.name.value
                    ),
                );
            }
        }
    }
}

/// The longest name a client may send an input under.
const MAX_CLIENT_NAME: usize = 256;

#[cfg(test)]
mod tests {
    use super::valid_name;

    #[test]
    fn names_start_with_a_letter_or_underscore() {
        for good in ["a", "_x", "squeezenet-1_1", "B2"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", "1a", "-a", "a.b", "a b", "é"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
